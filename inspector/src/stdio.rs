//! One long-lived NDJSON session with an engine spawned by the inspector (§5.1).
//!
//! The inspector performs the `initialize` handshake itself and answers later `initialize`
//! requests from that handshake, since a stdio session negotiates exactly once. Every request
//! gets an id of the session's own (so the page and the Compare panel's federation can never
//! collide), progress notifications are routed back to the request whose
//! `_meta.progressToken` they echo (§9), and a request whose caller goes away before the answer
//! is cancelled with `notifications/cancel` (§7.14).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rcp_client::Limits;
use rcp_client::ndjson::{ChildProcess, LineReader, LineWriter, Stderr, StderrHandle};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::StartError;
use crate::wire::{Direction, WireLog};

/// How many lines of the engine's stderr are kept to explain a failure.
const STDERR_LINES: usize = 40;

/// Frames of one request waiting for its caller: progress notifications take at most all but
/// one place, so the answer always has one.
const QUEUED_FRAMES: usize = 64;

/// How long the handshake may take (the dense engine loads its model first).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(120);

/// A JSON-RPC error response for `id` (§12).
pub fn error_frame(id: &Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message.into()});
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A request in flight.
struct Pending {
    /// The id its caller used.
    orig: Value,
    /// Who sent it (for the wire log).
    source: String,
    /// Where its progress notifications and answer go.
    tx: mpsc::Sender<Value>,
    /// Its `_meta.progressToken`, as JSON text.
    token: Option<String>,
}

/// Routing state shared by the session and its reader task.
#[derive(Default)]
struct Routes {
    next: u64,
    pending: HashMap<u64, Pending>,
    /// The caller's id (JSON text) → the session's id, so a caller can cancel by its own id.
    by_orig: HashMap<String, u64>,
    /// A progress token (JSON text) → the session's id of the request that carries it.
    tokens: HashMap<String, u64>,
    /// Why the session ended, once it has.
    closed: Option<String>,
}

impl Routes {
    fn take(&mut self, id: u64) -> Option<Pending> {
        let p = self.pending.remove(&id)?;
        self.by_orig.remove(&p.orig.to_string());
        if let Some(t) = &p.token {
            self.tokens.remove(t);
        }
        Some(p)
    }
}

/// What a session shares with its tasks and with the guards of requests in flight.
struct Shared {
    engine: String,
    wire: Arc<WireLog>,
    lines: LineWriter,
    routes: Mutex<Routes>,
    stderr: Option<StderrHandle>,
}

impl Shared {
    fn stderr_tail(&self) -> Vec<String> {
        self.stderr.as_ref().map(StderrHandle::tail).unwrap_or_default()
    }

    fn send(&self, source: &str, frame: Value) {
        let text = frame.to_string();
        self.wire.record_line(&self.engine, Direction::Sent, source, &frame, &text);
        let _ = self.lines.send(text.into_bytes());
    }

    /// Routes one line the engine wrote.
    fn on_line(&self, line: &str) {
        let Ok(frame) = serde_json::from_str::<Value>(line) else {
            self.wire.record_text(&self.engine, Direction::Received, "engine", line.as_bytes());
            return;
        };
        let is_response = frame.get("method").is_none() && frame.get("id").is_some();
        let Ok(mut routes) = self.routes.lock() else { return };
        if is_response {
            let pending = frame.get("id").and_then(Value::as_u64).and_then(|id| routes.take(id));
            drop(routes);
            match pending {
                Some(p) => {
                    self.wire.record_line(&self.engine, Direction::Received, &p.source, &frame, line);
                    let mut answer = frame;
                    answer["id"] = p.orig;
                    // Progress always leaves the answer a place (see `QUEUED_FRAMES`).
                    let _ = p.tx.try_send(answer);
                }
                None => self.wire.record_line(&self.engine, Direction::Received, "engine", &frame, line),
            }
            return;
        }
        let routed = (frame.get("method").and_then(Value::as_str) == Some("notifications/progress"))
            .then(|| frame.pointer("/params/progressToken").map(Value::to_string))
            .flatten()
            .and_then(|t| routes.tokens.get(&t).copied())
            .and_then(|id| routes.pending.get(&id))
            .map(|p| (p.source.clone(), p.tx.clone()));
        drop(routes);
        match routed {
            Some((source, tx)) => {
                self.wire.record_line(&self.engine, Direction::Received, &source, &frame, line);
                // A caller that does not keep up loses progress frames, never its answer, and
                // the engine cannot grow the queue.
                if tx.capacity() > 1 {
                    let _ = tx.try_send(frame);
                }
            }
            None => self.wire.record_line(&self.engine, Direction::Received, "engine", &frame, line),
        }
    }

