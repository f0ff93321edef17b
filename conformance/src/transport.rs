//! The two transports of §5, reduced to "send a frame" and "receive the next thing the server
//! said". Over stdio that is a child process's pipes (§5.1); over HTTP every request is a `POST`
//! whose response body (a JSON frame, or the frames of an SSE stream) is queued for `recv`, so the
//! checks are written once for both (§5.2).
//!
//! The suite keeps its own transport on purpose, and depends on none of the crates it certifies
//! (`rcp-wire`, `rcp-server`, `rcp-client`): a referee that framed and parsed bytes with the
//! framework's own code would share its defects, and a defect there could hide itself from the
//! very checks meant to catch it. Independence is the point, so this module is not replaced by
//! the workspace's shared child-process transport.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio as StdStdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Something the server said.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// One line of stdout, or one HTTP response body / SSE `data:` payload.
    Text(String),
    /// HTTP only: a non-2xx status (the body, if any, follows as `Text` when it is JSON).
    Status(u16, String),
    /// A transport-level rule was broken (e.g. wrong `Content-Type`); attributed to the running check.
    Violation(String),
}

/// Why `recv` returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    /// Nothing arrived before the deadline.
    Timeout,
    /// The server closed stdout (process exited) — nothing more will arrive.
    Closed,
}

/// How to send one frame.
#[derive(Debug, Clone, Default)]
pub(crate) struct Send {
    /// HTTP: the method for the URL path (`POST <base>/<method>`); `None` posts to the base.
    pub method: Option<String>,
    /// HTTP: ask for Server-Sent Events (`Accept: text/event-stream`).
    pub sse: bool,
    /// HTTP: do not wait for the response before returning (it is queued when it arrives).
    pub background: bool,
    /// HTTP: a 4xx answer is acceptable (unparseable or non-request bodies, §5.2).
    pub allow_4xx: bool,
    /// HTTP: leave out the configured headers (credentials), to probe authentication.
    pub no_auth: bool,
}

/// A spawned server speaking NDJSON over its stdin/stdout (§5.1).
pub(crate) struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    exit: Option<ExitStatus>,
}

impl StdioTransport {
    /// Spawns `program args...` with piped stdio; the process is killed when this is dropped.
    pub(crate) fn spawn(program: &str, args: &[String]) -> std::io::Result<Self> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(StdStdio::piped())
            .stdout(StdStdio::piped())
            .stderr(StdStdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr pipe"))?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&b'\n') {
                            buf.pop();
                        }
                        if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(mut t) = sink.lock() else { return };
                t.push_back(line);
                while t.len() > 20 {
                    t.pop_front();
                }
            }
        });
        Ok(Self { child, stdin, lines, stderr: tail, exit: None })
    }

    /// Writes raw bytes to the server's stdin.
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin.write_all(bytes).await.map_err(|e| format!("write to server stdin failed: {e}"))?;
        stdin.flush().await.map_err(|e| format!("flush of server stdin failed: {e}"))
    }

    async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some(line)) => Ok(Incoming::Text(line)),
            Ok(None) => Err(RecvError::Closed),
            Err(_) => Err(RecvError::Timeout),
        }
    }

    /// Waits for the process to exit.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(timeout, self.child.wait()).await.ok().and_then(Result::ok);
        }
        self.exit
    }

    /// Ends the process and reaps it: closes stdin (an implicit shutdown, §5.1), gives it `grace`
    /// to exit, then kills it. When this returns the process is gone, so a server holding an
    /// exclusive resource (a data directory lock) has released it before the next one starts.
    pub(crate) async fn close(&mut self, grace: Duration) {
        self.stdin = None;
        if self.wait_exit(grace).await.is_some() {
            return;
        }
        // `kill` sends SIGKILL and waits for the process to be reaped.
        if self.child.kill().await.is_ok() {
            self.exit = self.child.try_wait().ok().flatten();
        }
    }

    /// Whether the process has exited.
    pub(crate) fn exited(&mut self) -> bool {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit.is_some()
    }

    /// The last lines the server wrote to stderr.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join(" | ")).unwrap_or_default()
    }
}

/// An RCP HTTP endpoint (§5.2).
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    base: String,
    headers: Vec<(String, String)>,
    /// The stateful session token (`_meta.session`), sent as `RCP-Session`.
    pub session: Option<String>,
    tx: mpsc::UnboundedSender<Incoming>,
    rx: mpsc::UnboundedReceiver<Incoming>,
}

