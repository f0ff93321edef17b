//! One long-lived NDJSON session with an engine spawned by the inspector (§5.1).
//!
//! The inspector performs the `initialize` handshake itself and answers later `initialize`
//! requests from that handshake, since a stdio session negotiates exactly once. Every request
//! gets an id of the session's own (so the page and the Compare panel's federation can never
//! collide), progress notifications are routed back to the request whose
//! `_meta.progressToken` they echo (§9), and a request whose caller goes away before the answer
//! is cancelled with `notifications/cancel` (§7.14).

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::wire::{Direction, WireLog};

/// How many lines of the engine's stderr are kept to explain a failure.
const STDERR_LINES: usize = 40;

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
    tx: mpsc::UnboundedSender<Value>,
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
    lines: mpsc::UnboundedSender<Vec<u8>>,
    routes: Mutex<Routes>,
    stderr: Mutex<VecDeque<String>>,
    exit: Mutex<Option<String>>,
}

impl Shared {
    fn stderr_tail(&self) -> Vec<String> {
        self.stderr.lock().map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    fn send(&self, source: &str, frame: Value) {
        let text = frame.to_string().into_bytes();
        self.wire.record(&self.engine, Direction::Sent, source, frame);
        let _ = self.lines.send(text);
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
                    self.wire.record_line(&self.engine, Direction::Received, &p.source, frame.clone(), line);
                    let mut answer = frame;
                    answer["id"] = p.orig;
                    let _ = p.tx.send(answer);
                }
                None => self.wire.record_line(&self.engine, Direction::Received, "engine", frame, line),
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
                self.wire.record_line(&self.engine, Direction::Received, &source, frame.clone(), line);
                let _ = tx.send(frame);
            }
            None => self.wire.record_line(&self.engine, Direction::Received, "engine", frame, line),
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
                let _ = p.tx.send(error_frame(&p.orig, -32603, msg, Some(data.clone())));
            }
        }
    }
}

/// A request in flight: its progress frames and then its answer arrive on `frames`; dropping it
/// before the answer cancels the request at the engine.
pub struct InFlight {
    /// Progress notifications, then the response (with the caller's id).
    pub frames: mpsc::UnboundedReceiver<Value>,
    shared: Arc<Shared>,
    id: u64,
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

/// An engine spawned by the inspector, spoken to over its stdin/stdout.
pub struct StdioSession {
    shared: Arc<Shared>,
    command: Vec<String>,
    pid: Option<u32>,
    init: OnceLock<Value>,
}

impl StdioSession {
    /// Spawns `command` and performs the handshake. The error names what failed and carries
    /// the engine's last stderr lines.
    pub async fn spawn(engine: &str, command: Vec<String>, wire: Arc<WireLog>) -> Result<Self, (String, Vec<String>)> {
        let Some((program, args)) = command.split_first() else {
            return Err(("the engine command is empty".into(), Vec::new()));
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| (format!("cannot start {program}: {e}"), Vec::new()))?;
        let pid = child.id();
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(("the engine's stdio could not be piped".into(), Vec::new()));
        };
        let (lines, mut to_write) = mpsc::unbounded_channel::<Vec<u8>>();
        let shared = Arc::new(Shared {
            engine: engine.into(),
            wire,
            lines,
            routes: Mutex::new(Routes::default()),
            stderr: Mutex::new(VecDeque::new()),
            exit: Mutex::new(None),
        });
        tokio::spawn(async move {
            while let Some(mut line) = to_write.recv().await {
                line.push(b'\n');
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        let s = shared.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut tail) = s.stderr.lock() {
                    if tail.len() == STDERR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
        let s = shared.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if !line.trim().is_empty() {
                    s.on_line(&line);
                }
            }
            // Give the waiter a moment to record the exit status for the message.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let exit = s.exit.lock().ok().and_then(|e| e.clone());
            s.close(exit.map_or_else(|| "closed its stdout".into(), |e| format!("exited ({e})")));
        });
        let s = shared.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let text = match status {
                Ok(st) => st.to_string(),
                Err(e) => e.to_string(),
            };
            if let Ok(mut exit) = s.exit.lock() {
                *exit = Some(text);
            }
        });

        let session = Self { shared, command, pid, init: OnceLock::new() };
        let hello = json!({"jsonrpc": "2.0", "id": "inspector-initialize", "method": "initialize", "params": {
            "protocolVersion": rcp_protocol::PROTOCOL_VERSION,
            "client": {"name": "rcp-inspector", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"streaming": {}},
        }});
        let fail = |msg: String, s: &Self| (msg, s.shared.stderr_tail());
        let mut flight =
            session.request(hello, "inspector").map_err(|e| fail(e["error"]["message"].to_string(), &session))?;
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
                return Err(fail(format!("no initialize answer within {} s", HANDSHAKE_TIMEOUT.as_secs()), &session));
            }
            Ok(None) => return Err(fail("the engine ended before answering initialize".into(), &session)),
            Ok(Some(a)) => a,
        };
        match answer.get("result") {
            Some(result) => {
                let _ = session.init.set(result.clone());
                Ok(session)
            }
            None => {
                let msg = answer["error"]["message"].as_str().unwrap_or("initialize failed").to_owned();
                // Let the stderr reader catch up so the reason is shown.
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err(fail(format!("initialize failed: {msg}"), &session))
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
        let (tx, frames) = mpsc::unbounded_channel();
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
        let exit = self.shared.exit.lock().ok().and_then(|e| e.clone());
        json!({
            "transport": "stdio",
            "command": self.command,
            "pid": self.pid,
            "running": exit.is_none(),
            "exit": exit,
            "stderr": self.shared.stderr_tail(),
        })
    }
}
