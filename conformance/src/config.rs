//! What to run, against what: the server under test ([`Target`]), the schema frames are
//! validated against ([`SchemaSource`]) and the run's settings ([`Config`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::report::Level;
use crate::schema::{BUILTIN_SCHEMA_NAME, Schemas};

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

/// The JSON Schema received frames are validated against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaSource {
    /// The RCP 1.0 schema shipped in this crate ([`Schemas::builtin`]).
    Builtin,
    /// A schema file, e.g. the specification's normative `rcp-1.0.json`.
    File(PathBuf),
}

impl SchemaSource {
    /// Reads (for a file) and compiles the schema.
    pub fn load(&self) -> Result<Schemas, String> {
        match self {
            Self::Builtin => Ok(Schemas::builtin()),
            Self::File(path) => Schemas::load(path),
        }
    }
}

impl fmt::Display for SchemaSource {
    /// [`BUILTIN_SCHEMA_NAME`], or the file's path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str(BUILTIN_SCHEMA_NAME),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl From<PathBuf> for SchemaSource {
    fn from(path: PathBuf) -> Self {
        Self::File(path)
    }
}

impl From<&Path> for SchemaSource {
    fn from(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }
}

impl From<&PathBuf> for SchemaSource {
    fn from(path: &PathBuf) -> Self {
        Self::File(path.clone())
    }
}

impl From<&str> for SchemaSource {
    fn from(path: &str) -> Self {
        Self::File(path.into())
    }
}

impl From<String> for SchemaSource {
    fn from(path: String) -> Self {
        Self::File(path.into())
    }
}

/// What to run, against what.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server under test.
    pub target: Target,
    /// The JSON Schema every received frame is validated against; `None` (the default of
    /// [`Config::new`]) enforces the JSON-RPC envelope rules only.
    pub schema: Option<SchemaSource>,
    /// Run checks up to this level only.
    pub level: Level,
    /// How long to wait for any one response.
    pub timeout: Duration,
    /// A query that matches many documents of the server's corpus; by default the suite tries a
    /// few broad queries and keeps the one with the most hits.
    pub query: Option<String>,
    /// The malformed-params sweep (§14.1): deterministic by default, with a budget.
    pub sweep: SweepOptions,
    /// How to certify the server's duties as an aggregator (§16.2, §16.3); `None` skips those
    /// checks.
    pub aggregator: Option<Aggregator>,
    /// HTTPS targets: the CA to trust beside the system's roots, the client certificate.
    pub tls: crate::HttpTls,
}

/// How the suite certifies an aggregator (§16.2, §16.3): it writes registries (§16.1's
/// `rcp.json` shape) of its own probe engines, starts the aggregator over each, and watches
/// what the probes receive and what the aggregator answers.
#[derive(Debug, Clone)]
pub struct Aggregator {
    /// The aggregator's command over stdio; an argument `{registry}` (or containing it) stands
    /// for the path of the registry the suite writes.
    pub command: Vec<String>,
    /// The program and leading arguments that run one probe engine: `rcp-conformance
    /// --probe-engine` (what the binary passes: itself).
    pub probe: Vec<String>,
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
        Self {
            target,
            schema: None,
            level: Level::L2,
            timeout: Duration::from_secs(10),
            query: None,
            sweep: SweepOptions::default(),
            aggregator: None,
            tls: crate::HttpTls::default(),
        }
    }

    /// Also certifies the federation duties of an aggregator started as `command` (its
    /// `{registry}` argument replaced by a registry of probe engines run as `probe`).
    pub fn with_aggregator(mut self, aggregator: Aggregator) -> Self {
        self.aggregator = Some(aggregator);
        self
    }

    /// Validates every frame against `schema`: a path (the schema file there) or a
    /// [`SchemaSource`].
    pub fn with_schema(mut self, schema: impl Into<SchemaSource>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Validates every frame against the RCP 1.0 schema shipped in this crate
    /// ([`SchemaSource::Builtin`]).
    pub fn with_builtin_schema(self) -> Self {
        self.with_schema(SchemaSource::Builtin)
    }

    /// Runs checks up to `level` only.
    pub fn with_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    /// Sets the malformed-params sweep's seed and budget.
    pub fn with_sweep(mut self, sweep: SweepOptions) -> Self {
        self.sweep = sweep;
        self
    }

    /// Sets the per-response timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Trusts the CA certificate(s) of this PEM file for an `https://` target, beside the
    /// system's roots.
    pub fn with_ca_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca_cert = Some(path.into());
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

/// How much the sweep may spend, counting each malformed request and the `ping` after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepBudget {
    /// At most this many requests (malformed calls and the pings after them).
    Requests(u64),
    /// At most this long, in total.
    Time(Duration),
}

impl SweepBudget {
    /// The default: enough requests for every deterministic mutation of a server advertising
    /// every capability, so CI time stays bounded even for a slow server.
    pub const DEFAULT: SweepBudget = SweepBudget::Requests(1500);
}

impl Default for SweepBudget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for SweepBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Requests(n) => write!(f, "{n}"),
            Self::Time(d) => write!(f, "{}ms", d.as_millis()),
        }
    }
}

impl std::str::FromStr for SweepBudget {
    type Err = String;

    /// `N` (requests), `Ns` (seconds) or `Nms` (milliseconds); `0` turns the sweep off.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || format!("'{s}' is not a sweep budget (N requests, Ns seconds or Nms milliseconds)");
        if let Some(ms) = t.strip_suffix("ms") {
            return ms.trim().parse().map(|n| Self::Time(Duration::from_millis(n))).map_err(|_| bad());
        }
        if let Some(secs) = t.strip_suffix('s') {
            return secs
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(|x| Self::Time(Duration::from_secs_f64(x)))
                .ok_or_else(bad);
        }
        t.parse().map(Self::Requests).map_err(|_| bad())
    }
}

/// The sweep's settings (`--seed`, `--sweep-budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepOptions {
    /// `None`: the deterministic sweep. `Some(seed)`: a deeper, randomised one (more values per
    /// forbidden type, a shuffled order), reproducible with the same seed.
    pub seed: Option<u64>,
    /// How much the whole sweep may spend.
    pub budget: SweepBudget,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_as_requests_or_time() {
        assert_eq!("600".parse(), Ok(SweepBudget::Requests(600)));
        assert_eq!("30s".parse(), Ok(SweepBudget::Time(Duration::from_secs(30))));
        assert_eq!("250ms".parse(), Ok(SweepBudget::Time(Duration::from_millis(250))));
        assert!("ten".parse::<SweepBudget>().is_err());
        assert!("-1s".parse::<SweepBudget>().is_err());
    }
}