impl HttpTransport {
    /// A client for `base` (e.g. `http://127.0.0.1:8080/rcp`) sending `headers` on every request,
    /// built as `setup` says (TLS).
    pub(crate) fn new(
        base: &str,
        headers: &[(String, String)],
        timeout: Duration,
        setup: &crate::tls::HttpSetup,
    ) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        let mut builder = setup.builder().timeout(timeout.max(Duration::from_secs(1)) * 3);
        let loopback = ["://127.", "://localhost", "://[::1]"].iter().any(|h| base.contains(h));
        if loopback {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Self { client, base, headers: headers.to_vec(), session: None, tx, rx })
    }

    /// Whether a configured header carries credentials (`Authorization`).
    pub(crate) fn has_auth(&self) -> bool {
        self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    }

    /// Posts one body; the response is queued for `recv`.
    pub(crate) async fn send(&mut self, body: String, how: &Send) {
        let url = match &how.method {
            Some(m) => format!("{}/{}", self.base, m),
            None => self.base.clone(),
        };
        let mut req = self.client.post(url).header("content-type", "application/json").body(body);
        if !how.no_auth {
            for (k, v) in &self.headers {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        if let Some(s) = &self.session {
            req = req.header("RCP-Session", s.as_str());
        }
        if how.sse {
            req = req.header("accept", "text/event-stream");
        }
        let tx = self.tx.clone();
        let (sse, allow_4xx) = (how.sse, how.allow_4xx);
        let task = async move { exchange(req, sse, allow_4xx, tx).await };
        if how.background {
            tokio::spawn(task);
        } else {
            task.await;
        }
    }

    async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Ok(Some(i)) => Ok(i),
            Ok(None) => Err(RecvError::Closed),
            Err(_) => Err(RecvError::Timeout),
        }
    }
}

async fn exchange(req: reqwest::RequestBuilder, sse: bool, allow_4xx: bool, tx: mpsc::UnboundedSender<Incoming>) {
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Incoming::Violation(format!("HTTP request failed: {e}")));
            return;
        }
    };
    let status = resp.status().as_u16();
    let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    if ctype.starts_with("text/event-stream") {
        if !sse {
            let _ = tx.send(Incoming::Violation(
                "server answered with text/event-stream although the client did not ask for SSE (§5.2)".into(),
            ));
        }
        let mut buf = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if !data.is_empty() {
                    let _ = tx.send(Incoming::Text(data.join("\n")));
                }
            }
        }
        return;
    }
    let body = match resp.text().await {
        Ok(b) => b,
        Err(e) => {
            let _ = tx.send(Incoming::Violation(format!("could not read the HTTP response body: {e}")));
            return;
        }
    };
    if !(200..300).contains(&status) {
        let _ = tx.send(Incoming::Status(status, body.clone()));
        if !(allow_4xx && (400..500).contains(&status)) {
            let _ = tx.send(Incoming::Violation(format!(
                "HTTP {status} for a well-formed request; JSON-RPC answers, errors included, MUST be 200 (§5.2)"
            )));
        }
        // A JSON-RPC body still answers the request, whatever the status.
        if serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| v.is_object() || v.is_array()) {
            let _ = tx.send(Incoming::Text(body));
        }
        return;
    }
    if body.trim().is_empty() {
        return;
    }
    if !ctype.starts_with("application/json") {
        let _ = tx
            .send(Incoming::Violation(format!("response Content-Type is '{ctype}', expected application/json (§5.2)")));
    }
    let _ = tx.send(Incoming::Text(body));
}

/// Either transport.
pub(crate) enum Transport {
    /// NDJSON over a child's pipes.
    Stdio(StdioTransport),
    /// POST per request.
    Http(HttpTransport),
}

impl Transport {
    /// Sends one frame (a `\n` is appended over stdio).
    pub(crate) async fn send(&mut self, text: &str, how: &Send) -> Result<(), String> {
        match self {
            Transport::Stdio(s) => {
                let mut line = Vec::with_capacity(text.len() + 1);
                line.extend_from_slice(text.as_bytes());
                line.push(b'\n');
                s.write(&line).await
            }
            Transport::Http(h) => {
                h.send(text.to_owned(), how).await;
                Ok(())
            }
        }
    }

    /// The next thing the server said, or why there is none.
    pub(crate) async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match self {
            Transport::Stdio(s) => s.recv(deadline).await,
            Transport::Http(h) => h.recv(deadline).await,
        }
    }

    /// Whether this is the stdio transport.
    pub(crate) fn is_stdio(&self) -> bool {
        matches!(self, Transport::Stdio(_))
    }
}
