//! A local PostgreSQL 16 with pgvector for `rcp-pg`, without Docker or a system package: the
//! one mechanism behind `rcp-pg postgres start|stop|status`, the tests' clusters
//! (`rcp_testkit::pg`) and CI.
//!
//! - [`binaries`]: PostgreSQL's tools from the pinned `pgserver` wheel on PyPI (downloaded with
//!   `pip download`, checked against its SHA-256, unpacked once), or `$RCP_PG_BIN`;
//! - [`Cluster`]: a data directory: `initdb`, start on a loopback port, status, stop, `psql`;
//! - [`start`], [`stop`]: what the command does: provision, create the cluster on first use,
//!   start it, create the database with the `vector` extension, and return its URL.
//!
//! ```no_run
//! let dir = std::path::Path::new("/tmp/rcp-pg-data");
//! let started = rcp_pg_local::start(dir, None, "rcp", &mut |m| eprintln!("{m}"))?;
//! println!("{}", started.url); // postgres://postgres@127.0.0.1:55432/rcp
//! rcp_pg_local::stop(dir)?;
//! # Ok::<(), rcp_pg_local::LocalError>(())
//! ```

#![forbid(unsafe_code)]

pub mod cluster;
mod error;
pub mod install;

use std::path::Path;

pub use cluster::{Cluster, State, server_user, url};
pub use error::LocalError;
pub use install::{PGSERVER_WHEEL, binaries};

/// The port of a new cluster when none is given.
pub const DEFAULT_PORT: u16 = 55432;

/// What [`start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// `postgres://postgres@127.0.0.1:PORT/DB`.
    pub url: String,
    /// The port.
    pub port: u16,
    /// `initdb` made the cluster in this call.
    pub created: bool,
    /// The server was already running (nothing was started).
    pub was_running: bool,
}

/// Provisions the binaries, creates a cluster in `data_dir` when it holds none, starts it on
/// `port` (default: the port of its last start, else [`DEFAULT_PORT`]) unless it runs already,
/// and creates `database` with the `vector` extension. `progress` hears each step.
pub fn start(
    data_dir: &Path,
    port: Option<u16>,
    database: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Started, LocalError> {
    cluster::check_identifier(database)?;
    let cluster = Cluster::new(binaries(progress)?, data_dir);
    let created = !cluster.exists();
    if created {
        cluster.check_empty()?;
        Cluster::check_port(port.unwrap_or(DEFAULT_PORT))?;
        progress(&format!("initdb   {} (PostgreSQL {})", data_dir.display(), cluster.binaries_version()?));
        cluster.init(true)?;
    } else {
        cluster.check_version()?;
    }
    let mut start_on = |port: Option<u16>| -> Result<(u16, bool), LocalError> {
        let port = port.unwrap_or(DEFAULT_PORT);
        progress(&format!("start    PostgreSQL on 127.0.0.1:{port} (log: {})", cluster.log_path().display()));
        cluster.start(port, &[])?;
        Ok((port, false))
    };
    let (port, was_running) = match cluster.status() {
        State::Running { port: running, .. } => match port {
            Some(asked) if asked != running => {
                return Err(LocalError::RunningElsewhere { dir: data_dir.to_path_buf(), running, asked });
            }
            _ => (running, true),
        },
        State::Stopped { port: last } => start_on(port.or(last))?,
        State::Absent => start_on(port)?,
    };
    cluster.ensure_database(port, database)?;
    Ok(Started { url: url(port, database), port, created, was_running })
}

/// Stops the cluster in `data_dir`; `false` when it was not running (or there is none).
pub fn stop(data_dir: &Path) -> Result<bool, LocalError> {
    if !data_dir.join("PG_VERSION").is_file() {
        return Ok(false);
    }
    Cluster::new(binaries(&mut |_| {})?, data_dir).stop()
}

/// The state of the cluster in `data_dir` (nothing is provisioned for a directory without one).
pub fn status(data_dir: &Path) -> Result<State, LocalError> {
    if !data_dir.join("PG_VERSION").is_file() {
        return Ok(State::Absent);
    }
    Ok(Cluster::new(binaries(&mut |_| {})?, data_dir).status())
}
