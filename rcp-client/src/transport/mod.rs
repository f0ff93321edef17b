//! The client's transports: how frames reach a server and how its answers come back.
//!
//! A [`Transport`] moves frames; the [`Router`] it shares with the client correlates answers
//! with calls by id (§4.7), forwards `notifications/progress` to the call that asked for them
//! (§9) and `notifications/log` to the call's log sink when it has one (the frame carries the
//! call's `_meta.progressToken`), else to `tracing`, and fails every call in flight when the transport
//! dies (§13.1). Two implementations:
//! - [`stream`]: NDJSON over any `AsyncRead`/`AsyncWrite` pair (a child's stdio, a socket, an
//!   in-memory duplex), many calls pipelined on one stream;
//! - [`http`]: one POST per message, with SSE decoding for streamed calls and the `RCP-Session`
//!   of a stateful server (§11).

pub(crate) mod http;
pub(crate) mod tls;

pub use http::read_body;
pub(crate) mod stream;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rcp_wire::notifications::{self, LogLevel, LogParams, ProgressParams};
use rcp_wire::{RcpError, RequestId};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::error::{ClientError, Disconnect};
use crate::limits::{Limits, LogBudget};

/// One request handed to a transport: its id, method and the serialised frame.
pub(crate) struct Request<'a> {
    /// The request id (already in `frame`).
    pub id: &'a RequestId,
    /// The method (already in `frame`); HTTP puts it in the URL path.
    pub method: &'a str,
    /// The whole JSON-RPC request, serialised.
    pub frame: String,
    /// Whether the call asked for progress (`_meta.progressToken`), so HTTP accepts SSE.
    pub streaming: bool,
}

/// What the client needs from a transport. Every method is meaningful for every
/// implementation; none exists only to fail.
pub(crate) trait Transport: Send + Sync + 'static {
    /// Sends a request and resolves to its `result` (or the error that answered it).
    fn request<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Value, ClientError>>;

    /// Sends a notification (no answer expected).
    fn notify(&self, method: &str, frame: String) -> Result<(), ClientError>;

    /// The caller gave up on call `id` before its answer: forget it and, where the transport
    /// needs it, tell the server (`notifications/cancel`, §13.1).
    fn abandon(&self, id: &RequestId);

    /// Records the session token of an `initialize` result (`_meta.session`, §11).
    fn session_started(&self, _token: Option<&str>) {}

    /// Whether the server behind this transport may be shared with other clients in one
    /// process-wide session, so that a -32600 to `initialize` means "already initialized by
    /// someone else" rather than a fault of this connection (HTTP, §5.2, §13).
    fn may_share_session(&self) -> bool {
        false
    }

    /// Forgets the session after the server said it is unknown or expired (-32001); `true`
    /// when there was one, so `initialize` again and one retry may succeed (§12.2).
    fn end_session(&self) -> bool {
        false
    }

    /// Resolves once the server has gone after a successful `shutdown` (§7.12): an engine
    /// process this transport spawned has exited (bounded by a grace period), so whatever it
    /// held (a data directory's lock, a port) is free when the caller goes on. Ready at once
    /// for transports that own no process.
    fn server_gone(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

type Pending = oneshot::Sender<Result<Value, ClientError>>;

/// Where the `notifications/log` frames of one call go: given the connection's label (the
/// registry id in a federation) and the frame. Frames reach it within the connection's log
/// budget, their message capped, as they would reach `tracing`.
pub type LogSink = Arc<dyn Fn(&str, LogParams) + Send + Sync>;

/// Incoming-frame routing shared by a client and its transport.
pub(crate) struct Router {
    label: String,
    pending: Mutex<HashMap<RequestId, Pending>>,
    progress: Mutex<HashMap<String, mpsc::Sender<ProgressParams>>>,
    log_sinks: Mutex<HashMap<String, LogSink>>,
    closed: Mutex<Option<Disconnect>>,
    frames_sent: AtomicU64,
    limits: Limits,
    logs: LogBudget,
}

impl Router {
    /// A router for the connection labelled `label` (used in diagnostics), whose transport
    /// holds what the server sends within `limits`.
    pub(crate) fn new(label: String, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            label,
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            log_sinks: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            frames_sent: AtomicU64::new(0),
            logs: LogBudget::new(&limits),
            limits,
        })
    }

    /// The connection's limits.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The connection's label.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Why the transport closed, if it did.
    pub(crate) fn closed(&self) -> Option<Disconnect> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }

    /// Counts one frame written to the server.
    pub(crate) fn count_frame(&self) {
        self.frames_sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Frames written so far.
    pub(crate) fn frames_sent(&self) -> u64 {
        self.frames_sent.load(Ordering::Relaxed)
    }

    /// Calls awaiting an answer.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Registers call `id`; its answer (or the transport's death) arrives on the receiver.
    pub(crate) fn expect(&self, id: RequestId) -> oneshot::Receiver<Result<Value, ClientError>> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        rx
    }

    /// Forgets call `id`; `true` when it was still awaiting an answer.
    pub(crate) fn forget(&self, id: &RequestId) -> bool {
        self.pending.lock().ok().and_then(|mut p| p.remove(id)).is_some()
    }

    /// Sends the progress frames carrying `token` to `tx`.
    pub(crate) fn watch_progress(&self, token: String, tx: mpsc::Sender<ProgressParams>) {
        if let Ok(mut p) = self.progress.lock() {
            p.insert(token, tx);
        }
    }

    /// Sends the log frames carrying `token` (in `_meta.progressToken`) to `sink`.
    pub(crate) fn watch_logs(&self, token: String, sink: LogSink) {
        if let Ok(mut l) = self.log_sinks.lock() {
            l.insert(token, sink);
        }
    }

    /// Stops forwarding progress and log frames for `token`.
    pub(crate) fn unwatch(&self, token: &str) {
        if let Ok(mut p) = self.progress.lock() {
            p.remove(token);
        }
        if let Ok(mut l) = self.log_sinks.lock() {
            l.remove(token);
        }
    }

    /// Marks the transport dead and fails every call in flight with `reason`.
    pub(crate) fn close(&self, reason: Disconnect) {
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
        if let Ok(mut l) = self.log_sinks.lock() {
            l.clear();
        }
    }

    /// Routes one NDJSON line: a message, or a batch of them (§4.6).
    pub(crate) fn on_line(&self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Array(frames)) => frames.into_iter().for_each(|f| self.on_frame(f)),
            Ok(frame) => self.on_frame(frame),
            Err(e) => tracing::warn!(engine = %self.label, error = %e, "server wrote a line that is not JSON"),
        }
    }

    /// Routes one message: a notification, or the answer to a call in flight.
    pub(crate) fn on_frame(&self, frame: Value) {
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
        let outcome = response_outcome(frame);
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
                if let Some(tx) = self.progress.lock().ok().and_then(|m| m.get(&key).cloned())
                    && let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(p)
                {
                    tracing::debug!(engine = %self.label, token = %key, "progress frame dropped: the caller is not reading them");
                }
            }
            notifications::LOG => {
                let Ok(mut l) = serde_json::from_value::<LogParams>(params) else { return };
                let engine = &self.label;
                // The same budget as the engine's stderr: a flood is summarised, not relayed.
                let suppressed = match self.logs.admit() {
                    Some(n) => n,
                    None => return,
                };
                if suppressed > 0 {
                    tracing::warn!(target: "rcp_client::log", %engine, suppressed, "suppressed {suppressed} log notifications (over the log rate limit)");
                }
                let capped = self.logs.cap(&l.message).len();
                l.message.truncate(capped);
                let token = l.meta.as_ref().and_then(|m| m.get("progressToken")).map(Value::to_string);
                if let Some(sink) = token.and_then(|t| self.log_sinks.lock().ok().and_then(|m| m.get(&t).cloned())) {
                    sink(engine, l);
                    return;
                }
                let message = &l.message;
                match l.level {
                    LogLevel::Debug => tracing::debug!(target: "rcp_client::log", %engine, "{message}"),
                    LogLevel::Info | LogLevel::Notice => {
                        tracing::info!(target: "rcp_client::log", %engine, "{message}")
                    }
                    LogLevel::Warning => tracing::warn!(target: "rcp_client::log", %engine, "{message}"),
                    LogLevel::Error => tracing::error!(target: "rcp_client::log", %engine, "{message}"),
                }
            }
            _ => {}
        }
    }
}

