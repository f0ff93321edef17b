//! `rcp-conformance`: the certification suite for RCP servers (§14.5).
//!
//! It drives a server — a command spoken to over NDJSON stdio (§5.1), or an HTTP endpoint
//! (§5.2) — through every MUST of the specification as named checks tagged with the conformance
//! level they belong to (L0 base, L1 retrieval, L2 SOTA), skips the checks for capabilities the
//! server does not advertise, and reports the highest level it actually proved next to the level
//! it declared in `_meta.conformance`. A declaration above the proven level is an overclaim and
//! fails certification even when no individual check failed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rcp_conformance::Error> {
//! use rcp_conformance::{Config, Level, run};
//!
//! let config = Config::stdio("my-rcp-server", ["serve"]).with_builtin_schema();
//! let report = run(&config).await?;
//! print!("{}", report.render_text());
//! assert!(report.certified() >= Some(Level::L1));
//! # Ok(()) }
//! ```
//!
//! Beside the named checks, a malformed-params sweep (§14.1) derived from the params schema of
//! `initialize` and of every advertised method sends one forbidden value per request on an
//! otherwise valid call and requires `-32602`; each path a server coerces, ignores or dies on is
//! one FAIL named `sweep.<method>.<path>` ([`SweepOptions`] sets its seed and budget).
//!
//! With a schema, every frame received is validated against it (the root schema for frames,
//! `$defs/ResultFor` for each result given the method that was asked); a violation fails the
//! check that received the frame. The schema is either the RCP 1.0 schema shipped in this crate
//! ([`Config::with_builtin_schema`], what the `rcp-conformance` binary uses unless given
//! `--schema`) or a file such as the specification's normative `rcp-1.0.json`
//! ([`Config::with_schema`]). Without one, the JSON-RPC envelope rules are still enforced.

#![forbid(unsafe_code)]

mod attribution;
mod checks;
mod config;
mod conn;
mod record;
mod report;
mod roster;
mod schema;
mod session;
mod sweep;
mod tls;
mod transport;
mod verdict;

use std::sync::{Arc, Mutex};

pub use checks::federation::probe::{PROBE_FLAG, serve as serve_probe_engine};
pub use config::{Aggregator, Config, SchemaSource, SweepBudget, SweepOptions, Target};
pub use report::{Basis, CheckResult, Counts, JSON_SCHEMA_VERSION, Keyword, Level, Report, Status, Strength};
pub use roster::{SPEC_METHODS, SpecMethod, spec_method_names};
pub use schema::{BUILTIN_SCHEMA, BUILTIN_SCHEMA_NAME, Schemas, envelope_errors};
pub use tls::HttpTls;

/// Why a run could not produce a report at all.
#[derive(Debug)]
pub enum Error {
    /// The schema could not be read or compiled.
    Schema(String),
    /// The server could not be reached at all (spawn failed, HTTP client could not be built).
    Target(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Schema(e) => write!(f, "schema: {e}"),
            Error::Target(e) => write!(f, "server: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Runs the suite and returns the report. Needs a Tokio runtime (the HTTP client and the child
/// processes are asynchronous).
pub async fn run(config: &Config) -> Result<Report, Error> {
    let schemas = match &config.schema {
        Some(source) => Some(Arc::new(source.load().map_err(Error::Schema)?)),
        None => None,
    };
    let env = conn::Env {
        http: tls::HttpSetup::new(&config.tls).map_err(Error::Target)?,
        target: config.target.clone(),
        timeout: config.timeout,
        schemas,
        sink: Arc::new(Mutex::new(Vec::new())),
        throttles: Arc::default(),
    };
    // Fail fast when the server cannot even be started (and stop that process before any other).
    conn::Conn::open(&env).await.map_err(Error::Target)?.close().await;
    let transport = match config.target {
        Target::Stdio { .. } => "stdio",
        Target::Http { .. } => "http",
    };
    let mut cx = record::Ctx::new(env, config.level, config.query.clone(), config.sweep);
    checks::run_all(&mut cx).await;
    checks::run_federation(&mut cx, config.aggregator.as_ref()).await;
    let (server, declared) = (cx.server.take(), cx.declared.take());
    Ok(Report {
        checks: attribution::attribute(cx.into_entries()),
        level_limit: config.level,
        transport,
        server,
        declared,
    })
}
