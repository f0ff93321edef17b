//! The dispatcher: one place where every rule of the protocol is applied, whatever the
//! transport. It turns one inbound frame (a request, a notification or a batch) into at most
//! one outbound frame, enforcing lifecycle (§7.1, §13), gating (§7, §12), params validation and
//! the `strict` rule, cancellation (§7.14), deadlines (§13.1) and panics-as-errors.

use std::borrow::Cow;
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use rcp_protocol::capabilities::Capability;
use rcp_protocol::embed::{EmbedResult, MultiVectorResult, SparseEmbedParams, SparseEmbedResult};
use rcp_protocol::feedback::FeedbackParams;
use rcp_protocol::graph::GraphParams;
use rcp_protocol::index::{IndexAddParams, IndexDeleteParams};
use rcp_protocol::lifecycle::InitializeParams;
use rcp_protocol::memory::{MemoryBuildParams, MemoryRecallParams};
use rcp_protocol::methods::Method;
use rcp_protocol::notifications::{self, CancelParams, LogLevel};
use rcp_protocol::rerank::{RerankEntry, RerankResult};
use rcp_protocol::retrieve::WireVector;
use rcp_protocol::transform::TransformParams;
use rcp_protocol::vectors::encode_f32_base64;
use rcp_protocol::{Meta, RcpError, RequestId, RetrieveParams, RetrieveResult};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::context::{ContextParts, RequestContext};
use crate::handler::{BoxFuture, EmbedRequest};
use crate::outbound::Outbound;
use crate::profile::{MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION, Profile};
use crate::server::Server;
use crate::session::{Negotiated, Session};
use crate::validate;

/// The outcome of processing one inbound frame.
pub enum Processed {
    /// Nothing to send (notifications, all-notification batches, stray responses).
    Nothing,
    /// The answer is ready.
    Ready(Vec<u8>),
    /// The answer will be ready when this future completes; transports spawn it.
    Pending(BoxFuture<Option<Vec<u8>>>),
    /// `shutdown` was received: stop reading, drain in-flight requests, then send this answer.
    Shutdown(Vec<u8>),
}

impl std::fmt::Debug for Processed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nothing => f.write_str("Nothing"),
            Self::Ready(b) => write!(f, "Ready({})", String::from_utf8_lossy(b)),
            Self::Pending(_) => f.write_str("Pending"),
            Self::Shutdown(_) => f.write_str("Shutdown"),
        }
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// Keeps an explicit `null` distinguishable from an absent key.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct PingFast<'a> {
    #[serde(default, borrow)]
    nonce: Option<&'a RawValue>,
}

const DUPLICATE_ID: &str = "a request with this id is still in flight on this connection (§4.7)";

