//! A PostgreSQL cluster in a data directory: `initdb`, start on a loopback port, status, stop,
//! and SQL through `psql`.
//!
//! The cluster listens on 127.0.0.1 only, with `trust` authentication for the `postgres` role
//! and no Unix socket. Its port and server settings live in `rcp-local.conf` in the data
//! directory, included by `postgresql.conf` and rewritten at every start, so starting again
//! without a port reuses the last one. When the caller is root, every server tool runs as
//! `nobody` through `runuser` (PostgreSQL refuses to run as root).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{LocalError, io_err};
use rcp_wheel::last_lines;

/// The settings file of the data directory, rewritten at every start.
const SETTINGS: &str = "rcp-local.conf";

/// The user the server runs as when it cannot run as the caller: `nobody` when the caller is
/// root, else `None`.
pub fn server_user() -> Option<&'static str> {
    is_root().then_some("nobody")
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A cluster's data directory and the binaries that run it.
#[derive(Debug, Clone)]
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<&'static str>,
}

/// What [`Cluster::status`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The server runs (its postmaster's pid and port).
    Running {
        /// The postmaster's process id.
        pid: u32,
        /// The port it listens on.
        port: u16,
    },
    /// The data directory holds a cluster that is not running (its last port, if recorded).
    Stopped {
        /// The port of the last start.
        port: Option<u16>,
    },
    /// The data directory holds no cluster.
    Absent,
}

impl Cluster {
    /// The cluster in `data`, run with the tools in `bin` (see [`crate::binaries`]).
    pub fn new(bin: impl Into<PathBuf>, data: impl Into<PathBuf>) -> Self {
        Self { bin: bin.into(), data: data.into(), run_as: server_user() }
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// A command running PostgreSQL tool `tool` as the server's user.
    pub fn tool(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => Command::new(path),
        }
    }

    /// Creates `dir` (and its parents) for the server's user: owned by it when that is another
    /// user, who must be able to reach and write it.
    pub fn prepare_dir(&self, dir: &Path) -> Result<(), LocalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let Some(user) = self.run_as else { return Ok(()) };
        run(Command::new("chown").args(["-R", user]).arg(dir), "chown")?;
        let reachable = Command::new("runuser")
            .args(["-u", user, "--", "test", "-w"])
            .arg(dir)
            .args(["-a", "-x"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if reachable { Ok(()) } else { Err(LocalError::Unreachable { user: user.to_owned(), dir: dir.to_path_buf() }) }
    }

    /// Whether the data directory holds a cluster (`PG_VERSION`).
    pub fn exists(&self) -> bool {
        self.data.join("PG_VERSION").is_file()
    }

    /// `initdb` a new cluster in the (missing or empty) data directory. `durable: false` skips
    /// initdb's final fsync (tests).
    pub fn init(&self, durable: bool) -> Result<(), LocalError> {
        self.check_empty()?;
        self.prepare_dir(&self.data)?;
        let mut initdb = self.tool("initdb");
        initdb.arg("-D").arg(&self.data).args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"]);
        if !durable {
            initdb.arg("--no-sync");
        }
        run(&mut initdb, "initdb")?;
        let conf = self.data.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf).map_err(io_err(&conf))?;
        text.push_str(&format!(
            "\n# Port and listening address of this local cluster:\ninclude_if_exists = '{SETTINGS}'\n"
        ));
        fs::write(&conf, text).map_err(io_err(&conf))
    }

    /// Refuses a data directory that holds files but no cluster (a cluster is only made in a
    /// missing or empty directory).
    pub fn check_empty(&self) -> Result<(), LocalError> {
        if self.data.exists() && fs::read_dir(&self.data).map_err(io_err(&self.data))?.next().is_some() {
            return Err(LocalError::NotACluster(self.data.clone()));
        }
        Ok(())
    }

    /// Refuses a port something listens on.
    pub fn check_port(port: u16) -> Result<(), LocalError> {
        TcpListener::bind(("127.0.0.1", port)).map(drop).map_err(|_| LocalError::PortInUse { port })
    }

    /// The major version of the binaries (`16`).
    pub fn binaries_version(&self) -> Result<String, LocalError> {
        let out = run(Command::new(self.bin.join("pg_ctl")).arg("--version"), "pg_ctl --version")?;
        // `pg_ctl (PostgreSQL) 16.2`
        let version = out.split_whitespace().last().unwrap_or_default();
        Ok(version.split('.').next().unwrap_or_default().to_owned())
    }

    /// Refuses a data directory made by another major version than the binaries'.
    pub fn check_version(&self) -> Result<(), LocalError> {
        let path = self.data.join("PG_VERSION");
        let found = fs::read_to_string(&path).map_err(io_err(&path))?.trim().to_owned();
        let ours = self.binaries_version()?;
        if found == ours { Ok(()) } else { Err(LocalError::VersionMismatch { dir: self.data.clone(), found, ours }) }
    }

    /// Whether the server runs, and on which port.
    pub fn status(&self) -> State {
        if !self.exists() {
            return State::Absent;
        }
        let running =
            self.tool("pg_ctl").arg("-D").arg(&self.data).arg("status").output().is_ok_and(|o| o.status.success());
        let pid_file = fs::read_to_string(self.data.join("postmaster.pid")).unwrap_or_default();
        let mut lines = pid_file.lines();
        let pid = lines.next().and_then(|l| l.trim().parse().ok());
        let port = lines.nth(2).and_then(|l| l.trim().parse().ok());
        match (running, pid, port) {
            (true, Some(pid), Some(port)) => State::Running { pid, port },
            _ => State::Stopped { port: self.recorded_port() },
        }
    }

