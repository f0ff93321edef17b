//! HTTP (§11): each message is a POST to `{base}/{method}`; a call with a progress token
//! accepts `text/event-stream`, whose events carry notifications and then the final response.
//! A stateful server's session token is sent back as `RCP-Session` until it expires.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use rcp_wire::RequestId;
use serde_json::Value;

use super::tls::TlsOptions;
use super::{Request, Router, Transport, response_outcome};
use crate::error::{ClientError, ConnectError, Disconnect, LimitExceeded};
use crate::limits::Limits;

/// The HTTP transport. Dropping a call's future drops its request, which the server treats as
/// a cancel, so nothing else is sent when a call is abandoned.
pub(crate) struct HttpTransport {
    state: Arc<State>,
}

struct State {
    http: reqwest::Client,
    base: String,
    /// The parsed base, for hints.
    url: reqwest::Url,
    /// `host:port` of the base, for hints.
    addr: String,
    headers: Vec<(String, String)>,
    session: Mutex<Option<String>>,
    router: Arc<Router>,
}

impl HttpTransport {
    /// A transport to `base` (e.g. `http://127.0.0.1:8080/rcp`, or `https://...`, trusted as
    /// `tls` says) sending `headers` on every request.
    pub(crate) fn new(
        base: &str,
        headers: Vec<(String, String)>,
        connect_timeout: Duration,
        tls: &TlsOptions,
        router: &Arc<Router>,
    ) -> Result<Self, ConnectError> {
        let url = parse_base(base)?;
        let addr = format!("{}:{}", url.host_str().unwrap_or(""), url.port_or_known_default().unwrap_or(80));
        let https = url.scheme() == "https";
        if https && cfg!(not(feature = "tls")) {
            return Err(ConnectError::Tls(Arc::new(super::tls::TlsError::Unsupported(base.to_owned()))));
        }
        // A plain `http://` server needs no system roots (reqwest still needs a configuration).
        let builder = super::tls::http_client_builder(tls, https).map_err(|e| ConnectError::Tls(Arc::new(e)))?;
        let http =
            builder.connect_timeout(connect_timeout).build().map_err(|e| ConnectError::HttpClient(Arc::new(e)))?;
        let state = State {
            http,
            base: base.trim_end_matches('/').to_owned(),
            url,
            addr,
            headers,
            session: Mutex::new(None),
            router: Arc::clone(router),
        };
        Ok(Self { state: Arc::new(state) })
    }
}

impl Transport for HttpTransport {
    fn request<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Value, ClientError>> {
        Box::pin(self.state.post(request.method, request.frame, request.streaming, Some(request.id)))
    }

    fn notify(&self, method: &str, frame: String) -> Result<(), ClientError> {
        let state = Arc::clone(&self.state);
        let method = method.to_owned();
        tokio::spawn(async move {
            let _ = state.post(&method, frame, false, None).await;
        });
        Ok(())
    }

    fn abandon(&self, id: &RequestId) {
        self.state.router.forget(id);
    }

    fn session_started(&self, token: Option<&str>) {
        if let (Some(token), Ok(mut s)) = (token, self.state.session.lock()) {
            *s = Some(token.to_owned());
        }
    }

    fn may_share_session(&self) -> bool {
        true
    }

    fn end_session(&self) -> bool {
        self.state.session.lock().map(|mut s| s.take().is_some()).unwrap_or(false)
    }
}

