//! The accept loop (§15.5): every connection is served by hyper with a header-read timeout,
//! counted against its client's share and a global cap, and drained on shutdown.
//!
//! Slow or idle peers must not hold resources for ever: hyper's header timer starts whenever a
//! connection is ready for its next request, so it bounds slow headers and idle keep-alive
//! alike; a connection beyond its client's share ([`super::share`]) or beyond the cap is
//! answered `503` with `Retry-After` and closed at once, before anything is read from it. The
//! share is checked first, so a client flooding connections is refused on its own share and
//! leaves the rest of the cap to the others.
//!
//! With TLS (feature `tls`) a connection first completes its handshake, within the header
//! timeout, and is then served like any other; one that fails it (a plaintext request, an
//! untrusted client certificate) is closed without an answer.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_service::Service;

use super::share::ConnectionShares;

/// What a connection is allowed before it is closed.
#[derive(Debug, Clone, Copy)]
pub(super) struct ConnectionLimits {
    /// Most connections open at once; more are refused with `503`.
    pub(super) max_connections: usize,
    /// Most connections one client may hold open at once; more are refused with `503`.
    pub(super) max_connections_per_client: usize,
    /// Time a connection has to deliver complete request headers, from when it is ready for a
    /// request (accepted, or its previous response sent).
    pub(super) header_read_timeout: Duration,
}

/// The answer to a connection beyond the cap: written without reading the request, then closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: text/plain\r\n\
content-length: 34\r\nconnection: close\r\n\r\ntoo many connections; retry later\n";

/// The TLS configuration a listener may serve with: [`super::ServerTls`] with the `tls`
/// feature, and a type with no value without it.
#[cfg(feature = "tls")]
pub(super) type Tls = super::tls::ServerTls;
/// Without the `tls` feature there is no TLS configuration to give.
#[cfg(not(feature = "tls"))]
pub(super) type Tls = std::convert::Infallible;

/// Pause after a failed `accept` (for instance out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting and waits for
/// the open connections to finish their requests.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<Tls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let shares = Arc::new(ConnectionShares::new(limits.max_connections_per_client));
    // HTTP/1.1 only, as before: hyper's header timer covers slow headers and idle keep-alive.
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(target: "rcp_server::http", error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(place) = shares.take(peer.ip()) else {
            refuse(&stream);
            tracing::debug!(target: "rcp_server::http", %peer, limit = limits.max_connections_per_client, "connection refused: the client holds its whole share of connections");
            continue;
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            refuse(&stream);
            tracing::warn!(target: "rcp_server::http", %peer, limit = limits.max_connections, "connection refused: at the connection cap");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            // Per-client admission keys on the peer address (see `Server::http_router`).
            req.extensions_mut().insert(ConnectInfo(peer));
            let mut router = router.clone();
            async move { router.call(req).await }
        });
        let watcher = graceful.watcher();
        let builder = builder.clone();
        #[cfg(feature = "tls")]
        let handshake = tls.as_ref().map(Tls::acceptor);
        #[cfg(not(feature = "tls"))]
        let handshake = tls;
        let handshake_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let served = match handshake {
                None => watcher.watch(builder.serve_connection(TokioIo::new(stream), service)).await,
                #[cfg(feature = "tls")]
                Some(acceptor) => match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => watcher.watch(builder.serve_connection(TokioIo::new(stream), service)).await,
                    Ok(Err(e)) => {
                        tracing::debug!(target: "rcp_server::http", %peer, error = %e, "TLS handshake failed");
                        Ok(())
                    }
                    Err(_) => {
                        tracing::debug!(target: "rcp_server::http", %peer, "TLS handshake timed out");
                        Ok(())
                    }
                },
                #[cfg(not(feature = "tls"))]
                Some(never) => match never {},
            };
            #[cfg(not(feature = "tls"))]
            let _ = handshake_timeout;
            if let Err(e) = served {
                tracing::debug!(target: "rcp_server::http", %peer, error = %e, "connection ended with an error");
            }
            drop((permit, place));
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Answers a connection refused before anything is read from it, and counts the refusal. Best
/// effort and non-blocking: a peer that does not read the refusal just sees the connection
/// close (when `stream` is dropped).
fn refuse(stream: &tokio::net::TcpStream) {
    let _ = stream.try_write(REFUSED);
    crate::operations::observe::reject(crate::operations::observe::Rejection::Connections);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_http_response() {
        let text = std::str::from_utf8(REFUSED).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 503 "));
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.parse::<usize>().ok())
            .expect("content-length");
        assert_eq!(len, body.len());
    }
}
