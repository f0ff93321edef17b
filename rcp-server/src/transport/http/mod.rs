//! The HTTP transport (§5.2) on axum: `POST <base>/<method>` (or the base path for batches),
//! buffered JSON or Server-Sent Events, stateless or stateful sessions, bearer auth, body and
//! rate limits, CORS. Like stdio, it only frames bytes: every protocol rule is the dispatcher's.
//!
//! Slow clients (§15.5): a connection has `header_read_timeout` to send each request's headers
//! (also the idle keep-alive limit) and `body_read_timeout` to send its body (else `408`); at
//! most `max_connections` are open at once (more: `503` with `Retry-After`). Authentication is
//! decided from the headers, so an unauthenticated body is never read beyond a small prefix,
//! and a request takes one of its client's in-flight slots only once its body is read.
//!
//! Status mapping: every well-formed JSON-RPC response, errors included, is `200`; a body that
//! is not JSON is `400`; a notification is `204` with no body; an unknown path is `404`; a
//! per-client request rate above the limit is `429` with `Retry-After`; a rejected caller whose
//! request has no id to answer is `401`; a failure before any response exists is `500`/`503`.
//!
//! Beside the base path, the operations endpoints of [`OpsPaths`] (`GET /healthz`, `/readyz`,
//! `/metrics`) serve orchestrators and scrapers; on shutdown readiness fails first
//! ([`HttpOptions::drain_grace`]), then the listener closes and in-flight requests drain.

mod admission;
mod auth;
mod connections;
mod ops;
mod router;
mod session;
mod sse;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Router;

use crate::server::Server;

pub use ops::OpsPaths;

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
    /// Stateful mode only: whether a request without `RCP-Session` is refused (`-32001`)
    /// instead of served statelessly at the advertised capabilities (§5.2). Clients that
    /// never send the header (the public SDKs) interoperate only when this is `false`, as it
    /// is by default on the command line; this library default keeps the strict behaviour.
    pub require_session: bool,
    /// Most connections open at once (§15.5); more are answered `503` with `Retry-After`.
    pub max_connections: usize,
    /// Time a connection has to send a request's complete headers, counted from when it is
    /// ready for a request (accepted, or its previous response sent): it is also the idle
    /// keep-alive timeout. Expired: the connection is closed.
    pub header_read_timeout: Duration,
    /// Time a request has to send its complete body once its headers are in (expired: `408`,
    /// and the connection is closed).
    pub body_read_timeout: Duration,
    /// The operations endpoints (`/healthz`, `/readyz`, `/metrics`), served outside `base`.
    pub ops: OpsPaths,
    /// Whether `/metrics` is served without the bearer tokens (they guard it by default).
    pub metrics_public: bool,
    /// After the shutdown signal, how long the server keeps accepting and serving while
    /// `/readyz` already answers `503`, so load balancers stop routing to it before the
    /// listener closes; then in-flight requests are drained.
    pub drain_grace: Duration,
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
            require_session: true,
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            ops: OpsPaths::default(),
            metrics_public: false,
            drain_grace: Duration::ZERO,
        }
    }
}

/// The default bind address: loopback only (§15).
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

impl Server {
    /// An axum [`Router`] serving RCP under `opts.base` and the operations endpoints of
    /// `opts.ops` beside it, to nest in an application or serve.
    ///
    /// Per-client limits key on the peer address, which axum provides when the router is
    /// served with `into_make_service_with_connect_info::<SocketAddr>()` ([`Server::serve_http`]
    /// sets it itself); without it all callers share one budget. The connection cap and the
    /// header timeout belong to the accept loop of [`Server::serve_http_on`], not the router.
    pub fn http_router(&self, opts: HttpOptions) -> Router {
        router::build(self, opts)
    }

    /// Serves HTTP on `addr` until SIGINT/SIGTERM, then stops accepting and drains in-flight
    /// requests before returning.
    pub async fn serve_http(&self, addr: SocketAddr, opts: HttpOptions) -> std::io::Result<()> {
        self.serve_http_on(listen(addr)?, opts, shutdown_signal()).await
    }

    /// Serves HTTP on a bound listener until `shutdown` completes, then drains: readiness fails
    /// at once ([`Server::begin_drain`]), the listener stays open for `opts.drain_grace`, then
    /// closes while in-flight requests finish. Connections are capped and timed out as `opts`
    /// says (`max_connections`, `header_read_timeout`). Logs the start-up line first.
    pub async fn serve_http_on(
        &self,
        listener: tokio::net::TcpListener,
        opts: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.log_startup("http", listener.local_addr().ok());
        let limits = connections::ConnectionLimits {
            max_connections: opts.max_connections,
            header_read_timeout: opts.header_read_timeout,
        };
        let server = self.clone();
        let grace = opts.drain_grace;
        let shutdown = async move {
            shutdown.await;
            server.begin_drain();
            tokio::time::sleep(grace).await;
        };
        connections::serve(listener, self.http_router(opts), limits, shutdown).await
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

/// Connections the kernel holds for the accept loop. `TcpListener::bind` asks for 128: then
/// 256 clients connecting at once overflowed it, and 22 of them waited a second for their
/// SYN to be sent again (`TcpExtListenOverflows`).
const LISTEN_BACKLOG: u32 = 1024;

/// A listener on `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as `bind` sets it).
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

#[cfg(test)]
mod listen_tests {
    use std::time::Duration;

    /// Clients that connect before the server accepts any of them are all taken by the
    /// kernel at once: none waits for a SYN retransmission (a second on Linux).
    #[tokio::test]
    async fn three_hundred_clients_connecting_at_once_all_get_through() {
        let listener = super::listen("127.0.0.1:0".parse().expect("addr")).expect("listen");
        let addr = listener.local_addr().expect("local addr");
        let connected = tokio::task::spawn_blocking(move || {
            (0..300)
                .map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .expect("join");
        let streams = connected.expect("every connection is queued for accept without a retry");
        assert_eq!(streams.len(), 300);
        drop(listener);
    }
}
