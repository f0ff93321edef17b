//! `POST` per request (§5.2): each response body, or each `data:` payload of an SSE stream, is
//! queued for `recv`.
//!
//! A `429` is transport-level rate limiting (§5.2), not an answer: the request is sent again after
//! its `Retry-After` (at most [`MAX_WAIT`]; 1 s when the header is missing or unreadable), a few
//! times, and every `429` met is logged in [`Throttles`] for the check that judges its header.
//! [`HttpTransport::probe`] sends one request as it is and returns what came back, headers
//! included, for the checks of the HTTP mapping itself (CORS, SSE framing, rate limiting).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Incoming, RecvError, Send};

/// An RCP HTTP endpoint (§5.2).
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    base: String,
    headers: Vec<(String, String)>,
    /// The stateful session token (`_meta.session`), sent as `RCP-Session`.
    pub session: Option<String>,
    tx: mpsc::UnboundedSender<Incoming>,
    rx: mpsc::UnboundedReceiver<Incoming>,
    throttles: Throttles,
}

/// The `Retry-After` of every `429` the run met (`None`: the header was missing), shared by
/// every connection of a run.
pub(crate) type Throttles = Arc<Mutex<Vec<Option<String>>>>;

/// The longest wait a `Retry-After` earns before a request is sent again.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(5);

/// The header that carries the stateful session token (§5.2).
const SESSION_HEADER: &str = "RCP-Session";

/// How many times a request answered `429` is sent again.
const RETRIES: usize = 3;

/// What came back for one request sent by [`HttpTransport::probe`].
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// A header's value as text (`None` when absent or not text).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How long the suite waits after a `429` carrying `header` (its `Retry-After`) before it sends
/// again: what the header asks, 1 s when it is missing or unreadable, at most [`MAX_WAIT`].
pub(crate) fn wait_after(header: Option<&str>) -> Duration {
    header.and_then(retry_after).unwrap_or(Duration::from_secs(1)).min(MAX_WAIT)
}

/// How long a `Retry-After` asks to wait: delay-seconds, or an HTTP-date; `None` when it is
/// neither.
pub(crate) fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

impl HttpTransport {
    /// A client for `base` (e.g. `http://127.0.0.1:8080/rcp`) sending `headers` on every request,
    /// built as `setup` says (TLS).
    pub(crate) fn new(
        base: &str,
        headers: &[(String, String)],
        timeout: Duration,
        setup: &crate::tls::HttpSetup,
        throttles: Throttles,
    ) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        let mut builder = setup.builder().timeout(timeout.max(Duration::from_secs(1)) * 3);
        let loopback = ["://127.", "://localhost", "://[::1]"].iter().any(|h| base.contains(h));
        if loopback {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Self { client, base, headers: headers.to_vec(), session: None, tx, rx, throttles })
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
        let req = self.client.post(url).header("content-type", "application/json").body(body);
        let mut req = self.identified(req, !how.no_auth);
        if how.sse {
            req = req.header("accept", "text/event-stream");
        }
        let tx = self.tx.clone();
        let (sse, allow_4xx, throttles) = (how.sse, how.allow_4xx, Arc::clone(&self.throttles));
        let task = async move { exchange(req, sse, allow_4xx, tx, throttles).await };
        if how.background {
            tokio::spawn(task);
        } else {
            task.await;
        }
    }

    /// Sends one request as it is, to `<base>/<method>` with the configured headers, the session
    /// token and `headers`, and returns the reply whole (read to its end): no retry after a
    /// `429`, and nothing queued for `recv`.
    pub(crate) async fn probe(
        &self,
        verb: Method,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Result<Reply, String> {
        let mut req = self.identified(self.client.request(verb, format!("{}/{method}", self.base)), true);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await.map_err(|e| format!("HTTP request failed: {e}"))?;
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        let body = resp.text().await.map_err(|e| format!("could not read the HTTP response body: {e}"))?;
        Ok(Reply { status, headers, body })
    }

    /// `req` with what identifies this client on every request: the configured headers (when
    /// `configured`; left out to probe authentication) and the session token.
    fn identified(&self, mut req: reqwest::RequestBuilder, configured: bool) -> reqwest::RequestBuilder {
        if configured {
            for (k, v) in &self.headers {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        if let Some(s) = &self.session {
            req = req.header(SESSION_HEADER, s.as_str());
        }
        req
    }

    /// The names of the headers [`Self::identified`] adds (what a browser would list in a
    /// preflight).
    pub(crate) fn header_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.headers.iter().map(|(k, _)| k.to_ascii_lowercase()).collect();
        if self.session.is_some() {
            names.push(SESSION_HEADER.to_ascii_lowercase());
        }
        names
    }

    pub(super) async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Ok(Some(i)) => Ok(i),
            Ok(None) => Err(RecvError::Closed),
            Err(_) => Err(RecvError::Timeout),
        }
    }
}

/// Sends `req`, again after each `429` (up to [`RETRIES`] times), logging each in `throttles`.
async fn send_paced(req: reqwest::RequestBuilder, throttles: &Throttles) -> reqwest::Result<reqwest::Response> {
    for _ in 0..RETRIES {
        let Some(again) = req.try_clone() else { break };
        let resp = again.send().await?;
        if resp.status().as_u16() != 429 {
            return Ok(resp);
        }
        let header = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let wait = wait_after(header.as_deref());
        if let Ok(mut t) = throttles.lock() {
            t.push(header);
        }
        tokio::time::sleep(wait).await;
    }
    req.send().await
}

async fn exchange(
    req: reqwest::RequestBuilder,
    sse: bool,
    allow_4xx: bool,
    tx: mpsc::UnboundedSender<Incoming>,
    throttles: Throttles,
) {
    let mut resp = match send_paced(req, &throttles).await {
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
