//! The HTTP transport (§5.2) on axum: `POST <base>/<method>` (or the base path for batches),
//! buffered JSON or Server-Sent Events, stateless or stateful sessions, bearer auth, body and
//! rate limits, CORS. Like stdio, it only frames bytes: every protocol rule is the dispatcher's.
//!
//! Status mapping: every well-formed JSON-RPC response, errors included, is `200`; a body that
//! is not JSON is `400`; a notification is `204` with no body; an unknown path is `404`; a
//! per-client request rate above the limit is `429` with `Retry-After`; a rejected caller whose
//! request has no id to answer is `401`; a failure before any response exists is `500`/`503`.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::Stream;
use rcp_protocol::RcpError;
use serde::Deserialize;
use serde_json::value::RawValue;
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::dispatch::{Processed, error_frame, is_valid_id};
use crate::outbound::Outbound;
use crate::server::Server;
use crate::session::Session;

/// The header carrying a stateful session token (§5.2).
pub const SESSION_HEADER: &str = "rcp-session";

/// How HTTP requests map to sessions (§5.2).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMode {
    /// Every request is served on its own at the advertised capabilities, with no handshake;
    /// `initialize`/`info` answer idempotently. Any replica can answer any request.
    Stateless,
    /// `initialize` returns `_meta.session`; later requests carry it in the `RCP-Session`
    /// header. Sessions idle for longer than `ttl` expire (then `-32001`).
    Stateful {
        /// Idle time after which a session expires.
        ttl: Duration,
    },
}

/// A per-client token bucket: a sustained rate with bounded bursts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests per second admitted in the long run.
    pub per_second: f64,
    /// Largest burst admitted at once.
    pub burst: f64,
}

/// Options of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Base path (default `/rcp`).
    pub base: String,
    /// Session handling.
    pub sessions: SessionMode,
    /// Accepted bearer tokens; empty means no authentication.
    pub bearer_tokens: Vec<String>,
    /// Largest accepted request body, in bytes (larger: `-32013`).
    pub body_limit: usize,
    /// Most requests one client (IP address) may have in flight (more: `-32011`).
    pub max_in_flight_per_client: usize,
    /// Per-client request rate (exceeded: HTTP `429` with `Retry-After`).
    pub rate_limit: Option<RateLimit>,
    /// Allowed CORS origins (`"*"` for any); `None` disables CORS headers.
    pub cors_origins: Option<Vec<String>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            base: "/rcp".into(),
            sessions: SessionMode::Stateless,
            bearer_tokens: Vec::new(),
            body_limit: 8 * 1024 * 1024,
            max_in_flight_per_client: 256,
            rate_limit: None,
            cors_origins: None,
        }
    }
}

/// The default bind address: loopback only (§15).
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

struct ClientState {
    tokens: f64,
    refilled: Instant,
    in_flight: usize,
}

struct HttpState {
    server: Server,
    opts: HttpOptions,
    sessions: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
    clients: Mutex<HashMap<IpAddr, ClientState>>,
}