    /// Fails every request in flight once the engine is gone.
    fn close(&self, reason: String) {
        let data = json!({"stderr": self.stderr_tail()});
        let Ok(mut routes) = self.routes.lock() else { return };
        routes.closed = Some(reason.clone());
        let ids: Vec<u64> = routes.pending.keys().copied().collect();
        for id in ids {
            if let Some(p) = routes.take(id) {
                let msg = format!("engine '{}' {reason}", self.engine);
                let _ = p.tx.try_send(error_frame(&p.orig, -32603, msg, Some(data.clone())));
            }
        }
    }
}

/// A request in flight: its progress frames and then its answer arrive on `frames`; dropping it
/// before the answer cancels the request at the engine.
pub struct InFlight {
    /// Progress notifications (at most `QUEUED_FRAMES - 1` waiting; more are dropped), then
    /// the response (with the caller's id).
    pub frames: mpsc::Receiver<Value>,
    shared: Arc<Shared>,
    id: u64,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let pending = self.shared.routes.lock().ok().and_then(|mut r| r.take(self.id));
        if let Some(p) = pending {
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancel",
                "params": {"id": self.id, "reason": "the inspector's caller went away"}});
            self.shared.send(&p.source, cancel);
        }
    }
}

/// An engine spawned by the inspector, spoken to over its stdin/stdout; killed when the
/// session is dropped.
pub struct StdioSession {
    shared: Arc<Shared>,
    command: Vec<String>,
    child: ChildProcess,
    init: OnceLock<Value>,
}

impl std::fmt::Debug for StdioSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSession").field("command", &self.command).finish_non_exhaustive()
    }
}

