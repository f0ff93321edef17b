//! The axum router: paths, CORS, and the request pipeline — authenticate (from the headers),
//! pace, read the body within its timeout, take an in-flight slot, check the body, pick the
//! session, then answer as JSON or as Server-Sent Events.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rcp_wire::RcpError;
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::admission::{Admission, Slot};
use super::auth::Credentials;
use super::options::{HttpOptions, SESSION_HEADER, SessionMode};
use super::session::{LocalSessions, NoSessions, SessionManager, resolve};
use super::sse;
use crate::operations::observe::{self, Rejection};
use crate::server::Server;
use crate::service::access::Grant;
use crate::service::dispatch::{self, Processed, Shape, answered_at_once, error_frame, shape};
use crate::service::outbound::Outbound;

/// What every request of one router shares.
struct HttpState {
    server: Server,
    opts: HttpOptions,
    sessions: Box<dyn SessionManager>,
    admission: Arc<Admission>,
    credentials: Arc<Credentials>,
}

/// The router serving `server` under `opts.base`.
pub(super) fn build(server: &Server, opts: HttpOptions) -> Router {
    let base = format!("/{}", opts.base.trim_matches('/'));
    let cors = opts.cors_origins.clone();
    let sessions: Box<dyn SessionManager> = match &opts.sessions {
        SessionMode::Stateless => Box::new(NoSessions),
        SessionMode::Stateful { ttl } => Box::new(LocalSessions::new(*ttl)),
    };
    let credentials = Arc::new(Credentials::new(&opts.bearer_tokens, opts.tokens.clone()));
    let ops = super::ops::routes(server, &base, &opts.ops, Arc::clone(&credentials), opts.metrics_public);
    let state = Arc::new(HttpState {
        server: server.clone(),
        credentials,
        admission: Arc::new(Admission::new(opts.rate_limit, opts.max_in_flight_per_client)),
        opts,
        sessions,
    });
    let mut router = Router::new()
        .route(&base, post(handle).options(preflight))
        .route(&format!("{base}/{{*method}}"), post(handle).options(preflight))
        .with_state(state)
        .merge(ops);
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
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| super::share::client_of(c.0.ip()));
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

/// The most of an unauthenticated body read to find the id to answer with; a larger body is
/// refused from its headers, unread.
const UNAUTHENTICATED_PEEK: usize = 4096;

/// The longest wait for that small unauthenticated body.
const UNAUTHENTICATED_WAIT: Duration = Duration::from_secs(2);

fn content_length(headers: &HeaderMap) -> Option<usize> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok())
}