impl State {
    async fn post(&self, method: &str, body: String, sse: bool, id: Option<&RequestId>) -> Result<Value, ClientError> {
        let http_err = |e: reqwest::Error| ClientError::Closed(Disconnect::Http(Arc::new(e)));
        let url = format!("{}/{method}", self.base);
        let mut req = self.http.post(&url).header("content-type", "application/json").body(body);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(s) = self.session.lock().ok().and_then(|s| s.clone()) {
            req = req.header("RCP-Session", s);
        }
        if sse {
            req = req.header("accept", "text/event-stream");
        }
        self.router.count_frame();
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() && refused(&e) {
                ClientError::Closed(Disconnect::Refused { addr: self.addr.clone(), source: Arc::new(e) })
            } else {
                http_err(e)
            }
        })?;
        let status = resp.status();
        if status == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let limits = *self.router.limits();
        if !is_sse {
            let body = read_body(resp, &limits).await?;
            return self.answer(&body, status, url, id);
        }
        // An SSE answer: notifications, then the response, each event under the limits.
        let mut stream = resp.bytes_stream();
        let mut events = SseEvents::new(limits.max_frame_bytes);
        let mut started: Option<tokio::time::Instant> = None;
        loop {
            // An event under way must complete within the frame timeout.
            let chunk = match started {
                Some(at) => tokio::time::timeout_at(at + limits.frame_timeout, stream.next())
                    .await
                    .map_err(|_| ClientError::Limit(LimitExceeded::FrameTimeout(limits.frame_timeout)))?,
                None => stream.next().await,
            };
            let Some(chunk) = chunk else { break };
            for data in events.push(&chunk.map_err(http_err)?)? {
                let frame: Value = serde_json::from_str(&data).map_err(|e| ClientError::decode("SSE frame", e))?;
                if frame.get("id").is_some() {
                    return response_outcome(frame);
                }
                self.router.on_frame(frame);
            }
            started = match events.pending() {
                0 => None,
                _ => started.or_else(|| Some(tokio::time::Instant::now())),
            };
        }
        Err(ClientError::Closed(Disconnect::StreamEnded))
    }

    /// The outcome of a JSON (not SSE) answer `body` with HTTP `status`, to the request `id`.
    fn answer(
        &self,
        body: &[u8],
        status: reqwest::StatusCode,
        url: String,
        id: Option<&RequestId>,
    ) -> Result<Value, ClientError> {
        let text = String::from_utf8_lossy(body);
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
            _ if status == reqwest::StatusCode::NOT_FOUND => {
                Err(ClientError::Closed(Disconnect::NotFound { url, hint: not_found_hint(&self.url) }))
            }
            _ => Err(ClientError::Closed(Disconnect::Status {
                status: status.as_u16(),
                body: text.chars().take(200).collect(),
            })),
        }
    }
}

/// Reads the body of an HTTP response as one frame, under `limits`: at most
/// [`Limits::max_frame_bytes`] (a larger `content-length` is refused before reading, a body
/// without one is refused as soon as it passes the cap) and within [`Limits::frame_timeout`]
/// once the headers are in. The client reads every JSON answer with it; a proxy that relays
/// an engine's answers can too.
pub async fn read_body(resp: reqwest::Response, limits: &Limits) -> Result<Vec<u8>, ClientError> {
    let max = limits.max_frame_bytes;
    if let Some(len) = resp.content_length()
        && len > max as u64
    {
        return Err(ClientError::Limit(LimitExceeded::FrameTooLarge { seen: len, limit: max as u64 }));
    }
    let mut stream = resp.bytes_stream();
    let body = async {
        let mut body = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ClientError::Closed(Disconnect::Http(Arc::new(e))))?;
            if body.len() + chunk.len() > max {
                let seen = (body.len() + chunk.len()) as u64;
                return Err(ClientError::Limit(LimitExceeded::FrameTooLarge { seen, limit: max as u64 }));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(limits.frame_timeout, body)
        .await
        .map_err(|_| ClientError::Limit(LimitExceeded::FrameTimeout(limits.frame_timeout)))?
}

/// The base URL, or an error saying how to fix it (no scheme: "add http://").
fn parse_base(base: &str) -> Result<reqwest::Url, ConnectError> {
    let invalid = |hint: String| ConnectError::InvalidUrl { url: base.to_owned(), hint };
    let trimmed = base.trim();
    let has_scheme = trimmed.contains("://");
    if !has_scheme {
        return Err(invalid(format!("no scheme: add http:// (e.g. http://{trimmed})")));
    }
    let url = reqwest::Url::parse(trimmed).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!("scheme '{}' is not supported: use http:// or https://", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host: write http://host:port/rcp".into()));
    }
    Ok(url)
}

/// Whether a connect error was a refused connection (nothing listening).
fn refused(e: &reqwest::Error) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = next {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        next = cause.source();
    }
    false
}