/// Whether a raw JSON id is a string or a number (§4.1).
pub(crate) fn is_valid_id(raw: &str) -> bool {
    matches!(raw.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` from already-serialised parts.
pub(crate) fn ok_frame(id: &str, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + id.len() + result.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":<id|null>,"error":{...}}`.
pub(crate) fn error_frame(id: Option<&str>, error: &RcpError) -> Vec<u8> {
    let body = serde_json::to_vec(error).unwrap_or_else(|_| br#"{"code":-32603,"message":"internal error"}"#.to_vec());
    let id = id.unwrap_or("null");
    let mut out = Vec::with_capacity(32 + id.len() + body.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"error\":");
    out.extend_from_slice(&body);
    out.push(b'}');
    out
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, RcpError> {
    serde_json::to_vec(v).map_err(|e| RcpError::internal(format!("could not serialise the result: {e}")))
}

fn finite(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        f64::MIN
    } else if x == f64::INFINITY {
        f64::MAX
    } else {
        x
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "handler panicked".to_owned()
    }
}

impl Server {
    /// Processes one inbound frame (a single message or a batch) for `session`.
    ///
    /// `out` receives notifications the request emits while it runs (progress, logs); the
    /// answer itself is returned. This is the entry point transports use.
    pub fn process(&self, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
        let first = frame.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            return self.process_batch(session, frame, out);
        }
        match self.process_one(session, frame, out) {
            Processed::Shutdown(b) if session.is_shutting_down() => Processed::Shutdown(b),
            other => other,
        }
    }

    fn process_batch(&self, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
        let members: Vec<&RawValue> = match serde_json::from_slice(frame) {
            Ok(m) => m,
            Err(e) => return Processed::Ready(error_frame(None, &RcpError::parse_error(e.to_string()))),
        };
        if members.is_empty() {
            return Processed::Ready(error_frame(None, &RcpError::invalid_request("empty batch")));
        }
        if members.len() > self.shared.options.max_batch {
            let e = RcpError::payload_too_large(format!(
                "batch of {} requests exceeds the limit of {}",
                members.len(),
                self.shared.options.max_batch
            ));
            return Processed::Ready(error_frame(None, &e));
        }
        let mut ready = Vec::new();
        let mut pending = Vec::new();
        for m in members {
            match self.process_one(session, m.get().as_bytes(), out) {
                Processed::Nothing => {}
                Processed::Ready(b) | Processed::Shutdown(b) => ready.push(b),
                Processed::Pending(f) => pending.push(f),
            }
        }
        if ready.is_empty() && pending.is_empty() {
            return Processed::Nothing;
        }
        fn join(parts: Vec<Vec<u8>>) -> Vec<u8> {
            let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
            out.push(b'[');
            for (i, p) in parts.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&p);
            }
            out.push(b']');
            out
        }
        if pending.is_empty() {
            return Processed::Ready(join(ready));
        }
        Processed::Pending(Box::pin(async move {
            let rest = futures::future::join_all(pending).await;
            ready.extend(rest.into_iter().flatten());
            Some(join(ready))
        }))
    }

    fn process_one(&self, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
        if frame.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            // Only an object can be a request; serde would otherwise read an array positionally.
            return match serde_json::from_slice::<Value>(frame) {
                Err(e) => Processed::Ready(error_frame(None, &RcpError::parse_error(e.to_string()))),
                Ok(v) => Processed::Ready(error_frame(
                    None,
                    &RcpError::invalid_request(format!(
                        "not a valid request: a request must be a JSON object, got {}",
                        rcp_protocol::message::json_type(&v)
                    )),
                )),
            };
        }
        let env: Envelope<'_> = match serde_json::from_slice(frame) {
            Ok(env) => env,
            Err(e) => return Self::malformed(frame, e),
        };
        if let Some(v) = &env.jsonrpc
            && v != "2.0"
            && env.id.is_some()
        {
            let id = env.id.map(RawValue::get).filter(|r| is_valid_id(r));
            return Processed::Ready(error_frame(
                id,
                &RcpError::invalid_request(format!("jsonrpc must be \"2.0\", got \"{v}\"")),
            ));
        }
        let Some(method) = env.method.as_deref() else {
            if env.result.is_some() || env.error.is_some() {
                // A response: this server sends no requests, so there is nothing to correlate.
                return Processed::Nothing;
            }
            let id = env.id.map(RawValue::get).filter(|r| is_valid_id(r));
            return Processed::Ready(error_frame(id, &RcpError::invalid_request("missing 'method'")));
        };
        let Some(id) = env.id else {
            self.notification(session, method, env.params);
            return Processed::Nothing;
        };
        let id = id.get();
        if !is_valid_id(id) {
            return Processed::Ready(error_frame(None, &RcpError::invalid_request("id must be a string or a number")));
        }
        if let Some(p) = env.params
            && !p.get().starts_with('{')
        {
            return Processed::Ready(error_frame(
                Some(id),
                &RcpError::invalid_params("params", "params must be an object"),
            ));
        }
        match self.request(session, id, method, env.params, out) {
            Ok(p) => p,
            // Answering a duplicate with its id would hand the client two answers for one id;
            // JSON-RPC's null id says "this frame could not be correlated".
            Err(e) if e.data.as_ref().and_then(|d| d.detail.as_deref()) == Some(DUPLICATE_ID) => {
                Processed::Ready(error_frame(None, &e))
            }
            Err(e) => Processed::Ready(error_frame(Some(id), &e)),
        }
    }

    /// A frame that did not parse as an envelope: invalid JSON (-32700) or valid JSON that is
    /// not a request (-32600, echoing the id when one can be recovered).
    fn malformed(frame: &[u8], e: serde_json::Error) -> Processed {
        if !e.is_data() {
            return Processed::Ready(error_frame(None, &RcpError::parse_error(e.to_string())));
        }
        let value = serde_json::from_slice::<Value>(frame).ok();
        let id =
            value.as_ref().and_then(|v| v.get("id").filter(|i| i.is_string() || i.is_number()).map(|i| i.to_string()));
        let detail = match &value {
            Some(v) if !v.is_object() => {
                format!("a request must be a JSON object, got {}", rcp_protocol::message::json_type(v))
            }
            _ => e.to_string().split(" at line ").next().unwrap_or_default().to_owned(),
        };
        Processed::Ready(error_frame(
            id.as_deref(),
            &RcpError::invalid_request(format!("not a valid request: {detail}")),
        ))
    }

    fn notification(&self, session: &Session, method: &str, params: Option<&RawValue>) {
        if method == notifications::CANCEL {
            match params.map(|p| serde_json::from_str::<CancelParams>(p.get())) {
                Some(Ok(c)) => {
                    let found = session.cancel(&c.id);
                    tracing::debug!(id = %c.id, found, "cancel");
                }
                _ => tracing::debug!("ignoring a malformed notifications/cancel"),
            }
        }
        // Every other notification, known or not, is ignored and never answered (§4.5).
    }

    fn request(
        &self,
        session: &Arc<Session>,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
        out: &Outbound,
    ) -> Result<Processed, RcpError> {
        match method {
            "ping" => {
                let p: PingFast<'_> = params
                    .map(|p| serde_json::from_str(p.get()))
                    .transpose()
                    .map_err(|e| RcpError::invalid_params("params", e.to_string()))?
                    .unwrap_or(PingFast { nonce: None });
                return Ok(Processed::Ready(match p.nonce.map(RawValue::get) {
                    None | Some("null") => ok_frame(id, b"{}"),
                    Some(n) if is_valid_id(n) => {
                        let mut body = Vec::with_capacity(n.len() + 10);
                        body.extend_from_slice(b"{\"nonce\":");
                        body.extend_from_slice(n.as_bytes());
                        body.push(b'}');
                        ok_frame(id, &body)
                    }
                    Some(_) => return Err(RcpError::invalid_params("nonce", "nonce must be a string or a number")),
                }));
            }
            "info" => {
                let info = session.negotiated().map_or(&self.shared.default_info, |n| &n.info);
                return Ok(Processed::Ready(ok_frame(id, info)));
            }
            "initialize" => return self.initialize(session, id, params).map(Processed::Ready),
            "shutdown" => {
                session.request_shutdown();
                return Ok(Processed::Shutdown(ok_frame(id, b"{}")));
            }
            _ => {}
        }
        if method.starts_with("notifications/") {
            return Err(RcpError::invalid_request(format!("'{method}' is a notification and must not carry an id")));
        }
        let Some(neg) = session.negotiated() else {
            return Err(RcpError::not_initialized(method));
        };
        let Some(m) = Method::from_name(method).filter(|m| neg.profile.permits_method(*m)) else {
            return Err(RcpError::unknown_method(method));
        };
        let caps = &neg.capabilities;
        if let Some(cap) = m.capability()
            && !caps.has(cap)
        {
            return Err(RcpError::capability_missing(method, cap.key()));
        }
        if m == Method::IndexAdd && !caps.index.as_ref().is_some_and(|i| i.writable) {
            return Err(RcpError::capability_missing(method, "index (writable: true)"));
        }

        let request_id: RequestId = serde_json::from_str(id).map_err(|_| RcpError::invalid_request("bad id"))?;
        let meta = params
            .filter(|p| memchr::memmem::find(p.get().as_bytes(), b"\"_meta\"").is_some())
            .map(|p| serde_json::from_str::<MetaOnly>(p.get()))
            .transpose()
            .map_err(|e| RcpError::invalid_params("_meta", e.to_string()))?
            .unwrap_or_default()
            .meta;
        let in_flight = session.begin(&request_id).ok_or_else(|| {
            RcpError::invalid_request(format!("id {request_id} is already in flight")).with_detail(DUPLICATE_ID)
        })?;

        let mut budget = match m {
            Method::IndexAdd | Method::IndexDelete | Method::MemoryBuild => self.shared.options.write_deadline,
            _ => self.shared.options.request_deadline,
        };
        if let Some(ms) = meta.as_ref().and_then(|m| m.get("deadlineMs")).and_then(Value::as_u64) {
            budget = budget.min(Duration::from_millis(ms));
        }
        let deadline = Instant::now() + budget;
        let progress = caps
            .streaming
            .as_ref()
            .and(meta.as_ref().and_then(|m| m.get("progressToken")))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .map(|t| (t.clone(), out.clone()));
        let request_level =
            meta.as_ref().and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
        let log = caps.log.as_ref().and(request_level.or(neg.client_log)).map(|level| (level, out.clone()));
        let ctx = RequestContext::new(ContextParts {
            id: request_id.clone(),
            method: m.name(),
            cancel: in_flight.token.clone(),
            deadline,
            progress,
            log,
            profile: neg.profile,
            capabilities: Arc::clone(caps),
            session_id: session.id().map(str::to_owned),
            meta,
        });

        let call = self.call(m, params, ctx)?;
        let id = id.to_owned();
        let token = in_flight.token.clone();
        let budget_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
        Ok(Processed::Pending(Box::pin(async move {
            let started = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = token.cancelled() => Err(RcpError::cancelled(None)),
                r = AssertUnwindSafe(call).catch_unwind() => match r {
                    Ok(r) => r,
                    Err(p) => {
                        let msg = panic_message(p.as_ref());
                        tracing::error!(method = m.name(), panic = %msg, "handler panicked");
                        Err(RcpError::internal(format!("handler panicked: {msg}")))
                    }
                },
                _ = tokio::time::sleep_until(deadline) => {
                    token.cancel();
                    Err(RcpError::timeout(budget_ms))
                }
            };
            in_flight.answered();
            let elapsed = started.elapsed();
            match &outcome {
                Ok(_) => tracing::debug!(method = m.name(), id = %id, latency_us = elapsed.as_micros() as u64, "ok"),
                Err(e) => {
                    tracing::debug!(method = m.name(), id = %id, latency_us = elapsed.as_micros() as u64, code = e.code.0, "error")
                }
            }
            Some(match outcome {
                Ok(body) => ok_frame(&id, &body),
                Err(e) => error_frame(Some(&id), &e),
            })
        })))
    }

    fn initialize(&self, session: &Session, id: &str, params: Option<&RawValue>) -> Result<Vec<u8>, RcpError> {
        let p: InitializeParams = validate::parse(params)?;
        if session.is_stateless() {
            // Stateless HTTP: every request is served at the advertised set; initialize only
            // negotiates and reports it, idempotently (§5.2).
            let profile = negotiate(p.protocol_version)?;
            let info = session.negotiated().map_or(&self.shared.default_info, |n| &n.info);
            return Ok(if profile == Profile::latest() {
                ok_frame(id, info)
            } else {
                ok_frame(id, &self.info_result(profile, &profile.apply(&self.shared.enabled), None))
            });
        }
        if session.is_initialized() {
            return Err(RcpError::invalid_request("already initialized; re-negotiation is not permitted mid-session"));
        }
        let profile = negotiate(p.protocol_version)?;
        let caps = profile.apply(&self.shared.enabled);
        let meta_level =
            p.meta.as_ref().and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
        let client_wants_log = p.capabilities.as_ref().is_some_and(|c| c.log.is_some());
        let client_log = if client_wants_log { Some(meta_level.unwrap_or(LogLevel::Info)) } else { meta_level };
        let info: Arc<[u8]> = Arc::from(self.info_result(profile, &caps, session.id()));
        let n = Negotiated { profile, capabilities: Arc::new(caps), info: Arc::clone(&info), client_log };
        session.set_negotiated(n).map_err(|_| {
            RcpError::invalid_request("already initialized; re-negotiation is not permitted mid-session")
        })?;
        tracing::debug!(client = ?p.client.map(|c| c.name), version = profile.version(), "initialized");
        Ok(ok_frame(id, &info))
    }

    /// Parses and validates params for a gated method and returns the handler call, which
    /// yields the serialised result.
    fn call(
        &self,
        m: Method,
        params: Option<&RawValue>,
        ctx: RequestContext,
    ) -> Result<BoxFuture<Result<Vec<u8>, RcpError>>, RcpError> {
        let h = &self.shared.handlers;
        let caps = ctx.capabilities().clone();
        let missing = || RcpError::capability_missing(m.name(), m.capability().map_or("?", Capability::key));
        let mut notes = Vec::new();
        Ok(match m {
            Method::Retrieve => {
                let handler = h.retrieve.clone().ok_or_else(missing)?;
                let p: RetrieveParams = validate::parse(params)?;
                let req = validate::retrieve(p, &caps, &mut notes)?;
                let k = req.k;
                Box::pin(async move {
                    let started = Instant::now();
                    let mut res = handler.retrieve(req, ctx.clone()).await?;
                    notes.extend(ctx.take_notes());
                    finish_retrieve(&mut res, k, notes, started);
                    to_json(&res)
                })
            }
            Method::Embed => {
                let handler = h.embed.clone().ok_or_else(missing)?;
                let cap = caps.embed.clone().unwrap_or_default();
                let (req, encoding) = validate::embed(
                    validate::parse(params)?,
                    cap.batch_limit,
                    cap.modalities.as_ref(),
                    cap.encodings.as_ref(),
                    &mut notes,
                )?;
                let n = req.inputs.len();
                Box::pin(async move {
                    let vectors = if n == 0 { Vec::new() } else { handler.embed(req, ctx.clone()).await? };
                    notes.extend(ctx.take_notes());
                    let (vectors, encoding) = encode_vectors(vectors, n, cap.dimension as usize, &encoding, "vectors")?;
                    let res =
                        EmbedResult { vectors, encoding, dimension: Some(cap.dimension), meta: notes_meta(notes) };
                    to_json(&res)
                })
            }
            Method::EmbedMulti => {
                let handler = h.multi_vector.clone().ok_or_else(missing)?;
                let cap = caps.multi_vector.clone().unwrap_or_default();
                let (req, encoding) = validate::embed(
                    validate::parse(params)?,
                    None,
                    cap.modalities.as_ref(),
                    cap.encodings.as_ref(),
                    &mut notes,
                )?;
                let n = req.inputs.len();
                Box::pin(async move {
                    let matrices = if n == 0 { Vec::new() } else { handler.embed_multi(req, ctx.clone()).await? };
                    notes.extend(ctx.take_notes());
                    if matrices.len() != n {
                        return Err(RcpError::internal(format!(
                            "engine returned {} matrices for {n} inputs",
                            matrices.len()
                        )));
                    }
                    let mut out = Vec::with_capacity(n);
                    let mut used = None;
                    for m in matrices {
                        let rows = m.len();
                        let (rows, enc) = encode_vectors(m, rows, cap.dimension as usize, &encoding, "matrices")?;
                        used = enc;
                        out.push(rows);
                    }
                    let res = MultiVectorResult {
                        matrices: out,
                        dimension: Some(cap.dimension),
                        encoding: used,
                        meta: notes_meta(notes),
                    };
                    to_json(&res)
                })
            }
            Method::EmbedSparse => {
                let handler = h.sparse_embed.clone().ok_or_else(missing)?;
                let p: SparseEmbedParams = validate::parse(params)?;
                if p.texts.is_none() && p.inputs.is_none() {
                    return Err(RcpError::invalid_params("texts", "missing field `texts`"));
                }
                validate::inputs(p.items(), "texts", None, &["text".to_owned()])?;
                let req = EmbedRequest { inputs: p.items().to_vec(), kind: p.kind, meta: p.meta };
                let n = req.inputs.len();
                Box::pin(async move {
                    let sparse = if n == 0 { Vec::new() } else { handler.embed_sparse(req, ctx.clone()).await? };
                    if sparse.len() != n {
                        return Err(RcpError::internal(format!(
                            "engine returned {} sparse vectors for {n} inputs",
                            sparse.len()
                        )));
                    }
                    if let Some(bad) = sparse
                        .iter()
                        .position(|s| s.indices.len() != s.values.len() || s.values.iter().any(|v| !v.is_finite()))
                    {
                        return Err(RcpError::internal(format!(
                            "sparse vector {bad} is malformed (length mismatch or non-finite weight)"
                        )));
                    }
                    to_json(&SparseEmbedResult { sparse, meta: notes_meta(ctx.take_notes()) })
                })
            }
            Method::Rerank => {
                let handler = h.rerank.clone().ok_or_else(missing)?;
                let (req, top_n) = validate::rerank(validate::parse(params)?, &caps, &mut notes)?;
                let n = req.passages.len();
                Box::pin(async move {
                    let started = Instant::now();
                    let scores = if n == 0 { Vec::new() } else { handler.rerank(req, ctx.clone()).await? };
                    notes.extend(ctx.take_notes());
                    if scores.len() != n {
                        return Err(RcpError::internal(format!(
                            "engine returned {} scores for {n} passages",
                            scores.len()
                        )));
                    }
                    to_json(&finish_rerank(scores, top_n, notes, started))
                })
            }
            Method::QueryTransform => {
                let handler = h.transform.clone().ok_or_else(missing)?;
                let p: TransformParams = validate::parse(params)?;
                let methods = caps.transform.as_ref().map(|t| t.methods.clone()).unwrap_or_default();
                validate::one_of("method", &p.method, &methods)?;
                if p.n == Some(0) {
                    return Err(RcpError::invalid_params("n", "n must be >= 1"));
                }
                Box::pin(async move { to_json(&handler.transform(p, ctx).await?) })
            }
            Method::Graph => {
                let handler = h.graph.clone().ok_or_else(missing)?;
                let p: GraphParams = validate::parse(params)?;
                let ops = caps.graph.as_ref().map(|g| g.ops.clone()).unwrap_or_default();
                validate::one_of("op", &p.op, &ops)?;
                if p.k == Some(0) {
                    return Err(RcpError::invalid_params("k", "k must be >= 1"));
                }
                if p.hops == Some(0) {
                    return Err(RcpError::invalid_params("hops", "hops must be >= 1"));
                }
                Box::pin(async move { to_json(&handler.graph(p, ctx).await?) })
            }
            Method::IndexAdd => {
                let handler = h.index.clone().ok_or_else(missing)?;
                let p: IndexAddParams = validate::parse(params)?;
                let ic = caps.index.clone().unwrap_or_default();
                if p.chunk == Some(true) && ic.chunking != Some(true) {
                    return Err(RcpError::option_unsupported("chunk", "true", &[]));
                }
                if p.contextual == Some(true) && ic.contextual != Some(true) {
                    return Err(RcpError::option_unsupported("contextual", "true", &[]));
                }
                let mut seen = HashSet::new();
                for (i, d) in p.documents.iter().enumerate() {
                    if let Some(doc_id) = &d.id {
                        if doc_id.is_empty() {
                            return Err(RcpError::invalid_params(format!("documents[{i}].id"), "id must not be empty"));
                        }
                        if !seen.insert(doc_id.as_str()) {
                            return Err(RcpError::invalid_params(
                                format!("documents[{i}].id"),
                                format!("duplicate id '{doc_id}' in one batch"),
                            ));
                        }
                    }
                }
                let key =
                    p.meta.as_ref().and_then(|m| m.get("idempotencyKey")).and_then(Value::as_str).map(str::to_owned);
                let expected: Vec<Option<String>> = p.documents.iter().map(|d| d.id.clone()).collect();
                let add = async move {
                    let res = handler.add(p, ctx).await?;
                    if res.ids.len() != expected.len() {
                        return Err(RcpError::internal(format!(
                            "engine returned {} ids for {} documents",
                            res.ids.len(),
                            expected.len()
                        )));
                    }
                    if let Some(i) =
                        expected.iter().zip(&res.ids).position(|(e, got)| e.as_ref().is_some_and(|e| e != got))
                    {
                        return Err(RcpError::internal(format!(
                            "engine returned id '{}' for documents[{i}]",
                            res.ids[i]
                        )));
                    }
                    Ok(res)
                };
                match key {
                    // One write per key: concurrent repeats wait for the first and share its
                    // result; a failed write leaves the key free for a retry (§7.10).
                    Some(k) => {
                        let cell = self
                            .shared
                            .idempotency
                            .lock()
                            .map_err(|_| RcpError::internal("idempotency cache poisoned"))?
                            .cell(k);
                        Box::pin(async move { to_json(cell.get_or_try_init(|| add).await?) })
                    }
                    None => Box::pin(async move { to_json(&add.await?) }),
                }
            }
            Method::IndexDelete => {
                let handler = h.index.clone().ok_or_else(missing)?;
                let p: IndexDeleteParams = validate::parse(params)?;
                Box::pin(async move { to_json(&handler.delete(p, ctx).await?) })
            }
            Method::CatalogList => {
                let handler = h.catalog.clone().ok_or_else(missing)?;
                Box::pin(async move { to_json(&handler.list(ctx).await?) })
            }
            Method::Feedback => {
                let handler = h.feedback.clone().ok_or_else(missing)?;
                let p: FeedbackParams = validate::parse(params)?;
                for (i, s) in p.signals.iter().enumerate() {
                    if let Some(r) = s.reward
                        && !(-1.0..=1.0).contains(&r)
                    {
                        return Err(RcpError::invalid_params(
                            format!("signals[{i}].reward"),
                            "reward must be in [-1,1]",
                        ));
                    }
                }
                Box::pin(async move { to_json(&handler.feedback(p, ctx).await?) })
            }
            Method::MemoryBuild => {
                let handler = h.memory.clone().ok_or_else(missing)?;
                let p: MemoryBuildParams = validate::parse(params)?;
                if let Some(scope) = &p.scope {
                    let scopes = caps.memory.as_ref().map(|m| m.scopes.clone()).unwrap_or_default();
                    validate::one_of("scope", scope, &scopes)?;
                }
                Box::pin(async move { to_json(&handler.build(p, ctx).await?) })
            }
            Method::MemoryRecall => {
                let handler = h.memory.clone().ok_or_else(missing)?;
                let p: MemoryRecallParams = validate::parse(params)?;
                if p.n == Some(0) {
                    return Err(RcpError::invalid_params("n", "n must be >= 1"));
                }
                Box::pin(async move { to_json(&handler.recall(p, ctx).await?) })
            }
            Method::Initialize | Method::Info | Method::Ping | Method::Shutdown => {
                return Err(RcpError::internal("lifecycle method routed to a handler"));
            }
        })
    }
}