/// The answer to a caller without valid credentials (§15.6), decided from the headers: a small
/// body is read to answer `-32012` with its id; anything larger is refused unread with `401`
/// and the connection closed, so a stranger cannot make the server read megabytes.
async fn refuse_unauthenticated(headers: &HeaderMap, body: Body, body_read_timeout: Duration) -> Response {
    let small = content_length(headers).is_none_or(|len| len <= UNAUTHENTICATED_PEEK);
    let id = if small {
        let wait = body_read_timeout.min(UNAUTHENTICATED_WAIT);
        match tokio::time::timeout(wait, read_body(body, UNAUTHENTICATED_PEEK)).await {
            Ok(Ok(bytes)) => shape(&bytes).ok().and_then(|s| s.id),
            _ => None,
        }
    } else {
        None
    };
    match id {
        Some(id) => error_response(StatusCode::OK, Some(&id), &RcpError::unauthorized()),
        None => (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer"), (header::CONNECTION, "close")])
            .into_response(),
    }
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
    let Some(grant) = state.credentials.grant(headers) else {
        observe::reject(Rejection::Auth);
        return refuse_unauthenticated(headers, body, opts.body_read_timeout).await;
    };
    if let Err(wait) = state.admission.pace(ip) {
        observe::reject(Rejection::Rate);
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let e = RcpError::rate_limited(wait.as_millis().max(1) as u64);
        let mut r = error_response(StatusCode::TOO_MANY_REQUESTS, None, &e);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let bytes = match read_request_body(opts, headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let shape = match shape(&bytes) {
        Ok(s) => s,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, None, &RcpError::parse_error(e.to_string())),
    };
    // Only a request whose body is in counts against its client's in-flight limit, and only
    // one that can wait: `ping`, `info` and `cancel` are answered at once and always admitted.
    let slot = if !shape.batch && shape.method.as_deref().is_some_and(answered_at_once) {
        None
    } else {
        let Some(slot) = state.admission.enter(ip) else {
            observe::reject(Rejection::InFlight);
            let e = RcpError::rate_limited(50)
                .with_detail(format!("more than {} requests in flight for this client", opts.max_in_flight_per_client));
            return error_response(StatusCode::OK, shape.id.as_deref(), &e);
        };
        Some(slot)
    };
    dispatch(state, path_method, headers, &bytes, shape, slot, &grant).await
}

/// A grant limited to collections is served only by a server whose handlers apply it
/// ([`crate::ServerBuilder::collection_grants`]); anywhere else it is `-32012`, never widened to
/// every collection.
fn grant_applies(server: &Server, grant: &Grant) -> Result<(), RcpError> {
    if grant.is_collection_limited() && !server.dispatcher().identity.collection_grants {
        return Err(RcpError::unauthorized().with_detail(
            "these credentials are limited to named collections, and this server applies no collection grants",
        ));
    }
    Ok(())
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

/// Reads an authenticated body: at most `body_limit` bytes (`-32013`), within
/// `body_read_timeout` (`408`, connection closed).
async fn read_request_body(opts: &HttpOptions, headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
    let too_large = |detail: String| {
        observe::reject(Rejection::Size);
        error_response(StatusCode::OK, None, &RcpError::payload_too_large(detail))
    };
    if let Some(len) = content_length(headers)
        && len > opts.body_limit
    {
        return Err(too_large(format!("body of {len} bytes exceeds the limit of {} bytes", opts.body_limit)));
    }
    match tokio::time::timeout(opts.body_read_timeout, read_body(body, opts.body_limit)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(BodyError::TooLarge)) => Err(too_large(format!("body exceeds the limit of {} bytes", opts.body_limit))),
        Ok(Err(BodyError::Broken)) => Err(StatusCode::BAD_REQUEST.into_response()),
        Err(_) => {
            observe::reject(Rejection::Timeout);
            Err((StatusCode::REQUEST_TIMEOUT, [(header::CONNECTION, "close")]).into_response())
        }
    }
}

/// Checks and dispatches one admitted request whose body is read and peeked at (`shape`), for a
/// caller holding `grant`. `slot` is the client's in-flight slot (none for methods answered at
/// once); it is released when the answer is complete (for SSE, when the stream ends).
async fn dispatch(
    state: &Arc<HttpState>,
    path_method: Option<&str>,
    headers: &HeaderMap,
    bytes: &[u8],
    shape: Shape,
    slot: Option<Slot>,
    grant: &Grant,
) -> Response {
    let opts = &state.opts;
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
    if let Err(e) = grant_applies(server, grant) {
        return error_response(StatusCode::OK, shape.id.as_deref(), &e);
    }
    let (session, new_session) =
        match resolve(server, &opts.sessions, opts.require_session, state.sessions.as_ref(), headers, &shape, grant) {
            Ok(s) => s,
            Err(e) => return error_response(StatusCode::OK, shape.id.as_deref(), &e),
        };

    // A new stateful session is registered after its handshake, so its initialize is never
    // streamed (it has no progress to report anyway).
    let wants_sse = !shape.batch
        && shape.id.is_some()
        && new_session.is_none()
        && server.dispatcher().identity.default_caps.streaming.is_some()
        && headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    if wants_sse {
        return sse::respond(server, &session, bytes, slot);
    }

    let answer = match dispatch::process(server.dispatcher(), &session, bytes, &Outbound::discard()) {
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
        && session.negotiated().is_some_and(|n| !n.profile.is_stateless())
    {
        state.sessions.register(id, session);
    }
    match answer {
        Some(b) => json(StatusCode::OK, b),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}
