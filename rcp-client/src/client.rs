//! [`Client`]: one connection to one RCP server, over stdio (a spawned process) or HTTP.
//!
//! The client runs `initialize` on connect and caches the capabilities; every typed call is
//! gated on them before any I/O (§14.4). Many calls may be in flight at once, correlated by id
//! (§4.7). Dropping a call's future, or its client-side deadline passing, sends
//! `notifications/cancel`; an answer that arrives afterwards is discarded (§13.1). When the
//! transport dies every in-flight call fails with [`ClientError::Closed`].

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use rcp_protocol::capabilities::{Capabilities, Capability};
use rcp_protocol::catalog::CatalogListResult;
use rcp_protocol::content::QueryInput;
use rcp_protocol::embed::{EmbedParams, EmbedResult, MultiVectorResult, SparseEmbedParams, SparseEmbedResult};
use rcp_protocol::feedback::{FeedbackParams, FeedbackResult};
use rcp_protocol::graph::{GraphParams, GraphResult};
use rcp_protocol::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_protocol::lifecycle::{InitializeResult, PeerInfo};
use rcp_protocol::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_protocol::methods::Method;
use rcp_protocol::notifications::{self, LogLevel, LogParams, ProgressParams};
use rcp_protocol::rerank::{RerankParams, RerankResult};
use rcp_protocol::retrieve::WireVector;
use rcp_protocol::transform::{TransformParams, TransformResult};
use rcp_protocol::vectors::decode_f32_base64_at;
use rcp_protocol::{RcpError, RequestId, RetrieveParams, RetrieveResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::error::ClientError;
use crate::gate;

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
    /// A label for diagnostics (the registry id in a federation).
    pub label: String,
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
            label: String::new(),
        }
    }
}

type Pending = oneshot::Sender<Result<Value, ClientError>>;

enum Conn {
    Stdio { tx: mpsc::UnboundedSender<Vec<u8>>, _child: Mutex<Option<tokio::process::Child>> },
    Http { http: reqwest::Client, base: String, headers: Vec<(String, String)>, session: Mutex<Option<String>> },
}

struct Inner {
    label: String,
    conn: Conn,
    pending: Mutex<HashMap<RequestId, Pending>>,
    progress: Mutex<HashMap<String, mpsc::UnboundedSender<ProgressParams>>>,
    next_id: AtomicU64,
    closed: Mutex<Option<String>>,
    info: OnceLock<InitializeResult>,
    options: ClientOptions,
    frames_sent: AtomicU64,
}

/// A connection to one RCP server. Cheap to clone; clones share the connection, and the
/// server process (stdio) is killed when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("label", &self.inner.label)
            .field("server", &self.inner.info.get().map(|i| &i.server))
            .finish()
    }
}

/// A progress stream and the pending result of a call made with a progress token (§9).
pub struct Streaming<T> {
    /// `notifications/progress` frames of this call, in arrival order.
    pub progress: mpsc::UnboundedReceiver<ProgressParams>,
    /// The final result.
    pub result: BoxFuture<'static, Result<T, ClientError>>,
}