/// Version negotiation (§7.1): `min(client, server)`, `-32002` only below the floor.
fn negotiate(client: i64) -> Result<Profile, RcpError> {
    let negotiated = client.min(i64::from(MAX_PROTOCOL_VERSION));
    u32::try_from(negotiated)
        .ok()
        .filter(|v| *v >= MIN_PROTOCOL_VERSION)
        .and_then(Profile::for_version)
        .ok_or_else(|| RcpError::version_mismatch(client, MIN_PROTOCOL_VERSION, MAX_PROTOCOL_VERSION))
}

fn notes_meta(notes: Vec<String>) -> Option<Meta> {
    if notes.is_empty() {
        return None;
    }
    let mut m = Meta::new();
    m.insert("notes".into(), Value::from(notes));
    Some(m)
}

/// Checks count, dimension and finiteness, then applies the encoding (§7.3.1).
fn encode_vectors(
    vectors: Vec<Vec<f32>>,
    expected: usize,
    dimension: usize,
    encoding: &str,
    what: &str,
) -> Result<(Vec<WireVector>, Option<String>), RcpError> {
    if vectors.len() != expected {
        return Err(RcpError::internal(format!("engine returned {} {what} for {expected} inputs", vectors.len())));
    }
    if let Some(i) = vectors.iter().position(|v| v.len() != dimension) {
        return Err(RcpError::internal(format!(
            "{what}[{i}] has {} components, expected {dimension}",
            vectors[i].len()
        )));
    }
    if let Some(i) = vectors.iter().position(|v| v.iter().any(|x| !x.is_finite())) {
        return Err(RcpError::internal(format!("{what}[{i}] contains a non-finite component")));
    }
    Ok(if encoding == "f32-base64" {
        (vectors.iter().map(|v| WireVector::Base64(encode_f32_base64(v))).collect(), Some(encoding.to_owned()))
    } else {
        (vectors.into_iter().map(WireVector::Json).collect(), None)
    })
}

