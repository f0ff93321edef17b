//! [`Client`]: one connection to one RCP server, over any [`Transport`]: a spawned process's
//! stdio, any byte stream pair, or HTTP.
//!
//! The client runs `initialize` on connect and caches the capabilities; every typed call is
//! gated on them before any I/O (§14.4). Many calls may be in flight at once, correlated by id
//! (§4.7). Dropping a call's future, or its client-side deadline passing, abandons it (over a
//! stream, `notifications/cancel` is sent); an answer that arrives afterwards is discarded
//! (§13.1). When the transport dies every in-flight call fails with [`ClientError::Closed`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rcp_wire::capabilities::{Capabilities, Capability};
use rcp_wire::content::QueryInput;
use rcp_wire::embed::{EmbedParams, EmbedResult, MultiVectorResult};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::index::{IndexAddParams, IndexAddResult};
use rcp_wire::lifecycle::{InitializeResult, PeerInfo};
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult};
use rcp_wire::message::EmptyParams;
use rcp_wire::methods::Method;
use rcp_wire::notifications::ProgressParams;
use rcp_wire::request;
use rcp_wire::rerank::{RerankParams, RerankResult};
use rcp_wire::retrieve::WireVector;
use rcp_wire::transform::{TransformParams, TransformResult};
use rcp_wire::vectors::decode_f32_base64_at;
use rcp_wire::{RequestId, RetrieveParams, RetrieveResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::error::{ClientError, ConnectError, Disconnect};
use crate::gate;
use crate::limits::Limits;
use crate::transport::http::HttpTransport;
use crate::transport::stream::StreamTransport;
use crate::transport::tls::TlsOptions;
use crate::transport::{LogSink, Request, Router, Transport};

/// Options of a client connection.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The identity sent in `initialize.client`.
    pub client: PeerInfo,
    /// Lowest protocol version this client speaks; a lower negotiated version aborts (§7.1).
    pub min_protocol_version: u32,
    /// Default client-side deadline per call (propagated as `_meta.deadlineMs`); `None` waits
    /// for ever.
    pub request_timeout: Option<Duration>,
    /// Deadline for spawning/connecting and the `initialize` handshake.
    pub connect_timeout: Duration,
    /// Advertise the `log` client capability, so the server sends `notifications/log` (which
    /// the client forwards to `tracing`).
    pub receive_logs: bool,
    /// Extra HTTP headers (e.g. `Authorization: Bearer ...`).
    pub http_headers: Vec<(String, String)>,
    /// Which `https://` servers to trust beside the system's roots, and the client certificate
    /// to present (§15; feature `tls`).
    pub tls: TlsOptions,
    /// A label for diagnostics (the registry id in a federation).
    pub label: String,
    /// What the server may make this connection hold: frame size and time, the outbound
    /// queue, stderr and log forwarding ([`Limits`] documents the defaults).
    pub limits: Limits,
}

impl ClientOptions {
    /// These options with `limits` (see [`Limits`]).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            client: PeerInfo::new("rcp-client", env!("CARGO_PKG_VERSION")),
            min_protocol_version: 1,
            request_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Duration::from_secs(15),
            receive_logs: false,
            http_headers: Vec::new(),
            tls: TlsOptions::default(),
            label: String::new(),
            limits: Limits::default(),
        }
    }
}

struct Inner {
    transport: Box<dyn Transport>,
    router: Arc<Router>,
    next_id: AtomicU64,
    answers: AtomicU64,
    info: OnceLock<InitializeResult>,
    options: ClientOptions,
}

/// A connection to one RCP server. Cheap to clone; clones share the connection, and the
/// server process (stdio) is killed when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// Where the log frames of this handle's calls go ([`Self::relaying_logs`]).
    logs: Option<LogSink>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("label", &self.inner.router.label())
            .field("server", &self.inner.info.get().map(|i| &i.server))
            .finish()
    }
}

/// Progress frames of one streaming call that may wait unread ([`Streaming::progress`]).
pub const PROGRESS_QUEUE: usize = 256;

/// A progress stream and the pending result of a call made with a progress token (§9).
pub struct Streaming<T> {
    /// `notifications/progress` frames of this call, in arrival order. At most
    /// [`PROGRESS_QUEUE`] wait unread; frames arriving while it is full are dropped (progress
    /// is advisory, §9), so a server flooding progress cannot grow the client.
    pub progress: mpsc::Receiver<ProgressParams>,
    /// The final result.
    pub result: BoxFuture<'static, Result<T, ClientError>>,
}

impl<T> std::fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming").finish_non_exhaustive()
    }
}