impl Server {
    /// An axum [`Router`] serving RCP under `opts.base`, to nest in an application or serve.
    ///
    /// Per-client limits key on the peer address, which axum provides when the router is
    /// served with `into_make_service_with_connect_info::<SocketAddr>()` (as
    /// [`Server::serve_http`] does); without it all callers share one budget.
    pub fn http_router(&self, opts: HttpOptions) -> Router {
        let base = format!("/{}", opts.base.trim_matches('/'));
        let cors = opts.cors_origins.clone();
        let state = Arc::new(HttpState {
            server: self.clone(),
            opts,
            sessions: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
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

    /// Serves HTTP on `addr` until SIGINT/SIGTERM, then stops accepting and drains in-flight
    /// requests before returning.
    pub async fn serve_http(&self, addr: SocketAddr, opts: HttpOptions) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(addr = %listener.local_addr()?, "serving RCP over HTTP");
        self.serve_http_on(listener, opts, shutdown_signal()).await
    }

    /// Serves HTTP on a bound listener until `shutdown` completes, then drains.
    pub async fn serve_http_on(
        &self,
        listener: tokio::net::TcpListener,
        opts: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self.http_router(opts);
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}

async fn preflight() -> impl IntoResponse {
    (StatusCode::NO_CONTENT, [(header::ALLOW, "POST, OPTIONS")])
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
}

/// What the transport needs to know about a body before dispatching it.
struct Shape {
    batch: bool,
    id: Option<String>,
    method: Option<String>,
}

fn shape(body: &[u8]) -> Result<Shape, serde_json::Error> {
    let raw: &RawValue = serde_json::from_slice(body)?;
    let text = raw.get();
    if text.starts_with('[') {
        return Ok(Shape { batch: true, id: None, method: None });
    }
    let peek: Option<Peek<'_>> = serde_json::from_str(text).ok();
    let id = peek.as_ref().and_then(|p| p.id).map(RawValue::get).filter(|r| is_valid_id(r)).map(str::to_owned);
    let method = peek.and_then(|p| p.method).map(|m| m.into_owned());
    Ok(Shape { batch: false, id, method })
}

fn json(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

fn error_response(status: StatusCode, id: Option<&str>, e: &RcpError) -> Response {
    json(status, error_frame(id, e))
}

fn authorized(opts: &HttpOptions, headers: &HeaderMap) -> bool {
    if opts.bearer_tokens.is_empty() {
        return true;
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .unwrap_or("")
        .as_bytes();
    // Compare against every token without stopping early, in constant time per comparison.
    let mut ok = subtle::Choice::from(0u8);
    for t in &opts.bearer_tokens {
        ok |= t.as_bytes().ct_eq(presented);
    }
    bool::from(ok)
}

/// Releases a client's in-flight slot when the request ends, however it ends.
struct Slot {
    state: Arc<HttpState>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut clients) = self.state.clients.lock()
            && let Some(c) = clients.get_mut(&self.ip)
        {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }
}

enum Admission {
    Admitted(Slot),
    RateLimited(Duration),
    Busy,
}

fn admit(state: &Arc<HttpState>, ip: IpAddr) -> Admission {
    let Ok(mut clients) = state.clients.lock() else { return Admission::Busy };
    let now = Instant::now();
    let burst = state.opts.rate_limit.map_or(f64::INFINITY, |r| r.burst);
    let c = clients.entry(ip).or_insert(ClientState { tokens: burst, refilled: now, in_flight: 0 });
    if let Some(r) = state.opts.rate_limit {
        let elapsed = now.duration_since(c.refilled).as_secs_f64();
        c.tokens = (c.tokens + elapsed * r.per_second).min(r.burst);
        c.refilled = now;
        if c.tokens < 1.0 {
            let wait = (1.0 - c.tokens) / r.per_second.max(f64::MIN_POSITIVE);
            return Admission::RateLimited(Duration::from_secs_f64(wait.min(3600.0)));
        }
        c.tokens -= 1.0;
    }
    if c.in_flight >= state.opts.max_in_flight_per_client {
        return Admission::Busy;
    }
    c.in_flight += 1;
    Admission::Admitted(Slot { state: Arc::clone(state), ip })
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

async fn serve_one(
    state: &Arc<HttpState>,
    ip: IpAddr,
    path_method: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let opts = &state.opts;
    // Authentication comes before anything else, including initialize and gating (§15.6).
    let authorized = authorized(opts, headers);

    if authorized {
        match admit(state, ip) {
            Admission::RateLimited(wait) => {
                let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                let e = RcpError::rate_limited(wait.as_millis().max(1) as u64);
                let mut r = error_response(StatusCode::TOO_MANY_REQUESTS, None, &e);
                if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                    r.headers_mut().insert(header::RETRY_AFTER, v);
                }
                return r;
            }
            Admission::Busy => {
                let bytes = read_body(body, opts.body_limit).await.ok();
                let id = bytes.as_deref().and_then(|b| shape(b).ok()).and_then(|s| s.id);
                let e = RcpError::rate_limited(50).with_detail(format!(
                    "more than {} requests in flight for this client",
                    opts.max_in_flight_per_client
                ));
                return error_response(StatusCode::OK, id.as_deref(), &e);
            }
            Admission::Admitted(slot) => return dispatch(state, path_method, headers, body, slot).await,
        }
    }

    let bytes = read_body(body, opts.body_limit).await.ok();
    let id = bytes.as_deref().and_then(|b| shape(b).ok()).and_then(|s| s.id);
    match id {
        Some(id) => error_response(StatusCode::OK, Some(&id), &RcpError::unauthorized()),
        None => (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")]).into_response(),
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
    let (session, new_session) = match resolve_session(state, headers, &shape) {
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
        return sse(server, &session, &bytes, slot);
    }

    let processed = server.process(&session, &bytes, &Outbound::discard());
    let answer = match processed {
        Processed::Nothing => None,
        Processed::Ready(b) => Some(b),
        Processed::Pending(f) => f.await,
        Processed::Shutdown(b) => {
            if let (SessionMode::Stateful { .. }, Some(id)) = (&opts.sessions, session.id())
                && let Ok(mut sessions) = state.sessions.lock()
            {
                sessions.remove(id);
            }
            Some(b)
        }
    };
    if let Some(id) = new_session {
        if session.is_initialized() {
            if let Ok(mut sessions) = state.sessions.lock() {
                let now = Instant::now();
                if let SessionMode::Stateful { ttl } = &opts.sessions {
                    sessions.retain(|_, (_, used)| now.duration_since(*used) < *ttl);
                }
                sessions.insert(id, (Arc::clone(&session), now));
            }
        }
    }
    match answer {
        Some(b) => json(StatusCode::OK, b),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Picks the session a request runs in; for a stateful `initialize` without a token, also
/// returns the new session's id (registered only if the handshake succeeds).
fn resolve_session(
    state: &Arc<HttpState>,
    headers: &HeaderMap,
    shape: &Shape,
) -> Result<(Arc<Session>, Option<String>), RcpError> {
    let server = &state.server;
    let ttl = match &state.opts.sessions {
        SessionMode::Stateless => return Ok((Arc::new(server.stateless_session()), None)),
        SessionMode::Stateful { ttl } => *ttl,
    };
    let token = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    let is_initialize = shape.method.as_deref() == Some("initialize");
    if let Some(token) = token {
        let mut sessions = state.sessions.lock().map_err(|_| RcpError::internal("session table poisoned"))?;
        let now = Instant::now();
        sessions.retain(|_, (_, used)| now.duration_since(*used) < ttl);
        if let Some((s, used)) = sessions.get_mut(token) {
            *used = now;
            return Ok((Arc::clone(s), None));
        }
        if !is_initialize {
            return Err(RcpError::new(
                rcp_protocol::ErrorCode::NOT_INITIALIZED,
                "unknown or expired RCP-Session; send initialize to start a new session",
            ));
        }
        // An initialize carrying a stale token simply starts a new session.
    }
    if is_initialize {
        let id = uuid::Uuid::new_v4().simple().to_string();
        return Ok((Arc::new(Session::with_id(id.clone())), Some(id)));
    }
    Ok((Arc::new(Session::new()), None))
}

/// One request answered as Server-Sent Events: progress (and log) frames as they happen, then
/// exactly one final frame with the response. Dropping the stream (client gone) cancels it.
fn sse(server: &Server, session: &Arc<Session>, bytes: &[u8], slot: Slot) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<(bool, Vec<u8>)>();
    let progress_tx = tx.clone();
    let out = Outbound::new(move |frame| {
        let _ = progress_tx.send((false, frame));
    });
    let task = match server.process(session, bytes, &out) {
        Processed::Nothing => return StatusCode::NO_CONTENT.into_response(),
        Processed::Ready(b) | Processed::Shutdown(b) => {
            let _ = tx.send((true, b));
            None
        }
        Processed::Pending(f) => Some(tokio::spawn(async move {
            if let Some(b) = f.await {
                let _ = tx.send((true, b));
            }
        })),
    };
    drop(out);
    let stream = SseFrames { rx, task, done: false, _slot: slot };
    // Keep-alive comments let proxies keep the stream open and let us notice a client that
    // went away (the write fails) even while the handler is silent.
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(1))).into_response()
}

struct SseFrames {
    rx: mpsc::UnboundedReceiver<(bool, Vec<u8>)>,
    task: Option<tokio::task::JoinHandle<()>>,
    done: bool,
    _slot: Slot,
}

impl Stream for SseFrames {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some((last, frame))) => {
                if last {
                    self.done = true;
                }
                let text = String::from_utf8(frame).unwrap_or_default();
                Poll::Ready(Some(Ok(Event::default().data(text))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for SseFrames {
    fn drop(&mut self) {
        if !self.done
            && let Some(task) = self.task.take()
        {
            // The client went away before the final frame: drop the handler future, which
            // cancels the request (its in-flight guard fires the cancellation token).
            task.abort();
        }
    }
}
