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
//! let config = Config::stdio("my-rcp-server", ["serve"]).with_schema("../shared/schema/rcp-1.0.json");
//! let report = run(&config).await?;
//! print!("{}", report.render_text());
//! assert!(report.certified() >= Some(Level::L1));
//! # Ok(()) }
//! ```
//!
//! With a schema, every frame received is validated against it (the root schema for frames,
//! `$defs/ResultFor` for each result given the method that was asked); a violation fails the
//! check that received the frame. Without one, the JSON-RPC envelope rules are still enforced.

mod checks;
mod conn;
mod report;
mod schema;
mod transport;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use report::{CheckResult, Counts, Level, Report, Status, Strength};
pub use schema::{Schemas, envelope_errors};

/// Where the server under test is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command to spawn; the suite speaks NDJSON over its stdin/stdout (§5.1). A fresh process
    /// is spawned for each lifecycle check that needs a clean session.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// An HTTP endpoint: requests are `POST <base>/<method>`, batches go to `<base>` (§5.2).
    Http {
        /// The base URL, e.g. `http://127.0.0.1:8080/rcp`.
        base: String,
        /// Extra headers sent with every request (e.g. `Authorization`).
        headers: Vec<(String, String)>,
    },
}

/// What to run, against what.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server under test.
    pub target: Target,
    /// The normative JSON Schema; when set, every received frame is validated against it.
    pub schema: Option<PathBuf>,
    /// Run checks up to this level only.
    pub level: Level,
    /// How long to wait for any one response.
    pub timeout: Duration,
    /// A query that matches many documents of the server's corpus; by default the suite tries a
    /// few broad queries and keeps the one with the most hits.
    pub query: Option<String>,
}

impl Config {
    /// Tests the server started by `program args...` over stdio.
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let target = Target::Stdio { program: program.into(), args: args.into_iter().map(Into::into).collect() };
        Self::new(target)
    }

    /// Tests the HTTP endpoint at `base` (e.g. `http://127.0.0.1:8080/rcp`).
    pub fn http(base: impl Into<String>) -> Self {
        Self::new(Target::Http { base: base.into(), headers: Vec::new() })
    }

    /// A configuration with the defaults: all levels, 10 s per response, no schema.
    pub fn new(target: Target) -> Self {
        Self { target, schema: None, level: Level::L2, timeout: Duration::from_secs(10), query: None }
    }

    /// Validates every frame against the schema at `path`.
    pub fn with_schema(mut self, path: impl Into<PathBuf>) -> Self {
        self.schema = Some(path.into());
        self
    }

    /// Runs checks up to `level` only.
    pub fn with_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    /// Sets the per-response timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Adds an HTTP header sent with every request (HTTP targets only).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Target::Http { headers, .. } = &mut self.target {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

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
        Some(p) => Some(Arc::new(Schemas::load(p).map_err(Error::Schema)?)),
        None => None,
    };
    let env = conn::Env {
        target: config.target.clone(),
        timeout: config.timeout,
        schemas,
        sink: Arc::new(Mutex::new(Vec::new())),
    };
    // Fail fast when the server cannot even be started (and stop that process before any other).
    conn::Conn::open(&env).await.map_err(Error::Target)?.close().await;
    let transport = match config.target {
        Target::Stdio { .. } => "stdio",
        Target::Http { .. } => "http",
    };
    let mut cx = checks::Ctx::new(env, config.level, config.query.clone());
    checks::run_all(&mut cx).await;
    Ok(Report { checks: cx.results, level_limit: config.level, transport, server: cx.server, declared: cx.declared })
}