impl Client {
    /// Spawns `command` (program and arguments) and speaks NDJSON over its stdio. Its stderr
    /// is forwarded to `tracing` (target `rcp_client::engine`). Runs `initialize`.
    pub async fn connect_stdio(command: &[String], options: ClientOptions) -> Result<Self, ClientError> {
        let (program, args) = command.split_first().ok_or_else(|| ClientError::Connect("empty command".into()))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClientError::Connect(format!("spawn {program}: {e}")))?;
        let stdin = child.stdin.take().ok_or_else(|| ClientError::Connect("no stdin".into()))?;
        let stdout = child.stdout.take().ok_or_else(|| ClientError::Connect("no stdout".into()))?;
        let stderr = child.stderr.take();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let label = if options.label.is_empty() { program.clone() } else { options.label.clone() };
        let inner = Inner::new(label.clone(), Conn::Stdio { tx, _child: Mutex::new(Some(child)) }, options);
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(frame) = rx.recv().await {
                if stdin.write_all(&frame).await.is_err() || stdin.write_all(b"\n").await.is_err() {
                    break;
                }
                if rx.is_empty() && stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let reason = loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        let Some(inner) = weak.upgrade() else { return };
                        inner.on_line(&line);
                    }
                    Ok(None) => break "server closed its stdout".to_owned(),
                    Err(e) => break format!("reading server stdout: {e}"),
                }
            };
            if let Some(inner) = weak.upgrade() {
                inner.close(reason);
            }
        });
        if let Some(stderr) = stderr {
            let label = label.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::info!(target: "rcp_client::engine", engine = %label, "{line}");
                }
            });
        }
        let client = Self { inner };
        client.handshake().await?;
        Ok(client)
    }

    /// Connects to an HTTP server at `base` (e.g. `http://127.0.0.1:8080/rcp`) and runs
    /// `initialize`; a stateful server's `_meta.session` is sent back as `RCP-Session`.
    pub async fn connect_http(base: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| ClientError::Connect(e.to_string()))?;
        let label = if options.label.is_empty() { base.to_owned() } else { options.label.clone() };
        let conn = Conn::Http {
            http,
            base: base.trim_end_matches('/').to_owned(),
            headers: options.http_headers.clone(),
            session: Mutex::new(None),
        };
        let inner = Inner::new(label, conn, options);
        let client = Self { inner };
        client.handshake().await?;
        Ok(client)
    }

    async fn handshake(&self) -> Result<(), ClientError> {
        let o = &self.inner.options;
        let mut caps = json!({});
        if o.receive_logs {
            caps["log"] = json!({});
        }
        let params =
            json!({"protocolVersion": rcp_protocol::PROTOCOL_VERSION, "client": o.client, "capabilities": caps});
        let fut = self.request_once("initialize", params, None, None);
        let v = tokio::time::timeout(o.connect_timeout, fut)
            .await
            .map_err(|_| ClientError::Connect(format!("no initialize answer within {:?}", o.connect_timeout)))??;
        let info: InitializeResult =
            serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("initialize result: {e}")))?;
        if info.protocol_version < o.min_protocol_version {
            let e = ClientError::VersionTooOld { negotiated: info.protocol_version, minimum: o.min_protocol_version };
            self.inner.close(e.to_string());
            return Err(e);
        }
        if let (Conn::Http { session, .. }, Some(token)) =
            (&self.inner.conn, info.meta.as_ref().and_then(|m| m.get("session")).and_then(Value::as_str))
            && let Ok(mut s) = session.lock()
        {
            *s = Some(token.to_owned());
        }
        let _ = self.inner.info.set(info);
        Ok(())
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
        &self.inner.label
    }

    /// How many frames this client has written (requests and notifications). Lets tests prove
    /// that a call refused locally wrote nothing.
    pub fn frames_sent(&self) -> u64 {
        self.inner.frames_sent.load(Ordering::Relaxed)
    }

    /// Why the transport is closed, if it is.
    pub fn closed_reason(&self) -> Option<String> {
        self.inner.closed.lock().ok().and_then(|c| c.clone())
    }

    /// Number of calls awaiting an answer.
    pub fn in_flight(&self) -> usize {
        self.inner.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    // ---- typed calls ----

    /// `retrieve` (§7.7), gated on `retrieve` and the advertised option values.
    pub async fn retrieve(&self, params: RetrieveParams) -> Result<RetrieveResult, ClientError> {
        gate::retrieve(&self.capabilities(), &params)?;
        self.typed("retrieve", &params).await
    }

    /// A plain text search: `retrieve` with `query` and `k`; the result keeps `usage` and
    /// `nextCursor` for paging.
    pub async fn search(&self, query: impl Into<QueryInput>, k: u64) -> Result<RetrieveResult, ClientError> {
        self.retrieve(RetrieveParams::new(query, k)).await
    }

    /// `retrieve` with a progress token: progress frames stream while the call runs.
    pub fn retrieve_streaming(&self, params: RetrieveParams) -> Result<Streaming<RetrieveResult>, ClientError> {
        gate::retrieve(&self.capabilities(), &params)?;
        let value = serde_json::to_value(&params).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let (tx, progress) = mpsc::unbounded_channel();
        let client = self.clone();
        let result = Box::pin(async move {
            let v = client.request_value("retrieve", value, client.inner.options.request_timeout, Some(tx)).await?;
            serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("retrieve result: {e}")))
        });
        Ok(Streaming { progress, result })
    }

    /// `embed` (§7.3): one vector per input, decoded whatever the encoding (`f32-base64` is
    /// requested with `params.encoding`, and each blob must be exactly `dimension × 4` bytes).
    pub async fn embed(&self, params: EmbedParams) -> Result<Vec<Vec<f32>>, ClientError> {
        gate::embed(&self.capabilities(), &params)?;
        let res: EmbedResult = self.typed("embed", &params).await?;
        decode_vectors(res.vectors, res.dimension, "vectors")
    }

    /// `embed/sparse` (§7.4).
    pub async fn embed_sparse(&self, params: SparseEmbedParams) -> Result<SparseEmbedResult, ClientError> {
        gate::method(&self.capabilities(), Method::EmbedSparse)?;
        self.typed("embed/sparse", &params).await
    }

    /// `embed/multi` (§7.5): one matrix per input, decoded.
    pub async fn embed_multi(&self, params: EmbedParams) -> Result<Vec<Vec<Vec<f32>>>, ClientError> {
        gate::method(&self.capabilities(), Method::EmbedMulti)?;
        gate::encoding(
            self.capabilities().multi_vector.as_ref().and_then(|m| m.encodings.as_ref()),
            params.encoding.as_deref(),
            params.strict,
        )?;
        let res: MultiVectorResult = self.typed("embed/multi", &params).await?;
        res.matrices
            .into_iter()
            .enumerate()
            .map(|(i, m)| decode_vectors(m, res.dimension, &format!("matrices[{i}]")))
            .collect()
    }

    /// `rerank` (§7.6).
    pub async fn rerank(&self, params: RerankParams) -> Result<RerankResult, ClientError> {
        gate::rerank(&self.capabilities(), &params)?;
        self.typed("rerank", &params).await
    }

    /// `query/transform` (§7.8).
    pub async fn transform(&self, params: TransformParams) -> Result<TransformResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::QueryTransform)?;
        gate::one_of("method", &params.method, caps.transform.as_ref().map(|t| t.methods.as_slice()))?;
        self.typed("query/transform", &params).await
    }

    /// `graph` (§7.9).
    pub async fn graph(&self, params: GraphParams) -> Result<GraphResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::Graph)?;
        gate::one_of("op", &params.op, caps.graph.as_ref().map(|g| g.ops.as_slice()))?;
        self.typed("graph", &params).await
    }

    /// `index/add` (§7.10), gated on `index.writable`.
    pub async fn index_add(&self, params: IndexAddParams) -> Result<IndexAddResult, ClientError> {
        gate::index_add(&self.capabilities())?;
        self.typed("index/add", &params).await
    }

    /// `index/delete` (§7.11).
    pub async fn index_delete(&self, params: IndexDeleteParams) -> Result<IndexDeleteResult, ClientError> {
        gate::method(&self.capabilities(), Method::IndexDelete)?;
        self.typed("index/delete", &params).await
    }

    /// `catalog/list` (§7.13).
    pub async fn catalog_list(&self) -> Result<CatalogListResult, ClientError> {
        gate::method(&self.capabilities(), Method::CatalogList)?;
        self.typed("catalog/list", &json!({})).await
    }

    /// `feedback` (§7.16).
    pub async fn feedback(&self, params: FeedbackParams) -> Result<FeedbackResult, ClientError> {
        gate::method(&self.capabilities(), Method::Feedback)?;
        self.typed("feedback", &params).await
    }

    /// `memory/build` (§7.17).
    pub async fn memory_build(&self, params: MemoryBuildParams) -> Result<MemoryBuildResult, ClientError> {
        let caps = self.capabilities();
        gate::method(&caps, Method::MemoryBuild)?;
        if let Some(scope) = &params.scope {
            gate::one_of("scope", scope, caps.memory.as_ref().map(|m| m.scopes.as_slice()))?;
        }
        self.typed("memory/build", &params).await
    }

    /// `memory/recall` (§7.17).
    pub async fn memory_recall(&self, params: MemoryRecallParams) -> Result<MemoryRecallResult, ClientError> {
        gate::method(&self.capabilities(), Method::MemoryRecall)?;
        self.typed("memory/recall", &params).await
    }

    /// `info` (§7.2), fetched fresh.
    pub async fn info(&self) -> Result<InitializeResult, ClientError> {
        self.typed("info", &json!({})).await
    }

    /// `ping` (§7.15) with a nonce; fails if the nonce is not echoed.
    pub async fn ping(&self, timeout: Duration) -> Result<Duration, ClientError> {
        let nonce = self.inner.next_id.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let v = self.request_value("ping", json!({"nonce": nonce}), Some(timeout), None).await?;
        if v.get("nonce") != Some(&json!(nonce)) {
            return Err(ClientError::Protocol(format!("ping nonce not echoed: {v}")));
        }
        Ok(started.elapsed())
    }

    /// `shutdown` (§7.12): the server drains and exits.
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        self.request_value("shutdown", json!({}), self.inner.options.request_timeout, None).await.map(|_| ())
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
        match &self.inner.conn {
            Conn::Stdio { .. } => self.inner.send_frame(frame.to_string().into_bytes()),
            Conn::Http { .. } => {
                let inner = Arc::clone(&self.inner);
                let method = method.to_owned();
                tokio::spawn(async move {
                    let _ = inner.http_post(&method, frame.to_string(), false, None).await;
                });
                Ok(())
            }
        }
    }

    async fn typed<P: Serialize, R: DeserializeOwned>(&self, method: &str, params: &P) -> Result<R, ClientError> {
        let value = serde_json::to_value(params).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let v = self.request_value(method, value, self.inner.options.request_timeout, None).await?;
        serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("{method} result: {e}")))
    }

    /// [`Self::request_once`], plus session recovery: when a stateful HTTP server says the
    /// session is unknown or expired (`-32001`), the client runs `initialize` again and retries
    /// the call once (§12.2: "send initialize, then retry").
    async fn request_value(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
        progress: Option<mpsc::UnboundedSender<ProgressParams>>,
    ) -> Result<Value, ClientError> {
        let first = self.request_once(method, params.clone(), timeout, progress.clone()).await;
        let Conn::Http { session, .. } = &self.inner.conn else { return first };
        match first {
            Err(ClientError::Rpc(e))
                if e.code == rcp_protocol::ErrorCode::NOT_INITIALIZED && method != "initialize" =>
            {
                let had_session = session.lock().map(|mut s| s.take().is_some()).unwrap_or(false);
                if !had_session {
                    return Err(ClientError::Rpc(e));
                }
                tracing::debug!(engine = %self.inner.label, "session expired; re-initializing");
                self.handshake().await?;
                self.request_once(method, params, timeout, progress).await
            }
            other => other,
        }
    }

    /// The one request path: id allocation, `_meta.deadlineMs`/`progressToken`, correlation,
    /// deadline, and cancel-on-drop.
    async fn request_once(
        &self,
        method: &str,
        mut params: Value,
        timeout: Option<Duration>,
        progress: Option<mpsc::UnboundedSender<ProgressParams>>,
    ) -> Result<Value, ClientError> {
        if let Some(reason) = self.closed_reason() {
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
                if progress.is_some() {
                    meta.insert("progressToken".into(), json!(format!("p{n}")));
                }
            }
        }
        let token = progress.map(|tx| {
            let key = json!(format!("p{n}")).to_string();
            if let Ok(mut p) = self.inner.progress.lock() {
                p.insert(key.clone(), tx);
            }
            key
        });
        let frame = json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).to_string();
        let mut guard = CallGuard { inner: Arc::clone(&self.inner), id: id.clone(), token, armed: true };
        let result = match &self.inner.conn {
            Conn::Stdio { .. } => {
                let (tx, rx) = oneshot::channel();
                if let Ok(mut p) = self.inner.pending.lock() {
                    p.insert(id.clone(), tx);
                }
                self.inner.send_frame(frame.into_bytes())?;
                let answer = match timeout {
                    Some(t) => {
                        tokio::time::timeout(t, rx).await.map_err(|_| ClientError::Timeout(t.as_millis() as u64))?
                    }
                    None => rx.await,
                };
                answer.unwrap_or_else(|_| Err(ClientError::Closed(self.closed_reason().unwrap_or_default())))
            }
            Conn::Http { .. } => {
                let sse = guard.token.is_some();
                let fut = self.inner.http_post(method, frame, sse, Some(&id));
                match timeout {
                    Some(t) => {
                        tokio::time::timeout(t, fut).await.map_err(|_| ClientError::Timeout(t.as_millis() as u64))?
                    }
                    None => fut.await,
                }
            }
        };
        guard.armed = false;
        result
    }
}

