//! One client connection to the server under test. Every frame received is validated the moment
//! it arrives (envelope rules, the JSON Schema, `$defs/ResultFor` for the method that was asked)
//! and every protocol rule a frame can break on its own — an answered notification, an id echoed
//! with another type, a second response, progress without a token, logs nobody opted into — is
//! recorded as a violation of the check that is running ([`Watch`] is that referee).

mod env;
mod frame;
mod watch;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::config::Target;
use crate::report::truncate;
use crate::transport::{HttpTransport, Incoming, RecvError, Send, StdioTransport, Transport};

pub(crate) use env::{Env, Violation};
pub(crate) use frame::{Resp, is_notification};
pub(crate) use watch::Watch;

use frame::loose_eq;

/// A client connection (one stdio process, or one HTTP session).
pub(crate) struct Conn {
    t: Transport,
    env: Env,
    next_id: i64,
    /// Validated frames received but not consumed yet.
    pending: VecDeque<Value>,
    /// What was sent, what arrived, and the rules each frame was held to.
    pub watch: Watch,
    /// HTTP statuses other than 2xx, in order.
    pub statuses: Vec<(u16, String)>,
    /// stdout lines that were not JSON (stdio).
    pub non_json: usize,
    /// Expected responses that timed out in a row; after two, waits are cut short so a hung
    /// server does not cost a full timeout per check.
    stalled: u32,
}

/// How long a server may take to exit on EOF before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Consecutive timeouts after which the server is considered hung.
const STALL_LIMIT: u32 = 2;
/// How long to wait for a response once the server is considered hung.
const STALLED_WAIT: Duration = Duration::from_millis(100);

impl Conn {
    /// Opens a fresh connection: spawns a new server process (stdio) or starts a new, token-less
    /// HTTP client session.
    pub(crate) async fn open(env: &Env) -> Result<Conn, String> {
        let t = match &env.target {
            Target::Stdio { program, args } => Transport::Stdio(
                StdioTransport::spawn(program, args).map_err(|e| format!("cannot start `{program}`: {e}"))?,
            ),
            Target::Http { base, headers } => {
                Transport::Http(HttpTransport::new(base, headers, env.timeout, &env.http, Arc::clone(&env.throttles))?)
            }
        };
        Ok(Conn {
            t,
            env: env.clone(),
            next_id: 1,
            pending: VecDeque::new(),
            watch: Watch::default(),
            statuses: Vec::new(),
            non_json: 0,
            stalled: 0,
        })
    }

