//! The engines an inspector serves: one per registry entry (or the single `--stdio`/`--http`
//! target), each a live stdio session, an HTTP target, or the reason it could not start.

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rcp_client::{EngineSpec, Transport};
use serde_json::{Value, json};

use crate::error::HttpTargetError;
use crate::http::HttpTarget;
use crate::redact::{is_secret_header, redact_url, shell_var};
use crate::stdio::{InFlight, StdioSession, error_frame};
use crate::wire::{Direction, WireLog};

/// How the inspector reaches one engine.
#[derive(Debug)]
pub enum Link {
    /// A process it spawned and keeps one session with.
    Stdio(StdioSession),
    /// An HTTP endpoint it forwards to.
    Http(HttpTarget),
    /// It could not be started or reached; every request is answered with this error.
    Failed {
        /// What went wrong.
        reason: String,
        /// The engine's last stderr lines, if it was a process.
        stderr: Vec<String>,
    },
}

/// One engine of the inspector.
pub struct Engine {
    /// Its id (the registry's, or one derived from the target).
    pub spec: EngineSpec,
    /// How it is reached.
    pub link: Link,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("link", &self.link).finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts (stdio) or prepares (HTTP) the engine of `spec`; a failure is kept, not returned,
    /// so the page can show it.
    pub async fn open(spec: EngineSpec, wire: Arc<WireLog>) -> Self {
        let link = match &spec.transport {
            Transport::Stdio { command } => match StdioSession::spawn(&spec.id, command.clone(), wire).await {
                Ok(s) => Link::Stdio(s),
                Err(e) => Link::Failed { stderr: e.stderr().to_vec(), reason: e.to_string() },
            },
            Transport::Http { url } => {
                match spec
                    .http_headers()
                    .map_err(HttpTargetError::from)
                    .and_then(|h| HttpTarget::new(url, h, &spec.tls))
                {
                    Ok(t) => Link::Http(t),
                    Err(e) => Link::Failed { reason: e.to_string(), stderr: Vec::new() },
                }
            }
        };
        Self { spec, link }
    }

    /// The engine's id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// What the page's engine picker shows.
    pub fn describe(&self) -> Value {
        let (transport, target) = match &self.spec.transport {
            Transport::Stdio { command } => ("stdio", command.join(" ")),
            Transport::Http { url } => ("http", redact_url(url)),
        };
        let error = match &self.link {
            Link::Failed { reason, stderr } => json!({"message": reason, "stderr": stderr}),
            _ => Value::Null,
        };
        // What `curl` needs to replay a request: the configured headers, with every credential
        // left to the shell (`$VAR`) rather than written into the page.
        let mut curl_headers: Vec<String> = self
            .spec
            .headers
            .iter()
            .map(|(k, v)| if is_secret_header(k) { format!("{k}: ${}", shell_var(k)) } else { format!("{k}: {v}") })
            .collect();
        if let Some(var) = &self.spec.token_env {
            curl_headers.push(format!("Authorization: Bearer ${var}"));
        }
        json!({"id": self.spec.id, "transport": transport, "target": target, "error": error, "curlHeaders": curl_headers})
    }

    /// Health for the Server panel: the process state (stdio) or `/healthz` + `/readyz` (HTTP).
    pub async fn health(&self) -> Value {
        match &self.link {
            Link::Stdio(s) => s.health(),
            Link::Http(h) => h.health().await,
            Link::Failed { reason, stderr } => json!({"running": false, "error": reason, "stderr": stderr}),
        }
    }

    /// Answers one JSON-RPC frame POSTed for `method` the way an RCP HTTP server would (§5.2):
    /// JSON, or SSE when the caller accepts `text/event-stream`.
    pub async fn rpc(
        &self,
        method: &str,
        body: Bytes,
        headers: &HeaderMap,
        wire: Arc<WireLog>,
        source: &str,
    ) -> Response {
        let session = match &self.link {
            Link::Http(h) => return h.forward(method, body, headers, wire, self.id(), source).await,
            Link::Stdio(s) => s,
            Link::Failed { reason, stderr } => {
                let id = serde_json::from_slice::<Value>(&body).ok().and_then(|f| f.get("id").cloned());
                let msg = format!("engine '{}' is not available: {reason}", self.id());
                return Json(error_frame(&id.unwrap_or(Value::Null), -32603, msg, Some(json!({"stderr": stderr}))))
                    .into_response();
            }
        };
        let frame: Value = match serde_json::from_slice(&body) {
            Ok(f) => f,
            Err(e) => {
                wire.record_text(self.id(), Direction::Sent, source, &body);
                return Json(error_frame(&Value::Null, -32700, format!("parse error: {e}"), None)).into_response();
            }
        };
        let id = frame.get("id").cloned();
        if !frame.is_object() || frame.get("method").and_then(Value::as_str) != Some(method) {
            let msg =
                format!("the inspector forwards one request per POST, whose method matches the path ('{method}')");
            return Json(error_frame(&id.unwrap_or(Value::Null), -32600, msg, None)).into_response();
        }
        let Some(id) = id else {
            session.notify(frame, source);
            return StatusCode::NO_CONTENT.into_response();
        };
        if method == "initialize" {
            // A stdio session negotiates once; this is the answer of the inspector's handshake.
            return Json(json!({"jsonrpc": "2.0", "id": id, "result": session.initialize_result()})).into_response();
        }
        let flight = match session.request(frame, source) {
            Ok(f) => f,
            Err(e) => return Json(e).into_response(),
        };
        let wants_sse =
            headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
        if wants_sse { sse(flight) } else { json_answer(flight).await }
    }
}

/// Waits for the response, dropping progress frames (the caller did not ask for a stream).
async fn json_answer(mut flight: InFlight) -> Response {
    while let Some(frame) = flight.frames.recv().await {
        if frame.get("id").is_some() {
            return Json(frame).into_response();
        }
    }
    StatusCode::BAD_GATEWAY.into_response()
}

/// Streams progress frames and then the response as SSE events; the stream ends after the
/// response, and dropping it earlier cancels the request.
fn sse(flight: InFlight) -> Response {
    let stream = futures::stream::unfold(Some(flight), |state| async move {
        let mut flight = state?;
        let frame = flight.frames.recv().await?;
        let last = frame.get("id").is_some();
        let event = Ok::<_, std::convert::Infallible>(Event::default().data(frame.to_string()));
        Some((event, if last { None } else { Some(flight) }))
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_described_engine_shows_no_secret() {
        let mut spec = EngineSpec::new("e", Transport::Http { url: "http://me:pw@127.0.0.1:9/rcp".into() });
        spec.headers = vec![
            ("X-Api-Key".into(), "k3y-value".into()),
            ("Authorization".into(), "Bearer b34rer".into()),
            ("X-Team".into(), "ir".into()),
        ];
        let engine = Engine::open(spec, Arc::default()).await;
        let text = engine.describe().to_string();
        for secret in ["k3y-value", "b34rer", "pw@"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
        assert!(text.contains("X-Api-Key: $RCP_X_API_KEY") && text.contains("X-Team: ir"), "{text}");
    }
}
