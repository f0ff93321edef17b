//! Forwarding to an engine served over HTTP (§5.2): each request is POSTed to
//! `<base>/<method>` and the answer (JSON, or Server-Sent Events with progress frames and then
//! the response) is streamed back unchanged while every frame is logged.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use rcp_client::Limits;
use serde_json::{Value, json};

use crate::error::HttpTargetError;
use crate::redact::redact_url;
use crate::stdio::error_frame;
use crate::wire::{Direction, WireLog};

/// The request headers passed through to the engine.
const PASSED: [&str; 2] = ["accept", "rcp-session"];

/// An engine at an HTTP base URL.
#[derive(Debug)]
pub struct HttpTarget {
    base: String,
    headers: Vec<(String, String)>,
    http: reqwest::Client,
    /// What an engine's answer may hold: rcp-client's limits, as every client bounds frames.
    limits: Limits,
}

impl HttpTarget {
    /// A target at `base` (e.g. `http://127.0.0.1:8080/rcp`, or `https://...` trusted as `tls`
    /// says), sent `headers` on every request.
    pub fn new(
        base: &str,
        headers: Vec<(String, String)>,
        tls: &rcp_client::TlsOptions,
    ) -> Result<Self, HttpTargetError> {
        let http = tls
            .http_client_builder()?
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(HttpTargetError::Client)?;
        Ok(Self { base: base.trim_end_matches('/').to_owned(), headers, http, limits: Limits::default() })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `scheme://host:port` of the base URL, where `/healthz` and `/readyz` live.
    fn origin(&self) -> &str {
        let after_scheme = self.base.find("://").map_or(0, |i| i + 3);
        match self.base[after_scheme..].find('/') {
            Some(i) => &self.base[..after_scheme + i],
            None => &self.base,
        }
    }

    /// POSTs `body` to `<base>/<method>` and streams the answer back, logging each frame.
    pub async fn forward(
        &self,
        method: &str,
        body: Bytes,
        headers: &HeaderMap,
        wire: Arc<WireLog>,
        engine: &str,
        source: &str,
    ) -> Response {
        wire.record_text(engine, Direction::Sent, source, &body);
        let id = serde_json::from_slice::<Value>(&body).ok().and_then(|f| f.get("id").cloned()).unwrap_or(Value::Null);
        let mut req =
            self.http.post(format!("{}/{method}", self.base)).header("content-type", "application/json").body(body);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        for name in PASSED {
            if let Some(v) = headers.get(name) {
                req = req.header(name, v.as_bytes());
            }
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let frame = error_frame(
                    &id,
                    -32603,
                    format!("cannot reach {}: {}", redact_url(&self.base), e.without_url()),
                    None,
                );
                wire.record(engine, Direction::Received, source, &frame);
                return (StatusCode::BAD_GATEWAY, axum::Json(frame)).into_response();
            }
        };
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut out = HeaderMap::new();
        for name in ["content-type", "rcp-session", "retry-after"] {
            if let Some(v) = resp.headers().get(name).and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok()) {
                out.insert(name, v);
            }
        }
        let sse = out
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if sse {
            let (engine, source) = (engine.to_owned(), source.to_owned());
            let mut tap = SseTap::default();
            let stream = resp.bytes_stream().map(move |chunk| {
                if let Ok(bytes) = &chunk {
                    for data in tap.push(bytes) {
                        wire.record_text(&engine, Direction::Received, &source, data.as_bytes());
                    }
                }
                chunk
            });
            return (status, out, Body::from_stream(stream)).into_response();
        }
        match rcp_client::read_body(resp, &self.limits).await {
            Ok(bytes) => {
                if !bytes.is_empty() {
                    wire.record_text(engine, Direction::Received, source, &bytes);
                }
                (status, out, bytes).into_response()
            }
            Err(why) => {
                let message =
                    format!("reading the answer of {}: {}", redact_url(&self.base), redact_url(&why.to_string()));
                let frame = error_frame(&id, -32603, message, None);
                wire.record(engine, Direction::Received, source, &frame);
                (StatusCode::BAD_GATEWAY, axum::Json(frame)).into_response()
            }
        }
    }

    /// `GET /healthz` and `/readyz` beside the base, for the Server panel.
    pub async fn health(&self) -> Value {
        let probe = |path: &'static str| async move {
            let url = format!("{}{path}", self.origin());
            match self.http.get(&url).timeout(Duration::from_secs(3)).send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    json!({"url": redact_url(&url), "status": status, "body": body.chars().take(200).collect::<String>()})
                }
                Err(e) => json!({"url": redact_url(&url), "error": e.without_url().to_string()}),
            }
        };
        let (healthz, readyz) = tokio::join!(probe("/healthz"), probe("/readyz"));
        json!({"transport": "http", "url": redact_url(&self.base), "healthz": healthz, "readyz": readyz})
    }
}