/// What to try after a 404 (not JSON-RPC) from `base`: servers built on rcp-server serve RCP
/// under `/rcp`.
fn not_found_hint(base: &reqwest::Url) -> String {
    let origin = base.origin().ascii_serialization();
    let path = base.path().trim_end_matches('/');
    if path.is_empty() {
        format!("the URL has no base path; does the server serve RCP at /rcp? try {origin}/rcp")
    } else {
        format!("does the server serve RCP at {path}? the usual base is {origin}/rcp")
    }
}

/// Server-sent events decoding: bytes are buffered until a whole event (ending in a blank
/// line) is in, since a multi-byte character may straddle two chunks; each event yields the
/// concatenation of its `data:` lines. An event is capped at `max` bytes, and each byte is
/// scanned once (a never-ending event costs linear time, not quadratic).
struct SseEvents {
    buf: Vec<u8>,
    /// Where the search for the end of the event resumes.
    scanned: usize,
    max: usize,
}

impl SseEvents {
    /// Events of at most `max` bytes.
    fn new(max: usize) -> Self {
        Self { buf: Vec::new(), scanned: 0, max }
    }

    /// Bytes of the event under way.
    fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Adds a chunk; returns the data of every event it completed (events without data are
    /// skipped), or [`LimitExceeded::FrameTooLarge`] once the event under way passes the cap.
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, ClientError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            let from = self.scanned.saturating_sub(1);
            let Some(at) = self.buf[from..].windows(2).position(|w| w == b"\n\n") else {
                self.scanned = self.buf.len();
                break;
            };
            let end = from + at + 2;
            let event = String::from_utf8_lossy(&self.buf[..end]);
            let data: String = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
            if !data.is_empty() {
                out.push(data);
            }
            self.buf.drain(..end);
            self.scanned = 0;
        }
        if self.buf.len() > self.max {
            let seen = self.buf.len() as u64;
            self.buf = Vec::new();
            return Err(ClientError::Limit(LimitExceeded::FrameTooLarge { seen, limit: self.max as u64 }));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_mistakes_get_hints() {
        let e = parse_base("127.0.0.1:8080/rcp").unwrap_err().to_string();
        assert!(e.contains("add http:// (e.g. http://127.0.0.1:8080/rcp)"), "{e}");
        let e = parse_base("ftp://h/rcp").unwrap_err().to_string();
        assert!(e.contains("use http:// or https://"), "{e}");
        let root = parse_base("http://127.0.0.1:8080").unwrap();
        assert!(not_found_hint(&root).ends_with("try http://127.0.0.1:8080/rcp"), "{}", not_found_hint(&root));
        let api = parse_base("http://h:1/api/").unwrap();
        assert!(not_found_hint(&api).starts_with("does the server serve RCP at /api?"));
    }

    #[test]
    fn sse_events_survive_split_chunks_and_characters() {
        let mut sse = SseEvents::new(1024);
        let text = "event: message\ndata: {\"a\":\"é\"}\n\n: comment\n\ndata: 2\n\n";
        let bytes = text.as_bytes();
        let split = text.find('é').map(|i| i + 1).unwrap_or(0);
        let mut got = sse.push(&bytes[..split]).expect("under the cap");
        assert!(got.is_empty());
        got.extend(sse.push(&bytes[split..]).expect("under the cap"));
        assert_eq!(got, vec!["{\"a\":\"é\"}".to_owned(), "2".to_owned()]);
        // The blank line that ends an event may straddle two chunks.
        assert!(sse.push(b"data: 3\n").expect("under the cap").is_empty());
        assert_eq!(sse.push(b"\ndata: 4").expect("under the cap"), ["3"]);
        assert_eq!(sse.pending(), 7);
    }

    #[test]
    fn an_sse_event_over_the_cap_is_refused_and_dropped() {
        let mut sse = SseEvents::new(16);
        assert!(sse.push(b"data: 0123456789").expect("16 bytes").is_empty());
        let e = sse.push(b"x").expect_err("17 bytes");
        assert!(matches!(e, ClientError::Limit(LimitExceeded::FrameTooLarge { seen: 17, limit: 16 })), "{e}");
        assert_eq!(sse.pending(), 0, "not held");
    }
}