/// Cancels an abandoned call: removes its correlation entry and, over stdio, sends
/// `notifications/cancel` (over HTTP, dropping the request closes it, which the server treats
/// as a cancel).
struct CallGuard {
    inner: Arc<Inner>,
    id: RequestId,
    token: Option<String>,
    armed: bool,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(t) = &self.token
            && let Ok(mut p) = self.inner.progress.lock()
        {
            p.remove(t);
        }
        if !self.armed {
            return;
        }
        let was_pending = self.inner.pending.lock().ok().and_then(|mut p| p.remove(&self.id)).is_some();
        if was_pending && matches!(self.inner.conn, Conn::Stdio { .. }) {
            let frame = json!({"jsonrpc": "2.0", "method": notifications::CANCEL, "params": {"id": self.id, "reason": "abandoned by the client"}});
            let _ = self.inner.send_frame(frame.to_string().into_bytes());
        }
    }
}

impl Inner {
    fn new(label: String, conn: Conn, options: ClientOptions) -> Arc<Self> {
        Arc::new(Self {
            label,
            conn,
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: Mutex::new(None),
            info: OnceLock::new(),
            options,
            frames_sent: AtomicU64::new(0),
        })
    }

    fn send_frame(&self, frame: Vec<u8>) -> Result<(), ClientError> {
        if let Some(reason) = self.closed.lock().ok().and_then(|c| c.clone()) {
            return Err(ClientError::Closed(reason));
        }
        match &self.conn {
            Conn::Stdio { tx, .. } => {
                self.frames_sent.fetch_add(1, Ordering::Relaxed);
                tx.send(frame).map_err(|_| ClientError::Closed("writer stopped".into()))
            }
            Conn::Http { .. } => Err(ClientError::Protocol("send_frame on HTTP".into())),
        }
    }

