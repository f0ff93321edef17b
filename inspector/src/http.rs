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
use serde_json::{Value, json};

use crate::error::HttpTargetError;
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
}

impl HttpTarget {
    /// A target at `base` (e.g. `http://127.0.0.1:8080/rcp`), sent `headers` on every request.
    pub fn new(base: &str, headers: Vec<(String, String)>) -> Result<Self, HttpTargetError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(HttpTargetError::Client)?;
        Ok(Self { base: base.trim_end_matches('/').to_owned(), headers, http })
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
                let frame = error_frame(&id, -32603, format!("cannot reach {}: {e}", self.base), None);
                wire.record(engine, Direction::Received, source, frame.clone());
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
        match resp.bytes().await {
            Ok(bytes) => {
                if !bytes.is_empty() {
                    wire.record_text(engine, Direction::Received, source, &bytes);
                }
                (status, out, bytes).into_response()
            }
            Err(e) => {
                let frame = error_frame(&id, -32603, format!("reading the answer of {}: {e}", self.base), None);
                wire.record(engine, Direction::Received, source, frame.clone());
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
                    json!({"url": url, "status": status, "body": body.chars().take(200).collect::<String>()})
                }
                Err(e) => json!({"url": url, "error": e.to_string()}),
            }
        };
        let (healthz, readyz) = tokio::join!(probe("/healthz"), probe("/readyz"));
        json!({"transport": "http", "url": self.base, "healthz": healthz, "readyz": readyz})
    }
}

/// Splits an SSE byte stream into the data of its events (the concatenated `data:` lines).
#[derive(Debug, Default)]
pub struct SseTap {
    buf: BytesMut,
}

impl SseTap {
    /// Feeds a chunk; returns the data of every event it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some((end, sep)) = event_end(&self.buf) {
            let event = self.buf.split_to(end + sep);
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
        out
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
    fn origin_drops_the_path() {
        let t = HttpTarget::new("http://127.0.0.1:9/rcp/", Vec::new()).expect("client");
        assert_eq!(t.base(), "http://127.0.0.1:9/rcp");
        assert_eq!(t.origin(), "http://127.0.0.1:9");
    }
}