impl StdioSession {
    /// Spawns `command` and performs the handshake. The error names what failed and carries
    /// the engine's last stderr lines.
    pub async fn spawn(engine: &str, command: Vec<String>, wire: Arc<WireLog>) -> Result<Self, StartError> {
        let mut child = ChildProcess::spawn(&command, Stderr::Tail { lines: STDERR_LINES, label: engine.into() })?;
        let (stdin, stdout) = (child.take_stdin()?, child.take_stdout()?);
        let shared = Arc::new(Shared {
            engine: engine.into(),
            wire,
            lines: LineWriter::spawn(stdin),
            routes: Mutex::new(Routes::default()),
            stderr: child.stderr(),
        });
        let s = shared.clone();
        let exit = child.exit();
        tokio::spawn(async move {
            let mut lines = LineReader::with_limits(stdout, &Limits::default());
            while let Ok(Some(line)) = lines.next_line().await {
                s.on_line(&line);
            }
            // Give the process a moment to be reaped, for the exit status in the message.
            let exit = tokio::time::timeout(Duration::from_millis(100), exit.wait()).await.ok().flatten();
            s.close(exit.map_or_else(|| "closed its stdout".into(), |e| format!("exited ({e})")));
        });

        let session = Self { shared, command, child, init: OnceLock::new() };
        let hello = json!({"jsonrpc": "2.0", "id": "inspector-initialize", "method": "initialize", "params": {
            "protocolVersion": rcp_wire::PROTOCOL_VERSION,
            "client": {"name": "rcp-inspector", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"streaming": {}},
        }});
        let Ok(mut flight) = session.request(hello, "inspector") else {
            return Err(StartError::Ended { stderr: session.shared.stderr_tail() });
        };
        let answer = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            while let Some(f) = flight.frames.recv().await {
                if f.get("id").is_some() {
                    return Some(f);
                }
            }
            None
        })
        .await;
        let answer = match answer {
            Err(_) => {
                let secs = HANDSHAKE_TIMEOUT.as_secs();
                return Err(StartError::HandshakeTimeout { secs, stderr: session.shared.stderr_tail() });
            }
            Ok(None) => return Err(StartError::Ended { stderr: session.shared.stderr_tail() }),
            Ok(Some(a)) => a,
        };
        match answer.get("result") {
            Some(result) => {
                let _ = session.init.set(result.clone());
                Ok(session)
            }
            None => {
                let message = answer["error"]["message"].as_str().unwrap_or("initialize failed").to_owned();
                // Let the stderr reader catch up so the reason is shown.
                if let Some(stderr) = &session.shared.stderr {
                    stderr.closed(Duration::from_millis(200)).await;
                }
                Err(StartError::Refused { message, stderr: session.shared.stderr_tail() })
            }
        }
    }

    /// The command the engine was started with.
    pub fn command(&self) -> &[String] {
        &self.command
    }

    /// The `initialize` result of the handshake.
    pub fn initialize_result(&self) -> Value {
        self.init.get().cloned().unwrap_or(Value::Null)
    }

    /// Sends a request (a frame with an `id`). The error is a JSON-RPC error response to give
    /// the caller when the engine is gone.
    pub fn request(&self, mut frame: Value, source: &str) -> Result<InFlight, Value> {
        let orig = frame.get("id").cloned().unwrap_or(Value::Null);
        let (tx, frames) = mpsc::channel(QUEUED_FRAMES);
        let id = {
            let Ok(mut routes) = self.shared.routes.lock() else {
                return Err(error_frame(&orig, -32603, "the inspector's session state is poisoned", None));
            };
            if let Some(reason) = &routes.closed {
                let msg = format!("engine '{}' {reason}", self.shared.engine);
                return Err(error_frame(&orig, -32603, msg, Some(json!({"stderr": self.shared.stderr_tail()}))));
            }
            routes.next += 1;
            let id = routes.next;
            let token = frame.pointer("/params/_meta/progressToken").map(Value::to_string);
            if let Some(t) = &token {
                routes.tokens.insert(t.clone(), id);
            }
            routes.by_orig.insert(orig.to_string(), id);
            routes.pending.insert(id, Pending { orig, source: source.into(), tx, token });
            id
        };
        frame["id"] = json!(id);
        self.shared.send(source, frame);
        Ok(InFlight { frames, shared: self.shared.clone(), id })
    }

    /// Sends a notification; a `notifications/cancel` naming a caller's id is rewritten to the
    /// session's id for that request.
    pub fn notify(&self, mut frame: Value, source: &str) {
        if frame.get("method").and_then(Value::as_str) == Some("notifications/cancel")
            && let Some(orig) = frame.pointer("/params/id").map(Value::to_string)
            && let Some(id) = self.shared.routes.lock().ok().and_then(|r| r.by_orig.get(&orig).copied())
        {
            frame["params"]["id"] = json!(id);
        }
        self.shared.send(source, frame);
    }

    /// The process state for the Server panel's health line.
    pub fn health(&self) -> Value {
        let exit = self.child.exit_status();
        json!({
            "transport": "stdio",
            "command": self.command,
            "pid": self.child.pid(),
            "running": exit.is_none(),
            "exit": exit,
            "stderr": self.shared.stderr_tail(),
        })
    }
}
