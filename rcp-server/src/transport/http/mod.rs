//! The HTTP transport (§5.2) on axum: `POST <base>/<method>` (or the base path for batches),
//! buffered JSON or Server-Sent Events, stateless or stateful sessions, bearer auth with scoped
//! tokens ([`AccessTokens`], [`crate::access`]), body and rate limits, CORS. Like stdio, it only
//! frames bytes: every protocol rule is the dispatcher's.
//!
//! Scoped tokens: the caller's token decides its session's scopes; the dispatcher's gate
//! refuses what they do not allow (`-32012`) and `initialize` advertises only what they do. A
//! stateful session keeps the scopes it was opened with, and a later request on it whose token
//! no longer grants all of them is refused (`-32012`). [`AccessTokens::reload`] re-reads the
//! tokens file without dropping a connection; the `serve` command calls it on SIGHUP.
//!
//! Slow clients (§15.5): a connection has `header_read_timeout` to send each request's headers
//! (also the idle keep-alive limit) and `body_read_timeout` to send its body (else `408`); at
//! most `max_connections` are open at once, and at most `max_connections_per_client` of them
//! from one client (more: `503` with `Retry-After`). Authentication is
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
mod options;
mod router;
mod session;
mod share;
mod sse;
#[cfg(feature = "tls")]
mod tls;
mod tokens;

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;

pub use ops::OpsPaths;
pub use options::{DEFAULT_ADDR, HttpOptions, RateLimit, SESSION_HEADER, SessionMode};
#[cfg(feature = "tls")]
pub use tls::{ServerTls, TlsError, TlsFiles};
pub use tokens::{AccessTokens, TokensError};

use crate::server::Server;

/// An axum [`Router`] serving `server` under `opts.base`, with the operations endpoints of
/// `opts.ops` beside it, to nest in an application or serve.
///
/// Per-client limits key on the peer address, which axum provides when the router is served
/// with `into_make_service_with_connect_info::<SocketAddr>()` ([`serve`] sets it itself);
/// without it all callers share one budget. The connection cap and the header timeout belong
/// to the accept loop of [`serve_on`], not the router.
pub fn router(server: &Server, opts: HttpOptions) -> Router {
    router::build(server, opts)
}

/// Serves `server` over HTTP on `addr` until SIGINT/SIGTERM, then stops accepting and drains
/// in-flight requests before returning.
pub async fn serve(server: &Server, addr: SocketAddr, opts: HttpOptions) -> std::io::Result<()> {
    serve_on(server, listen(addr)?, opts, shutdown_signal()).await
}

/// Serves `server` over HTTP on a bound listener until `shutdown` completes, then drains:
/// readiness fails at once ([`Server::begin_drain`]), the listener stays open for
/// `opts.drain_grace`, then closes while in-flight requests finish. Connections are capped and
/// timed out as `opts` says (`max_connections`, `max_connections_per_client`,
/// `header_read_timeout`). With `opts.tls` (feature `tls`) it serves HTTPS only: the
/// handshake must complete within `header_read_timeout`, and a plaintext request fails it.
/// Logs the start-up line first. Refuses to start when `opts.tokens` limits a token to
/// collections and `server`'s handlers apply no collection grants
/// ([`crate::ServerBuilder::collection_grants`]).
pub async fn serve_on(
    server: &Server,
    listener: tokio::net::TcpListener,
    opts: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if opts.tokens.as_ref().is_some_and(AccessTokens::has_collection_grants)
        && !server.dispatcher().identity.collection_grants
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the tokens file limits a token to collections (read@NAME, write@NAME), and this server applies no \
             collection grants: only a server with collections (rcp-gateway) does; grant plain scopes here",
        ));
    }
    #[cfg(feature = "tls")]
    let tls = opts.tls.clone();
    #[cfg(not(feature = "tls"))]
    let tls: Option<connections::Tls> = None;
    server.log_startup(if tls.is_some() { "https" } else { "http" }, listener.local_addr().ok());
    let limits = connections::ConnectionLimits {
        max_connections: opts.max_connections,
        max_connections_per_client: opts.connections_per_client(),
        header_read_timeout: opts.header_read_timeout,
    };
    let draining = server.clone();
    let grace = opts.drain_grace;
    let shutdown = async move {
        shutdown.await;
        draining.begin_drain();
        tokio::time::sleep(grace).await;
    };
    connections::serve(listener, router(server, opts), limits, tls, shutdown).await
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