/// Splits an SSE byte stream into the data of its events (the concatenated `data:` lines). An
/// event longer than its cap is not buffered: it is reported once, as a marker, and skipped.
#[derive(Debug)]
pub struct SseTap {
    buf: BytesMut,
    /// Bytes of `buf` already searched for an event's end (less the separator's length).
    searched: usize,
    /// Skipping the rest of an over-long event.
    skipping: bool,
    max: usize,
}

impl Default for SseTap {
    fn default() -> Self {
        Self::new(Limits::default().max_frame_bytes)
    }
}

impl SseTap {
    /// A tap that buffers at most `max` bytes of one event.
    pub fn new(max: usize) -> Self {
        Self { buf: BytesMut::new(), searched: 0, skipping: false, max: max.max(1) }
    }

    /// Feeds a chunk; returns the data of every event it completed (and a marker for an event
    /// over the cap).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            let from = self.searched.saturating_sub(3);
            let Some((end, sep)) = event_end(&self.buf[from..]).map(|(e, s)| (from + e, s)) else {
                self.searched = self.buf.len();
                if !self.skipping && self.buf.len() > self.max {
                    out.push(format!("[an SSE event of more than {} bytes, not logged]", self.max));
                    self.skipping = true;
                }
                if self.skipping {
                    // Only a separator's possible start is kept.
                    let _ = self.buf.split_to(self.buf.len().saturating_sub(3));
                    self.searched = self.buf.len();
                }
                return out;
            };
            let event = self.buf.split_to(end + sep);
            self.searched = 0;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            let text = String::from_utf8_lossy(&event[..end]);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push(data.join("\n"));
            }
        }
    }
}

/// Where the first event of `buf` ends (a blank line), and the separator's length.
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_tap_splits_events_across_chunks() {
        let mut tap = SseTap::default();
        assert!(tap.push(b"data: {\"a\":").is_empty());
        assert_eq!(tap.push(b"1}\n\n: keep-alive\n\ndata: 2\r\n\r\n"), vec!["{\"a\":1}".to_owned(), "2".to_owned()]);
        assert!(tap.push(b"data: 3\n").is_empty());
    }

    #[test]
    fn an_endless_sse_event_is_reported_once_and_never_buffered() {
        let mut tap = SseTap::new(100);
        assert!(tap.push(b"data: ").is_empty());
        let mut markers = 0;
        for _ in 0..1000 {
            markers += tap.push(&[b'x'; 64]).len();
            assert!(tap.buf.len() <= 100 + 64, "{}", tap.buf.len());
        }
        assert_eq!(markers, 1);
        assert_eq!(tap.push(b"x\n\ndata: ok\n\n"), vec!["ok".to_owned()], "the next event is read again");
    }

    #[test]
    fn origin_drops_the_path() {
        let t = HttpTarget::new("http://127.0.0.1:9/rcp/", Vec::new(), &Default::default()).expect("client");
        assert_eq!(t.base(), "http://127.0.0.1:9/rcp");
        assert_eq!(t.origin(), "http://127.0.0.1:9");
    }
}