    /// The per-response timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.env.timeout
    }

    /// Whether this connection is over stdio.
    pub(crate) fn is_stdio(&self) -> bool {
        self.t.is_stdio()
    }

    /// The stdio transport, when that is the transport.
    pub(crate) fn stdio(&mut self) -> Option<&mut StdioTransport> {
        match &mut self.t {
            Transport::Stdio(s) => Some(s),
            Transport::Http(_) => None,
        }
    }

    /// Ends the connection: over stdio the process is stopped and reaped before this returns (so
    /// no two processes of the server are ever alive at once); over HTTP there is nothing to end.
    pub(crate) async fn close(&mut self) {
        if let Transport::Stdio(s) = &mut self.t {
            s.close(CLOSE_GRACE).await;
        }
    }

    /// The HTTP transport, when that is the transport.
    pub(crate) fn http(&self) -> Option<&HttpTransport> {
        match &self.t {
            Transport::Http(h) => Some(h),
            Transport::Stdio(_) => None,
        }
    }

    /// Whether HTTP credentials are configured.
    pub(crate) fn http_has_auth(&self) -> bool {
        matches!(&self.t, Transport::Http(h) if h.has_auth())
    }

    /// The HTTP session token in use, if any.
    pub(crate) fn http_session(&self) -> Option<&str> {
        match &self.t {
            Transport::Http(h) => h.session.as_deref(),
            Transport::Stdio(_) => None,
        }
    }

    /// Records a violation against the running check.
    pub(crate) fn violation(&self, msg: impl Into<String>) {
        self.env.violation(msg);
    }

    /// A fresh integer id.
    pub(crate) fn fresh_id(&mut self) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!(id)
    }

    /// Registers an id sent inside a raw frame, so its response is expected.
    pub(crate) fn expect_id(&mut self, id: Value, label: &str) {
        self.watch.expect_id(id, label);
    }

    /// Sends a message (or batch) given as JSON, registering the ids and opt-ins it carries.
    pub(crate) async fn send_value(&mut self, msg: &Value, how: Send) -> Result<(), String> {
        match msg {
            Value::Array(members) => members.iter().for_each(|m| self.watch.register(m)),
            _ => self.watch.register(msg),
        }
        let mut how = how;
        if how.method.is_none() && !msg.is_array() {
            how.method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        }
        self.t.send(&msg.to_string(), &how).await
    }

    /// Sends raw text as one frame (for malformed input). HTTP posts it to the base URL.
    pub(crate) async fn send_raw(&mut self, text: &str) -> Result<(), String> {
        self.t.send(text, &Send { allow_4xx: true, ..Send::default() }).await
    }

    /// Sends a request with this id.
    pub(crate) async fn send_request(&mut self, id: Value, method: &str, params: Option<Value>) -> Result<(), String> {
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_value(&msg, Send::default()).await
    }

    /// Sends a notification (no id).
    pub(crate) async fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), String> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_value(&msg, Send::default()).await
    }

    /// Sends a request with this id and waits for its response.
    pub(crate) async fn call_id(&mut self, id: Value, method: &str, params: Option<Value>) -> Result<Resp, String> {
        self.send_request(id.clone(), method, params).await?;
        let r = self.wait_for(&id, self.env.timeout).await?;
        self.after_response(method, &r);
        Ok(r)
    }

    /// Sends a request with a fresh id and waits for its response.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Resp, String> {
        let id = self.fresh_id();
        self.call_id(id, method, Some(params)).await
    }

    /// Like [`Conn::call`], asking HTTP servers for Server-Sent Events (§5.2) so progress frames
    /// can arrive; identical to `call` over stdio.
    pub(crate) async fn call_streaming(&mut self, method: &str, params: Value) -> Result<Resp, String> {
        let id = self.fresh_id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_value(&msg, Send { sse: true, ..Send::default() }).await?;
        self.wait_for(&id, self.env.timeout).await
    }

    /// Sends a request without waiting for the HTTP exchange to finish (so a notification can
    /// race it); over stdio this is a plain send.
    pub(crate) async fn send_background(&mut self, id: Value, method: &str, params: Value) -> Result<(), String> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_value(&msg, Send { background: true, ..Send::default() }).await
    }

    fn after_response(&mut self, method: &str, r: &Resp) {
        if method != "initialize" {
            return;
        }
        if let (Transport::Http(h), Some(tok)) = (
            &mut self.t,
            r.result().and_then(|res| res.get("_meta")).and_then(|m| m.get("session")).and_then(Value::as_str),
        ) {
            h.session = Some(tok.to_owned());
        }
    }

    /// The next frame (response, batch or notification), validated.
    pub(crate) async fn recv(&mut self, timeout: Duration) -> Result<Value, RecvError> {
        if let Some(v) = self.pending.pop_front() {
            return Ok(v);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.t.recv(deadline).await? {
                Incoming::Violation(v) => self.violation(v),
                Incoming::Status(status, body) => self.statuses.push((status, body)),
                Incoming::Text(text) => {
                    if text.trim().is_empty() {
                        if self.is_stdio() {
                            self.env.record(Violation::rule(
                                "stdio.",
                                "stdout-blank-line",
                                "server wrote a blank line to stdout",
                            ));
                        }
                        continue;
                    }
                    match serde_json::from_str::<Value>(&text) {
                        Ok(v) => {
                            self.watch.inspect(&self.env, &v);
                            return Ok(v);
                        }
                        Err(e) => {
                            self.non_json += 1;
                            self.env.record(Violation::rule(
                                "stdio.",
                                "stdout-not-json",
                                format!(
                                    "server wrote a frame that is not JSON ({e}): {} (§5.1: stdout is protocol-only)",
                                    truncate(&text, 120)
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// The next response (or batch response), skipping server notifications.
    pub(crate) async fn recv_response(&mut self, timeout: Duration) -> Result<Value, RecvError> {
        let deadline = Instant::now() + self.wait(timeout);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left).await {
                Ok(v) if is_notification(&v) => {}
                Ok(v) => {
                    self.stalled = 0;
                    return Ok(v);
                }
                Err(e) => {
                    self.note_stall(e);
                    return Err(e);
                }
            }
        }
    }

    fn wait(&self, timeout: Duration) -> Duration {
        if self.stalled >= STALL_LIMIT { timeout.min(STALLED_WAIT) } else { timeout }
    }

    fn note_stall(&mut self, e: RecvError) {
        if e == RecvError::Timeout {
            self.stalled += 1;
        }
    }

    /// Waits for the response to `id` (matched loosely, so a response echoing the id with another
    /// JSON type is still found — and recorded as a violation by the [`Watch`]). Other responses are
    /// kept for later.
    pub(crate) async fn wait_for(&mut self, id: &Value, timeout: Duration) -> Result<Resp, String> {
        let deadline = Instant::now() + self.wait(timeout);
        let mut kept = Vec::new();
        let found = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left).await {
                Ok(v) if is_notification(&v) => {}
                Ok(v) if v.get("id").is_some_and(|got| loose_eq(got, id)) => {
                    self.stalled = 0;
                    break Ok(Resp(v));
                }
                Ok(v) => kept.push(v),
                Err(e) => {
                    let msg = self.describe_recv_error(e, id);
                    self.note_stall(e);
                    break Err(msg);
                }
            }
        };
        for v in kept.into_iter().rev() {
            self.pending.push_front(v);
        }
        found
    }

    fn describe_recv_error(&mut self, e: RecvError, id: &Value) -> String {
        match e {
            RecvError::Timeout if self.stalled >= STALL_LIMIT => {
                format!("no response to request id {id} (the server stopped answering; not waiting the full timeout)")
            }
            RecvError::Timeout => {
                format!("no response to request id {id} within {} ms", self.env.timeout.as_millis())
            }
            RecvError::Closed => {
                let mut msg = format!("the server closed the connection before answering request id {id}");
                if let Some(s) = self.stdio() {
                    let status = if s.exited() { " (process exited)" } else { "" };
                    let tail = s.stderr_tail();
                    msg.push_str(status);
                    if !tail.is_empty() {
                        msg.push_str(&format!("; stderr: {}", truncate(&tail, 300)));
                    }
                }
                msg
            }
        }
    }

    /// Sends a `ping` and requires the next response to be its answer: proves that nothing sent
    /// before it (notifications, all-notification batches) was answered (§4.5, §11).
    pub(crate) async fn expect_silence(&mut self) -> Result<(), String> {
        let id = json!(format!("silence-probe-{}", self.next_id));
        self.next_id += 1;
        let nonce = json!(format!("n-{}", self.next_id));
        self.send_request(id.clone(), "ping", Some(json!({"nonce": nonce}))).await?;
        let v = self.recv_response(self.env.timeout).await.map_err(|e| self.describe_recv_error(e, &id))?;
        if v.get("id") != Some(&id) {
            return Err(format!(
                "the server answered something that must not be answered: {}",
                truncate(&v.to_string(), 200)
            ));
        }
        // A server answering concurrently may put its stray answer after the ping's.
        for late in self.drain(Duration::from_millis(30)).await {
            if !is_notification(&late) {
                return Err(format!(
                    "the server answered something that must not be answered: {}",
                    truncate(&late.to_string(), 200)
                ));
            }
        }
        Ok(())
    }

    /// Collects frames for `window` (for "nothing else arrives" checks).
    pub(crate) async fn drain(&mut self, window: Duration) -> Vec<Value> {
        let deadline = Instant::now() + window;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() && self.pending.is_empty() {
                break;
            }
            match self.recv(left).await {
                Ok(v) => out.push(v),
                Err(_) => break,
            }
        }
        out
    }
}
