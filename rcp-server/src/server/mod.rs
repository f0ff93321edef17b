//! The server an engine builds and serves: a [`Server`] is an assembly of parts (the
//! dispatcher every request goes through, with the server's identity, registered methods,
//! options and CPU executor, and the engine's health) put together by [`ServerBuilder`] from
//! the registered handlers, and served over any transport.
//!
//! - [`builder`]: [`ServerBuilder`], registration as advertisement;
//! - [`options`]: [`ServerOptions`], the limits and deadlines every transport applies;
//! - [`exec`]: the bounded CPU executor handlers run their CPU-bound work on, so that a server
//!   under load refuses (or, over a pipe, waits) instead of growing an unbounded pool.
//!
//! What the server shows its operators (readiness, metrics, logs, the binary's flags) is
//! [`crate::operations`]'s.

mod builder;
pub mod exec;
pub(crate) mod options;

use std::io;
use std::sync::Arc;

use rcp_wire::capabilities::Capabilities;
use rcp_wire::lifecycle::PeerInfo;

use crate::operations::status::{EngineStats, Health, NotReady, Status};
use crate::server::exec::Executor;
use crate::server::options::ServerOptions;
use crate::service::dispatch::Dispatcher;
use crate::service::outbound::Outbound;
use crate::service::session::Session;
use crate::transport::{self, Connection, IntoTransport, Transport};
pub use builder::ServerBuilder;

/// An RCP server: handlers, the capabilities they imply, identity and options.
///
/// Cheap to clone. Serve it over stdio with [`Server::serve_stdio`], over any transport with
/// [`Server::serve`] (a pair of async byte streams, for one), over HTTP with
/// [`crate::http::serve`]; drive it frame by frame with [`Server::connect`].
#[derive(Clone)]
pub struct Server {
    dispatcher: Arc<Dispatcher>,
    health: Arc<Health>,
}

impl Server {
    /// Starts building a server with this identity.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }

    /// A server from its parts.
    fn assemble(dispatcher: Dispatcher, status: Option<Arc<dyn Status>>) -> Self {
        Self { dispatcher: Arc::new(dispatcher), health: Arc::new(Health::new(status)) }
    }

    /// The capabilities the server enables (what `info` reports before `initialize`).
    pub fn capabilities(&self) -> Capabilities {
        Capabilities::clone(&self.dispatcher.identity.default_caps)
    }

    /// The server's identity.
    pub fn info(&self) -> &PeerInfo {
        &self.dispatcher.identity.info
    }

    /// The options in force.
    pub fn options(&self) -> &ServerOptions {
        &self.dispatcher.options
    }

    /// The CPU executor handlers run blocking work on.
    pub fn executor(&self) -> &Executor {
        &self.dispatcher.executor
    }

    /// Whether the server should receive new work: not draining, and the engine's
    /// [`Status::ready`] (if one is registered) says it can serve.
    pub fn readiness(&self) -> Result<(), NotReady> {
        self.health.readiness()
    }

    /// Marks the server as draining: from now on [`Server::readiness`] fails (`/readyz` is
    /// `503`) while requests still in flight are finished. The HTTP transport calls this when
    /// its shutdown signal fires.
    pub fn begin_drain(&self) {
        if self.health.begin_drain() {
            tracing::info!(target: "rcp_server", engine = %self.info().name, "draining: readiness now fails");
        }
    }

    /// The engine's figures, or all-`None` when it registered no [`Status`].
    pub fn engine_stats(&self) -> EngineStats {
        self.health.stats()
    }

    /// Serves one session over `transport` until EOF or `shutdown`: a `(reader, writer)` pair of
    /// async byte streams (a socket's halves, a child's pipes, `tokio::io::duplex` in tests),
    /// or [`Transport::stdio`].
    ///
    /// In-flight requests are drained and every answer flushed before this returns (§5.1,
    /// §13.1).
    pub async fn serve(&self, transport: impl IntoTransport) -> io::Result<()> {
        let carrier = transport.into_transport();
        if carrier.is_stdio() {
            self.log_startup("stdio", None);
        }
        transport::serve(Arc::clone(&self.dispatcher), carrier).await
    }

    /// Serves one session over this process's stdin/stdout until EOF or `shutdown`:
    /// [`Server::serve`] over [`Transport::stdio`].
    ///
    /// A `main` that returns afterwards exits 0 with nothing lost. stdout carries protocol
    /// frames only; diagnostics belong on stderr (see `init_tracing`).
    pub async fn serve_stdio(&self) -> io::Result<()> {
        self.serve(Transport::stdio()).await
    }

    /// A new session on this server, driven frame by frame: for transports that carry whole
    /// messages (a WebSocket, a message queue) rather than a byte stream, and for tests.
    /// `notify` receives the progress and log frames requests send while they run.
    pub fn connect(&self, notify: impl Fn(Vec<u8>) + Send + Sync + 'static) -> Connection {
        Connection::new(Arc::clone(&self.dispatcher), Arc::new(Session::new()), Outbound::new(notify))
    }

    /// The dispatcher, for the HTTP transport (and the dispatcher's tests).
    #[cfg(any(test, feature = "http"))]
    pub(crate) fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// Logs the one start-up line at `info`: engine, version, transport, address (HTTP), data
    /// directory and document count when the engine reports them.
    pub(crate) fn log_startup(&self, transport: &'static str, addr: Option<std::net::SocketAddr>) {
        let stats = self.engine_stats();
        let data_dir = stats.data_dir.as_ref().map_or_else(|| "(in memory)".to_owned(), |d| d.display().to_string());
        let info = self.info();
        tracing::info!(
            target: "rcp_server",
            engine = %info.name,
            version = info.version.as_deref().unwrap_or(""),
            transport,
            addr = addr.map(|a| a.to_string()),
            data_dir = %data_dir,
            documents = stats.documents,
            index_version = stats.index_version,
            "serving"
        );
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let identity = &self.dispatcher.identity;
        f.debug_struct("Server").field("info", &identity.info).field("capabilities", &identity.enabled).finish()
    }
}