    /// The port of the last start, from the settings file.
    pub fn recorded_port(&self) -> Option<u16> {
        let text = fs::read_to_string(self.data.join(SETTINGS)).ok()?;
        text.lines().find_map(|l| l.trim().strip_prefix("port = ")).and_then(|p| p.trim().parse().ok())
    }

    /// Starts the (stopped) server on 127.0.0.1:`port`, with further `settings`
    /// (`("fsync", "off")`), and waits until it accepts connections.
    pub fn start(&self, port: u16, settings: &[(&str, &str)]) -> Result<(), LocalError> {
        Self::check_port(port)?;
        let mut text = format!(
            "# Written at every start by rcp-pg's local cluster; edit postgresql.conf instead.\n\
             port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
        );
        for (name, value) in settings {
            text.push_str(&format!("{name} = '{value}'\n"));
        }
        let path = self.data.join(SETTINGS);
        fs::write(&path, text).map_err(io_err(&path))?;
        let log = self.log_path();
        let mut pg_ctl = self.tool("pg_ctl");
        pg_ctl.arg("-D").arg(&self.data).args(["-w", "-t", "60", "-l"]).arg(&log).arg("start");
        run(&mut pg_ctl, "pg_ctl start").map(drop).map_err(|e| match e {
            LocalError::Tool { tool, status, detail } => {
                let log = fs::read_to_string(&log).unwrap_or_default();
                LocalError::Tool { tool, status, detail: format!("{detail}; server log: {}", last_lines(&log, 6)) }
            }
            other => other,
        })
    }

    /// Stops the server (fast shutdown: sessions are disconnected, nothing committed is lost);
    /// `false` when it was not running.
    pub fn stop(&self) -> Result<bool, LocalError> {
        if !matches!(self.status(), State::Running { .. }) {
            return Ok(false);
        }
        run(self.tool("pg_ctl").arg("-D").arg(&self.data).args(["-w", "-m", "fast", "stop"]), "pg_ctl stop")?;
        Ok(true)
    }

    /// The server log file.
    pub fn log_path(&self) -> PathBuf {
        self.data.join("server.log")
    }

    /// Runs SQL through `psql` on database `db` of the server on `port`; returns its unaligned,
    /// tuples-only output.
    pub fn psql(&self, port: u16, db: &str, sql: &str) -> Result<String, LocalError> {
        run(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres", "-p"])
                .arg(port.to_string())
                .args(["-d", db, "-c", sql]),
            "psql",
        )
    }

    /// Creates database `name` when missing, with the `vector` extension in it.
    pub fn ensure_database(&self, port: u16, name: &str) -> Result<(), LocalError> {
        check_identifier(name)?;
        let exists = self.psql(port, "postgres", &format!("SELECT 1 FROM pg_database WHERE datname = '{name}'"))?;
        if exists.trim().is_empty() {
            self.psql(port, "postgres", &format!("CREATE DATABASE {name}"))?;
        }
        self.psql(port, name, "CREATE EXTENSION IF NOT EXISTS vector").map(drop)
    }
}

/// The URL of database `db` on a local cluster's `port`.
pub fn url(port: u16, db: &str) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/{db}")
}

/// A plain SQL identifier: ASCII letters, digits and `_`, not starting with a digit.
pub fn check_identifier(name: &str) -> Result<(), LocalError> {
    let ok = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 63;
    if ok { Ok(()) } else { Err(LocalError::BadName(name.to_owned())) }
}

/// Runs `cmd` with no stdin; its stdout on success, else [`LocalError::Tool`] with its stderr.
fn run(cmd: &mut Command, tool: &str) -> Result<String, LocalError> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| LocalError::Tool {
        tool: tool.to_owned(),
        status: format!("cannot run {:?}", cmd.get_program()),
        detail: format!(": {e}"),
    })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = last_lines(&String::from_utf8_lossy(&out.stderr), 6);
    Err(LocalError::Tool {
        tool: tool.to_owned(),
        status: out.status.to_string(),
        detail: if stderr.is_empty() { String::new() } else { format!(": {stderr}") },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_plain_identifiers() {
        for ok in ["rcp", "_x", "db_2"] {
            assert!(check_identifier(ok).is_ok(), "{ok}");
        }
        for bad in ["", "2db", "a-b", "x; DROP DATABASE postgres", "é"] {
            let err = check_identifier(bad).expect_err(bad).to_string();
            assert!(err.contains("letters, digits and _"), "{err}");
        }
    }

    #[test]
    fn a_non_empty_directory_without_a_cluster_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("notes.txt"), b"mine").expect("write");
        let err = Cluster::new("/nonexistent", dir.path()).init(false).expect_err("not empty").to_string();
        assert!(err.contains("not empty") && err.contains("new or empty directory"), "{err}");
        assert_eq!(Cluster::new("/nonexistent", dir.path()).status(), State::Absent);
    }

    #[test]
    fn the_recorded_port_is_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(SETTINGS), "# x\nport = 55433\nlisten_addresses = '127.0.0.1'\n").expect("write");
        assert_eq!(Cluster::new("/nonexistent", dir.path()).recorded_port(), Some(55433));
    }
}
