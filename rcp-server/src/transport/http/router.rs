//! The axum router: paths, CORS, and the request pipeline — authenticate, admit, read and
//! check the body, pick the session, then answer as JSON or as Server-Sent Events.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rcp_protocol::RcpError;
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::admission::{Admission, Slot, Verdict};
use super::session::{LocalSessions, NoSessions, SessionManager, resolve};
use super::{HttpOptions, SESSION_HEADER, SessionMode, auth, sse};
use crate::dispatch::{Processed, error_frame, shape};
use crate::outbound::Outbound;
use crate::server::Server;

/// What every request of one router shares.
struct HttpState {
    server: Server,
    opts: HttpOptions,
    sessions: Box<dyn SessionManager>,
    admission: Arc<Admission>,
}

/// The router serving `server` under `opts.base`.
pub(super) fn build(server: &Server, opts: HttpOptions) -> Router {
    let base = format!("/{}", opts.base.trim_matches('/'));
    let cors = opts.cors_origins.clone();
    let sessions: Box<dyn SessionManager> = match &opts.sessions {
        SessionMode::Stateless => Box::new(NoSessions),
        SessionMode::Stateful { ttl } => Box::new(LocalSessions::new(*ttl)),
    };
    let state = Arc::new(HttpState {
        server: server.clone(),
        admission: Arc::new(Admission::new(opts.rate_limit, opts.max_in_flight_per_client)),
        opts,
        sessions,
    });
    let mut router = Router::new()
        .route(&base, post(handle).options(preflight))
        .route(&format!("{base}/{{*method}}"), post(handle).options(preflight))
        .with_state(state);
    if let Some(origins) = cors {
        let allow = if origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
        };
        router = router.layer(
            CorsLayer::new()
                .allow_origin(allow)
                .allow_methods([Method::POST, Method::OPTIONS])
                .allow_headers([
                    header::CONTENT_TYPE,
                    header::AUTHORIZATION,
                    header::ACCEPT,
                    SESSION_HEADER.parse().unwrap_or(header::ACCEPT),
                ])
                .expose_headers([header::RETRY_AFTER]),
        );
    }
    router
}

async fn preflight() -> impl IntoResponse {
    (StatusCode::NO_CONTENT, [(header::ALLOW, "POST, OPTIONS")])
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

fn error_response(status: StatusCode, id: Option<&str>, e: &RcpError) -> Response {
    json(status, error_frame(id, e))
}

async fn handle(State(state): State<Arc<HttpState>>, req: Request) -> Response {
    let started = Instant::now();
    let ip = req.extensions().get::<ConnectInfo<SocketAddr>>().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let base = format!("/{}", state.opts.base.trim_matches('/'));
    let path_method = req
        .uri()
        .path()
        .strip_prefix(&base)
        .map(|m| m.trim_start_matches('/'))
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    let headers = req.headers().clone();
    let response = serve_one(&state, ip, path_method.as_deref(), &headers, req.into_body()).await;
    tracing::info!(
        target: "rcp_server::http",
        path_method = path_method.as_deref().unwrap_or(""),
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

/// The id of a body, when it has one to answer with.
async fn body_id(body: Body, limit: usize) -> Option<String> {
    let bytes = read_body(body, limit).await.ok();
    bytes.as_deref().and_then(|b| shape(b).ok()).and_then(|s| s.id)
}

async fn serve_one(
    state: &Arc<HttpState>,
    ip: IpAddr,
    path_method: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let opts = &state.opts;
    // Authentication comes before anything else, including initialize and gating (§15.6).
    if !auth::authorized(&opts.bearer_tokens, headers) {
        return match body_id(body, opts.body_limit).await {
            Some(id) => error_response(StatusCode::OK, Some(&id), &RcpError::unauthorized()),
            None => (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")]).into_response(),
        };
    }
    match state.admission.admit(ip) {
        Verdict::RateLimited(wait) => {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let e = RcpError::rate_limited(wait.as_millis().max(1) as u64);
            let mut r = error_response(StatusCode::TOO_MANY_REQUESTS, None, &e);
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            r
        }
        Verdict::Busy => {
            let id = body_id(body, opts.body_limit).await;
            let e = RcpError::rate_limited(50)
                .with_detail(format!("more than {} requests in flight for this client", opts.max_in_flight_per_client));
            error_response(StatusCode::OK, id.as_deref(), &e)
        }
        Verdict::Admitted(slot) => dispatch(state, path_method, headers, body, slot).await,
    }
}

enum BodyError {
    TooLarge,
    Broken,
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, BodyError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if s.is::<http_body_util::LengthLimitError>() {
                return BodyError::TooLarge;
            }
            source = s.source();
        }
        BodyError::Broken
    })
}

/// Reads, checks and dispatches one admitted request. `slot` is the client's in-flight slot; it
/// is released when the answer is complete (for SSE, when the stream ends).
async fn dispatch(
    state: &Arc<HttpState>,
    path_method: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    slot: Slot,
) -> Response {
    let opts = &state.opts;
    if let Some(len) =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok())
        && len > opts.body_limit
    {
        let e =
            RcpError::payload_too_large(format!("body of {len} bytes exceeds the limit of {} bytes", opts.body_limit));
        return error_response(StatusCode::OK, None, &e);
    }
    let bytes = match read_body(body, opts.body_limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            let e = RcpError::payload_too_large(format!("body exceeds the limit of {} bytes", opts.body_limit));
            return error_response(StatusCode::OK, None, &e);
        }
        Err(BodyError::Broken) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let shape = match shape(&bytes) {
        Ok(s) => s,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, None, &RcpError::parse_error(e.to_string())),
    };
    if let Some(pm) = path_method {
        if shape.batch {
            let e = RcpError::invalid_request(format!("batches are accepted on {} only", opts.base));
            return error_response(StatusCode::OK, None, &e);
        }
        if shape.method.as_deref() != Some(pm) {
            let e = RcpError::invalid_request(format!(
                "path method '{pm}' does not match body method '{}'",
                shape.method.as_deref().unwrap_or("")
            ));
            return error_response(StatusCode::OK, shape.id.as_deref(), &e);
        }
    }

    let server = &state.server;
    let (session, new_session) = match resolve(server, &opts.sessions, state.sessions.as_ref(), headers, &shape) {
        Ok(s) => s,
        Err(e) => return error_response(StatusCode::OK, shape.id.as_deref(), &e),
    };

    // A new stateful session is registered after its handshake, so its initialize is never
    // streamed (it has no progress to report anyway).
    let wants_sse = !shape.batch
        && shape.id.is_some()
        && new_session.is_none()
        && server.shared.default_caps.streaming.is_some()
        && headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    if wants_sse {
        return sse::respond(server, &session, &bytes, slot);
    }

    let answer = match server.process(&session, &bytes, &Outbound::discard()) {
        Processed::Nothing => None,
        Processed::Ready(b) => Some(b),
        Processed::Pending(f) => f.await,
        Processed::Shutdown(b) => {
            if let Some(id) = session.id() {
                state.sessions.close(id);
            }
            Some(b)
        }
    };
    if let Some(id) = new_session
        && session.is_initialized()
    {
        state.sessions.register(id, session);
    }
    match answer {
        Some(b) => json(StatusCode::OK, b),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}
