//! What to run, against what: the server under test ([`Target`]) and the run's settings
//! ([`Config`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::report::Level;

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