/// Enforces what every `retrieve` result must satisfy: at most `k` hits, unique ids, finite
/// numbers, `confidence` in `[0,1]`, notes and latency.
fn finish_retrieve(res: &mut RetrieveResult, k: usize, notes: Vec<String>, started: Instant) {
    let mut seen = HashSet::new();
    res.hits.retain(|h| seen.insert(h.key()));
    res.hits.truncate(k);
    for h in &mut res.hits {
        h.score = finite(h.score);
        h.confidence = h.confidence.filter(|c| c.is_finite()).map(|c| c.clamp(0.0, 1.0));
        if let Some(s) = h.scores.as_mut() {
            s.retain(|_, v| v.is_finite());
        }
    }
    if !notes.is_empty() {
        let usage = res.usage.get_or_insert_with(Default::default);
        for n in notes {
            if !usage.notes.contains(&n) {
                usage.notes.push(n);
            }
        }
    }
    let usage = res.usage.get_or_insert_with(Default::default);
    if usage.latency_ms.is_none() {
        usage.latency_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    }
}

fn finish_rerank(scores: Vec<f64>, top_n: Option<usize>, notes: Vec<String>, started: Instant) -> RerankResult {
    let scores: Vec<f64> = scores.into_iter().map(finite).collect();
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    if let Some(n) = top_n {
        order.truncate(n);
    }
    let results = order.iter().map(|&i| RerankEntry { index: i, score: scores[i] }).collect();
    let usage = rcp_protocol::Usage {
        reranked: Some(scores.len() as u64),
        latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
        notes,
        ..Default::default()
    };
    RerankResult { scores, order: Some(order), results: Some(results), usage: Some(usage), meta: None }
}