impl Client {
    /// Spawns `command` (program and arguments) and speaks NDJSON over its stdio (§5.1). Its
    /// stderr is forwarded to `tracing` (target `rcp_client::engine`). Runs `initialize`.
    pub async fn connect_stdio(command: &[String], options: ClientOptions) -> Result<Self, ClientError> {
        let program = command.first().ok_or(ConnectError::EmptyCommand)?;
        let router =
            Router::new(if options.label.is_empty() { program.clone() } else { options.label.clone() }, options.limits);
        let transport = StreamTransport::spawn(command, &router)?;
        Self::start(Box::new(transport), router, options).await
    }

    /// Speaks NDJSON (§5.1) over any byte stream pair: `reader` carries the server's frames,
    /// `writer` takes this client's. A socket, a pipe, or an in-memory `tokio::io::duplex`
    /// (so a test can run client and server in one process). Runs `initialize`; the end of
    /// `reader` closes the connection and fails every call in flight.
    pub async fn connect_io<R, W>(reader: R, writer: W, options: ClientOptions) -> Result<Self, ClientError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let router = Router::new(
            if options.label.is_empty() { "stream".to_owned() } else { options.label.clone() },
            options.limits,
        );
        let transport = StreamTransport::new(reader, writer, &router);
        Self::start(Box::new(transport), router, options).await
    }

    /// Connects to an HTTP server at `base` (e.g. `http://127.0.0.1:8080/rcp`) and runs
    /// `initialize`; a stateful server's `_meta.session` is sent back as `RCP-Session` (§11).
    pub async fn connect_http(base: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let router =
            Router::new(if options.label.is_empty() { base.to_owned() } else { options.label.clone() }, options.limits);
        let transport =
            HttpTransport::new(base, options.http_headers.clone(), options.connect_timeout, &options.tls, &router)?;
        Self::start(Box::new(transport), router, options).await
    }

    async fn start(
        transport: Box<dyn Transport>,
        router: Arc<Router>,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let inner = Inner {
            transport,
            router,
            next_id: AtomicU64::new(1),
            answers: AtomicU64::new(0),
            info: OnceLock::new(),
            options,
        };
        let client = Self { inner: Arc::new(inner), logs: None };
        client.handshake().await?;
        Ok(client)
    }

    async fn handshake(&self) -> Result<(), ClientError> {
        let o = &self.inner.options;
        let mut caps = json!({});
        if o.receive_logs {
            caps["log"] = json!({});
        }
        let params = json!({"protocolVersion": rcp_wire::PROTOCOL_VERSION, "client": o.client, "capabilities": caps});
        let fut = self.initialize_or_join(params);
        let (v, joined) = tokio::time::timeout(o.connect_timeout, fut)
            .await
            .map_err(|_| ConnectError::HandshakeTimeout(o.connect_timeout))??;
        let what = if joined { "info result" } else { "initialize result" };
        let info: InitializeResult = serde_json::from_value(v).map_err(|e| ClientError::decode(what, e))?;
        for (cap, unparsed) in &info.capabilities.unparsed {
            tracing::warn!(
                engine = %self.label(),
                capability = %cap,
                raw = %unparsed.raw,
                error = %unparsed.error,
                "capability metadata not understood; the capability stays advertised (§6.2)"
            );
        }
        if info.protocol_version < o.min_protocol_version {
            let e = ClientError::VersionTooOld { negotiated: info.protocol_version, minimum: o.min_protocol_version };
            self.inner.router.close(Disconnect::Aborted(e.to_string()));
            return Err(e);
        }
        let session = info.meta.as_ref().and_then(|m| m.get("session")).and_then(Value::as_str);
        self.inner.transport.session_started(if joined { None } else { session });
        let _ = self.inner.info.set(info);
        Ok(())
    }

    /// Sends `initialize`; the result, and whether the session was joined instead. An HTTP
    /// server that keeps one process-wide session refuses a second `initialize` with -32600
    /// (§13); the client then joins that session and takes its capabilities from `info`, which
    /// reports the same set once a session exists (§13.2).
    async fn initialize_or_join(&self, params: Value) -> Result<(Value, bool), ClientError> {
        match self.request_once(Method::Initialize.name(), params, None, None).await {
            Err(ClientError::Rpc(e))
                if e.code == rcp_wire::ErrorCode::INVALID_REQUEST && self.inner.transport.may_share_session() =>
            {
                tracing::info!(
                    engine = %self.label(),
                    message = %e.message,
                    "initialize refused with -32600: the server already holds a session; joining it through info (§13.2)"
                );
                let info = self.request_once(Method::Info.name(), json!({}), None, None).await?;
                Ok((info, true))
            }
            other => other.map(|v| (v, false)),
        }
    }

    /// The `initialize` result: server identity, negotiated version, capabilities.
    pub fn server_info(&self) -> Option<&InitializeResult> {
        self.inner.info.get()
    }

    /// The session's capabilities (fixed for the session, §13.2).
    pub fn capabilities(&self) -> Capabilities {
        self.inner.info.get().map(|i| i.capabilities.clone()).unwrap_or_default()
    }

    /// Whether the server advertised `cap`.
    pub fn supports(&self, cap: Capability) -> bool {
        self.inner.info.get().is_some_and(|i| i.capabilities.has(cap))
    }

    /// The label given in the options (or the command / URL).
    pub fn label(&self) -> &str {
        self.inner.router.label()
    }

    /// How many frames this client has written (requests and notifications). Lets tests prove
    /// that a call refused locally wrote nothing.
    pub fn frames_sent(&self) -> u64 {
        self.inner.router.frames_sent()
    }

    /// Why the transport is closed, if it is.
    pub fn closed_reason(&self) -> Option<String> {
        self.inner.router.closed().map(|d| d.to_string())
    }

    /// How many calls the server has answered (with a result or a JSON-RPC error), the
    /// handshake included: lets a pool tell a connection that serves from one that dies
    /// after `initialize`.
    pub fn answers(&self) -> u64 {
        self.inner.answers.load(Ordering::Relaxed)
    }

    /// A handle on the same connection whose calls each carry a `_meta.progressToken`, so
    /// that the `notifications/log` frames the server sends while one runs (which carry that
    /// token, §17.1) go to `sink` with this connection's label instead of to `tracing`. The
    /// server sends log frames only when asked (`_meta.logLevel`, or the `log` client
    /// capability), and ties them to a call only when it advertises `streaming`; others still
    /// reach `tracing`. A gateway uses it to relay an engine's logs to its own client, naming
    /// the engine.
    pub fn relaying_logs(&self, sink: LogSink) -> Client {
        Client { inner: Arc::clone(&self.inner), logs: Some(sink) }
    }

    /// Number of calls awaiting an answer.
    pub fn in_flight(&self) -> usize {
        self.inner.router.in_flight()
    }

    // ---- typed calls ----

    /// Any method of RCP/1, declared in [`rcp_wire::request`], gated on its capability (§6):
    /// `client.request::<request::MemoryRecall>(&params)` answers a `MemoryRecallResult`. This
    /// is how a method is called; the few named calls below exist because their method adds
    /// something on the client (the advertised option values checked, vectors decoded, a
    /// rerank's scores rebuilt).
    pub async fn request<R: request::Request>(&self, params: &R::Params) -> Result<R::Result, ClientError> {
        self.gate(R::METHOD)?;
        self.typed(R::METHOD, params).await
    }

    /// Any method of RCP/1 by its [`Method`], params and result as JSON, gated on its
    /// capability like [`Self::request`]: what `rcpctl call` sends. [`Self::call`] sends any
    /// method name, an extension's included, ungated.
    pub async fn call_method(&self, method: Method, params: Value) -> Result<Value, ClientError> {
        self.gate(method)?;
        self.request_value(method.name(), params, self.inner.options.request_timeout, None).await
    }

    /// The gate of a method (§6): its capability advertised; the lifecycle methods always pass.
    fn gate(&self, method: Method) -> Result<(), ClientError> {
        match method.capability() {
            Some(_) => gate::method(&self.capabilities(), method),
            None => Ok(()),
        }
    }

    /// `retrieve` (§7.7), gated on `retrieve` and the advertised option values.
    pub async fn retrieve(&self, params: RetrieveParams) -> Result<RetrieveResult, ClientError> {
        gate::retrieve(&self.capabilities(), &params)?;
        self.typed(Method::Retrieve, &params).await
    }

    /// A plain text search: `retrieve` with `query` and `k`; the result keeps `usage` and
    /// `nextCursor` for paging.
    pub async fn search(&self, query: impl Into<QueryInput>, k: u64) -> Result<RetrieveResult, ClientError> {
        self.retrieve(RetrieveParams::new(query, k)).await
    }

    /// `retrieve` with a progress token: progress frames stream while the call runs.
    pub fn retrieve_streaming(&self, params: RetrieveParams) -> Result<Streaming<RetrieveResult>, ClientError> {
        gate::retrieve(&self.capabilities(), &params)?;
        let value = serde_json::to_value(&params).map_err(|e| ClientError::decode("retrieve params", e))?;
        let (tx, progress) = mpsc::channel(PROGRESS_QUEUE);
        let client = self.clone();
        let result = Box::pin(async move {
            let v = client
                .request_value(Method::Retrieve.name(), value, client.inner.options.request_timeout, Some(tx))
                .await?;
            serde_json::from_value(v).map_err(|e| ClientError::decode("retrieve result", e))
        });
        Ok(Streaming { progress, result })
    }

    /// `embed` (§7.3): one vector per input, decoded whatever the encoding (`f32-base64` is
    /// requested with `params.encoding`, and each blob must be exactly `dimension × 4` bytes).
    pub async fn embed(&self, params: EmbedParams) -> Result<Vec<Vec<f32>>, ClientError> {
        gate::embed(&self.capabilities(), &params)?;
        let res: EmbedResult = self.typed(Method::Embed, &params).await?;
        decode_vectors(res.vectors, res.dimension, "vectors")
    }

    /// `embed/multi` (§7.5): one matrix per input, decoded.
    pub async fn embed_multi(&self, params: EmbedParams) -> Result<Vec<Vec<Vec<f32>>>, ClientError> {
        gate::method(&self.capabilities(), Method::EmbedMulti)?;
        gate::encoding(
            self.capabilities().multi_vector.as_ref().and_then(|m| m.encodings.as_ref()),
            params.encoding.as_deref(),
            params.strict,
        )?;
        let res: MultiVectorResult = self.typed(Method::EmbedMulti, &params).await?;
        res.matrices
            .into_iter()
            .enumerate()
            .map(|(i, m)| decode_vectors(m, res.dimension, &format!("matrices[{i}]")))
            .collect()
    }

    /// `rerank` (§7.6). A result that only carries a `results` array gets `scores` rebuilt
    /// by index, one per passage (a passage it left out scores `f64::NEG_INFINITY`).
    pub async fn rerank(&self, params: RerankParams) -> Result<RerankResult, ClientError> {
        gate::rerank(&self.capabilities(), &params)?;
        let mut res: RerankResult = self.typed(Method::Rerank, &params).await?;
        if res.results.is_some() {
            res.cover(params.passages.len());
        }
        Ok(res)
    }

    /// `query/transform` (§7.8).
    pub async fn transform(&self, params: TransformParams) -> Result<TransformResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::QueryTransform)?;
        gate::one_of("method", &params.method, caps.transform.as_ref().map(|t| t.methods.as_slice()))?;
        self.typed(Method::QueryTransform, &params).await
    }

    /// `graph` (§7.9).
    pub async fn graph(&self, params: GraphParams) -> Result<GraphResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::Graph)?;
        gate::one_of("op", &params.op, caps.graph.as_ref().map(|g| g.ops.as_slice()))?;
        self.typed(Method::Graph, &params).await
    }

    /// `index/add` (§7.10), gated on `index.writable` and on the `chunk`/`contextual` flags.
    pub async fn index_add(&self, params: IndexAddParams) -> Result<IndexAddResult, ClientError> {
        gate::index_add(&self.capabilities(), &params)?;
        self.typed(Method::IndexAdd, &params).await
    }

    /// `memory/build` (§7.17).
    pub async fn memory_build(&self, params: MemoryBuildParams) -> Result<MemoryBuildResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::MemoryBuild)?;
        if let Some(scope) = &params.scope {
            gate::one_of("scope", scope, caps.memory.as_ref().map(|m| m.scopes.as_slice()))?;
        }
        self.typed(Method::MemoryBuild, &params).await
    }

    /// `info` (§7.2), fetched fresh.
    pub async fn info(&self) -> Result<InitializeResult, ClientError> {
        self.request::<request::Info>(&EmptyParams::default()).await
    }

    /// `ping` (§7.15) with a nonce; fails if the nonce is not echoed.
    pub async fn ping(&self, timeout: Duration) -> Result<Duration, ClientError> {
        let nonce = self.inner.next_id.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let v = self.request_value(Method::Ping.name(), json!({"nonce": nonce}), Some(timeout), None).await?;
        if v.get("nonce") != Some(&json!(nonce)) {
            return Err(ClientError::Protocol(format!("ping nonce not echoed: {v}")));
        }
        Ok(started.elapsed())
    }

    /// `shutdown` (§7.12): the server drains and exits. For an engine this client spawned,
    /// the call returns once the process has exited (at most a few seconds after the answer),
    /// so a data directory it locked can be opened again straight away.
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        self.request_value(Method::Shutdown.name(), json!({}), self.inner.options.request_timeout, None).await?;
        self.inner.transport.server_gone().await;
        Ok(())
    }

    /// A raw call with no gating: any method, any params.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.request_value(method, params, self.inner.options.request_timeout, None).await
    }

    /// A raw call with an explicit client-side deadline.
    pub async fn call_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        self.request_value(method, params, Some(timeout), None).await
    }

    /// Sends a notification (no answer expected).
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        let frame = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.inner.transport.notify(method, frame.to_string())
    }

    async fn typed<P: Serialize, R: DeserializeOwned>(&self, method: Method, params: &P) -> Result<R, ClientError> {
        let name = method.name();
        let value = serde_json::to_value(params).map_err(|e| ClientError::decode(format!("{name} params"), e))?;
        let v = self.request_value(name, value, self.inner.options.request_timeout, None).await?;
        serde_json::from_value(v).map_err(|e| ClientError::decode(format!("{name} result"), e))
    }

    /// [`Self::request_once`], plus session recovery: when a stateful server says the session
    /// is unknown or expired (`-32001`) and the transport had one, the client runs `initialize`
    /// again and retries the call once (§12.2: "send initialize, then retry").
    async fn request_value(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
        progress: Option<mpsc::Sender<ProgressParams>>,
    ) -> Result<Value, ClientError> {
        let first = self.request_once(method, params.clone(), timeout, progress.clone()).await;
        match first {
            Err(ClientError::Rpc(e))
                if e.code == rcp_wire::ErrorCode::NOT_INITIALIZED && method != Method::Initialize.name() =>
            {
                if !self.inner.transport.end_session() {
                    return Err(ClientError::Rpc(e));
                }
                tracing::debug!(engine = %self.label(), "session expired; re-initializing");
                self.handshake().await?;
                self.request_once(method, params, timeout, progress).await
            }
            other => other,
        }
    }

    /// The one request path: id allocation, `_meta.deadlineMs`/`progressToken`, the deadline,
    /// and abandon-on-drop; the transport does the I/O and the correlation.
    async fn request_once(
        &self,
        method: &str,
        mut params: Value,
        timeout: Option<Duration>,
        progress: Option<mpsc::Sender<ProgressParams>>,
    ) -> Result<Value, ClientError> {
        if let Some(reason) = self.inner.router.closed() {
            return Err(ClientError::Closed(reason));
        }
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::from(n);
        if let Value::Object(obj) = &mut params {
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Value::Object(meta) = meta {
                if let Some(t) = timeout {
                    meta.entry("deadlineMs").or_insert_with(|| json!(t.as_millis() as u64));
                }
                if progress.is_some() || self.logs.is_some() {
                    meta.insert("progressToken".into(), json!(format!("p{n}")));
                }
            }
        }
        let token = (progress.is_some() || self.logs.is_some()).then(|| {
            let key = json!(format!("p{n}")).to_string();
            if let Some(tx) = progress {
                self.inner.router.watch_progress(key.clone(), tx);
            }
            if let Some(sink) = &self.logs {
                self.inner.router.watch_logs(key.clone(), Arc::clone(sink));
            }
            key
        });
        let frame = json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).to_string();
        let mut guard = CallGuard { inner: &self.inner, id: &id, token, armed: true };
        let request = Request { id: &id, method, frame, streaming: guard.token.is_some() };
        let call = self.inner.transport.request(request);
        let result = match timeout {
            Some(t) => tokio::time::timeout(t, call).await.map_err(|_| ClientError::Timeout(t.as_millis() as u64))?,
            None => call.await,
        };
        guard.armed = false;
        if matches!(result, Ok(_) | Err(ClientError::Rpc(_))) {
            self.inner.answers.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// Abandons a call whose future was dropped or whose deadline passed: stops its progress
/// and log streams and lets the transport forget it (and tell the server, where it needs to).
struct CallGuard<'a> {
    inner: &'a Inner,
    id: &'a RequestId,
    token: Option<String>,
    armed: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = &self.token {
            self.inner.router.unwatch(t);
        }
        if self.armed {
            self.inner.transport.abandon(self.id);
        }
    }
}

fn decode_vectors(vectors: Vec<WireVector>, dimension: Option<u32>, field: &str) -> Result<Vec<Vec<f32>>, ClientError> {
    vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            WireVector::Json(v) => Ok(v),
            WireVector::Base64(s) => {
                let dim =
                    dimension.ok_or_else(|| ClientError::Protocol("binary vectors without 'dimension'".into()))?;
                decode_f32_base64_at(&s, dim as usize, &format!("{field}[{i}]")).map_err(ClientError::InvalidParams)
            }
        })
        .collect()
}