/// The outcome a response frame carries: its `result`, or its `error` as [`ClientError::Rpc`].
pub(crate) fn response_outcome(frame: Value) -> Result<Value, ClientError> {
    match (frame.get("result"), frame.get("error")) {
        (_, Some(e)) => Err(serde_json::from_value::<RcpError>(e.clone())
            .map(ClientError::Rpc)
            .unwrap_or_else(|err| ClientError::decode(format!("malformed error object {e}"), err))),
        (Some(r), None) => Ok(r.clone()),
        (None, None) => Err(ClientError::Protocol(format!("response with neither result nor error: {frame}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn answers_reach_their_call_and_close_fails_the_rest() {
        let router = Router::new("t".into(), Limits::default());
        let one = router.expect(RequestId::from(1));
        let two = router.expect(RequestId::from(2));
        router.on_line(r#"[{"jsonrpc":"2.0","id":1,"result":{"ok":true}}]"#);
        assert_eq!(one.await.ok().and_then(Result::ok), Some(json!({"ok": true})));
        assert_eq!(router.in_flight(), 1);
        router.close(Disconnect::Eof);
        assert!(matches!(two.await, Ok(Err(ClientError::Closed(Disconnect::Eof)))));
        assert!(matches!(router.closed(), Some(Disconnect::Eof)));
    }

    #[test]
    fn a_calls_log_frames_reach_its_sink_and_others_do_not() {
        let router = Router::new("engine-a".into(), Limits::default());
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let into = Arc::clone(&seen);
        let sink: LogSink = Arc::new(move |label: &str, l: LogParams| {
            into.lock().expect("lock").push((label.to_owned(), l.message));
        });
        let token = json!("p7").to_string();
        router.watch_logs(token.clone(), sink);
        let log = |t: &str, m: &str| {
            json!({"jsonrpc":"2.0","method":"notifications/log","params":{"level":"info","message":m,"_meta":{"progressToken":t}}})
                .to_string()
        };
        router.on_line(&log("p7", "mine"));
        router.on_line(&log("p8", "another call's"));
        router.unwatch(&token);
        router.on_line(&log("p7", "after the call"));
        assert_eq!(*seen.lock().expect("lock"), [("engine-a".to_owned(), "mine".to_owned())]);
    }

    #[test]
    fn error_responses_become_rpc_errors() {
        let e = response_outcome(json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}));
        assert!(matches!(e, Err(ClientError::Rpc(ref r)) if r.code == rcp_wire::ErrorCode::METHOD_NOT_FOUND));
        let e = response_outcome(json!({"jsonrpc":"2.0","id":1,"error":{"code":"x"}}));
        assert!(matches!(e, Err(ClientError::Decode { .. })), "{e:?}");
    }
}
