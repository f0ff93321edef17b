//! The RCP Inspector: a local web page to explore any RCP server.
//!
//! `rcp-inspect --stdio "rcp-bm25 serve"` (or `--http URL`, or `--registry rcp.json`) starts or
//! reaches the engine(s), then serves, on `127.0.0.1` only, a page with six panels — Server
//! (identity, capabilities, health), Query (filters built from the advertised fields and
//! operators, pagination), Stream (progress frames over SSE, cancel), Compare (each engine's
//! ranking beside the fused one), Wire (every frame, copyable as curl) and Conformance (the
//! `rcp-conformance` report by level).
//!
//! The page speaks RCP's HTTP transport (§5.2) to `POST /rpc/<engine>/<method>`; the inspector
//! forwards to an HTTP engine unchanged, or bridges to the one NDJSON session it keeps with a
//! stdio engine, and logs every frame for the Wire panel. The Compare panel's federation is
//! rcp-client's [`rcp_client::Federation`] over those same endpoints.

#![forbid(unsafe_code)]

pub mod app;
pub mod engine;
mod error;
pub mod http;
pub mod redact;
pub mod stdio;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcp_client::{EngineSpec, Registry, Transport};

pub use error::{HttpTargetError, InspectorError, StartError};

/// What to inspect.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Spawn this command (program and arguments) and keep one stdio session with it.
    Stdio(Vec<String>),
    /// An engine at an HTTP base URL.
    Http {
        /// The base URL, e.g. `http://127.0.0.1:8080/rcp`.
        url: String,
        /// Headers sent with every request (`Name`, `value`).
        headers: Vec<(String, String)>,
        /// The environment variable holding a bearer token, read when connecting.
        token_env: Option<String>,
    },
    /// Every engine of an `rcp.json` registry (§16.1); enables the Compare panel.
    Registry(PathBuf),
}

impl Target {
    /// The engines the target names, and whether it is a registry.
    pub fn registry(&self) -> Result<(Registry, bool), InspectorError> {
        match self {
            Target::Stdio(command) => {
                let program = command.first().ok_or(InspectorError::EmptyCommand)?;
                let id = std::path::Path::new(program)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .filter(|n| !n.is_empty())
                    .unwrap_or("engine")
                    .to_owned();
                let spec = EngineSpec::new(id, Transport::Stdio { command: command.clone() });
                Ok((Registry { engines: vec![spec], ..Default::default() }, false))
            }
            Target::Http { url, headers, token_env } => {
                if !url.starts_with("http://") && !url.starts_with("https://") {
                    return Err(InspectorError::NotAUrl(url.clone()));
                }
                let mut spec = EngineSpec::new("engine", Transport::Http { url: url.clone() });
                spec.headers = headers.clone();
                spec.token_env = token_env.clone();
                Ok((Registry { engines: vec![spec], ..Default::default() }, false))
            }
            Target::Registry(path) => Ok((Registry::load(path)?, true)),
        }
    }
}

/// A started inspector.
pub struct Inspector {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its shared state.
    pub app: Arc<app::App>,
    listener: tokio::net::TcpListener,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Inspector {
    /// Starts every engine of `target` (concurrently) and binds `127.0.0.1:port` (0 picks a
    /// free port). An engine that fails to start is kept, with its error, for the page to show.
    pub async fn start(target: &Target, port: u16, schema: Option<PathBuf>) -> Result<Self, InspectorError> {
        Self::start_with(target, port, schema, wire::WireLimits::default(), &rcp_client::TlsOptions::default()).await
    }

    /// [`Inspector::start`] with the wire log bounded by `limits`, and `https://` engines
    /// reached with `tls` (`--ca-cert`, `--client-cert`) unless their registry entry says
    /// otherwise (`caCert`).
    pub async fn start_with(
        target: &Target,
        port: u16,
        schema: Option<PathBuf>,
        limits: wire::WireLimits,
        tls: &rcp_client::TlsOptions,
    ) -> Result<Self, InspectorError> {
        let (mut registry, is_registry) = target.registry()?;
        for spec in &mut registry.engines {
            spec.tls = spec.tls_or(tls);
        }
        let wire = Arc::new(wire::WireLog::new(limits));
        let engines = futures::future::join_all(
            registry.engines.into_iter().map(|spec| engine::Engine::open(spec, wire.clone())),
        )
        .await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|source| InspectorError::Listen { port, source })?;
        let addr = listener.local_addr().map_err(|source| InspectorError::Listen { port, source })?;
        let app = Arc::new(app::App::new(engines, wire, is_registry, addr.port(), schema));
        Ok(Self { addr, app, listener })
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Serves until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        axum::serve(self.listener, app::router(self.app)).with_graceful_shutdown(shutdown).await
    }
}