    /// Marks the transport dead and fails every call in flight.
    fn close(&self, reason: String) {
        if let Ok(mut c) = self.closed.lock() {
            if c.is_some() {
                return;
            }
            *c = Some(reason.clone());
        }
        tracing::debug!(engine = %self.label, %reason, "transport closed");
        let pending: Vec<Pending> =
            self.pending.lock().map(|mut p| p.drain().map(|(_, tx)| tx).collect()).unwrap_or_default();
        for tx in pending {
            let _ = tx.send(Err(ClientError::Closed(reason.clone())));
        }
        if let Ok(mut p) = self.progress.lock() {
            p.clear();
        }
    }

    fn on_line(&self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Array(frames)) => frames.into_iter().for_each(|f| self.on_frame(f)),
            Ok(frame) => self.on_frame(frame),
            Err(e) => tracing::warn!(engine = %self.label, error = %e, "server wrote a line that is not JSON"),
        }
    }

    fn on_frame(&self, frame: Value) {
        if let Some(method) = frame.get("method").and_then(Value::as_str) {
            if frame.get("id").is_none() {
                self.on_notification(method, frame.get("params").cloned().unwrap_or(Value::Null));
            }
            return;
        }
        let Some(id) = frame.get("id").cloned().and_then(|i| serde_json::from_value::<RequestId>(i).ok()) else {
            tracing::warn!(engine = %self.label, %frame, "response without a usable id");
            return;
        };
        let outcome = match (frame.get("result"), frame.get("error")) {
            (_, Some(e)) => Err(serde_json::from_value::<RcpError>(e.clone())
                .map(ClientError::Rpc)
                .unwrap_or_else(|err| ClientError::Protocol(format!("malformed error object ({err}): {e}")))),
            (Some(r), None) => Ok(r.clone()),
            (None, None) => Err(ClientError::Protocol(format!("response with neither result nor error: {frame}"))),
        };
        match self.pending.lock().ok().and_then(|mut p| p.remove(&id)) {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => tracing::debug!(engine = %self.label, %id, "late or unknown answer discarded"),
        }
    }

    fn on_notification(&self, method: &str, params: Value) {
        match method {
            notifications::PROGRESS => {
                let Ok(p) = serde_json::from_value::<ProgressParams>(params) else { return };
                let key = p.progress_token.to_string();
                if let Some(tx) = self.progress.lock().ok().and_then(|m| m.get(&key).cloned()) {
                    let _ = tx.send(p);
                }
            }
            notifications::LOG => {
                let Ok(l) = serde_json::from_value::<LogParams>(params) else { return };
                let engine = &self.label;
                match l.level {
                    LogLevel::Debug => tracing::debug!(target: "rcp_client::log", %engine, "{}", l.message),
                    LogLevel::Info | LogLevel::Notice => {
                        tracing::info!(target: "rcp_client::log", %engine, "{}", l.message)
                    }
                    LogLevel::Warning => tracing::warn!(target: "rcp_client::log", %engine, "{}", l.message),
                    LogLevel::Error => tracing::error!(target: "rcp_client::log", %engine, "{}", l.message),
                }
            }
            _ => {}
        }
    }

    async fn http_post(
        &self,
        method: &str,
        body: String,
        sse: bool,
        id: Option<&RequestId>,
    ) -> Result<Value, ClientError> {
        let Conn::Http { http, base, headers, session } = &self.conn else {
            return Err(ClientError::Protocol("http_post on stdio".into()));
        };
        let mut req = http.post(format!("{base}/{method}")).header("content-type", "application/json").body(body);
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(s) = session.lock().ok().and_then(|s| s.clone()) {
            req = req.header("RCP-Session", s);
        }
        if sse {
            req = req.header("accept", "text/event-stream");
        }
        self.frames_sent.fetch_add(1, Ordering::Relaxed);
        let resp = req.send().await.map_err(|e| ClientError::Closed(format!("HTTP: {e}")))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if is_sse {
            let mut stream = resp.bytes_stream();
            // Bytes until a whole event is in: a multi-byte character may straddle two chunks.
            let mut buf: Vec<u8> = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| ClientError::Closed(format!("HTTP stream: {e}")))?;
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let event = String::from_utf8_lossy(&event);
                    let data: String =
                        event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                    if data.is_empty() {
                        continue;
                    }
                    let frame: Value =
                        serde_json::from_str(&data).map_err(|e| ClientError::Protocol(format!("SSE frame: {e}")))?;
                    if frame.get("id").is_some() {
                        return response_outcome(frame);
                    }
                    self.on_frame(frame);
                }
            }
            return Err(ClientError::Closed("SSE stream ended without a final response".into()));
        }
        let text = resp.text().await.map_err(|e| ClientError::Closed(format!("HTTP body: {e}")))?;
        match serde_json::from_str::<Value>(&text) {
            Ok(frame) if frame.get("id").is_some() => {
                if let (Some(want), Some(got)) =
                    (id, frame.get("id").cloned().and_then(|i| serde_json::from_value::<RequestId>(i).ok()))
                    && *want != got
                {
                    return Err(ClientError::Protocol(format!("answer for id {got} to request {want}")));
                }
                response_outcome(frame)
            }
            _ => Err(ClientError::Closed(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()))),
        }
    }
}

fn response_outcome(frame: Value) -> Result<Value, ClientError> {
    match (frame.get("result"), frame.get("error")) {
        (_, Some(e)) => Err(serde_json::from_value::<RcpError>(e.clone())
            .map(ClientError::Rpc)
            .unwrap_or_else(|err| ClientError::Protocol(err.to_string()))),
        (Some(r), None) => Ok(r.clone()),
        _ => Err(ClientError::Protocol(format!("malformed response: {frame}"))),
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
