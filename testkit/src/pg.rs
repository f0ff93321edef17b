//! A real PostgreSQL 16 with pgvector for tests, without Docker: a private cluster in a
//! temporary directory on a free loopback port, run by [`rcp_pg_local`] (the mechanism behind
//! `rcp-pg postgres start`: the pinned `pgserver` wheel from PyPI, or `$RCP_PG_BIN`).
//!
//! When the tests run as root, the server runs as `nobody` (PostgreSQL refuses root). A watcher
//! stops the server when the test process exits. [`PgCluster::shared`] is one server per test
//! binary; tests create their own databases.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rcp_pg_local::Cluster;

/// The pinned wheel.
pub const PGSERVER_WHEEL: &str = rcp_pg_local::PGSERVER_WHEEL;

/// Settings of a test cluster: no fsync (the data is thrown away) and room for many pools.
const TEST_SETTINGS: &[(&str, &str)] = &[("fsync", "off"), ("max_connections", "200")];

/// A running PostgreSQL cluster.
#[derive(Debug)]
pub struct PgCluster {
    cluster: Cluster,
    port: u16,
    _dir: TempDir,
}

/// A directory removed on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The PostgreSQL binaries: `$RCP_PG_BIN`, else provisioned from the pinned wheel.
pub fn binaries() -> Result<PathBuf, String> {
    rcp_pg_local::binaries(&mut |m| eprintln!("provision PostgreSQL: {m}")).map_err(|e| e.to_string())
}

/// A fresh directory under the temp dir for a cluster's data (`<base>/data`), owned by the
/// server's user.
fn new_base(bin: &Path) -> Result<(TempDir, Cluster), String> {
    let base = std::env::temp_dir().join(format!("rcp-pg-{}-{}", std::process::id(), unique()));
    let cluster = Cluster::new(bin, base.join("data"));
    cluster.prepare_dir(&base).map_err(|e| e.to_string())?;
    Ok((TempDir(base), cluster))
}

impl PgCluster {
    /// `initdb` a new cluster and start it on a free port.
    pub fn start() -> Result<Self, String> {
        let bin = binaries()?;
        let (dir, cluster) = new_base(&bin)?;
        cluster.init(false).map_err(|e| e.to_string())?;
        let mut started = Self { cluster, port: free_port()?, _dir: dir };
        started.first_start()?;
        started.watch();
        Ok(started)
    }

    /// A streaming replica of this (running) cluster, started on its own port: a
    /// `pg_basebackup -R` copy that follows the primary's WAL and serves read-only queries.
    pub fn start_replica(&self) -> Result<Self, String> {
        let bin = binaries()?;
        let (dir, cluster) = new_base(&bin)?;
        let out = cluster
            .tool("pg_basebackup")
            .arg("-D")
            .arg(cluster.data_dir())
            .args(["-R", "-X", "stream", "--checkpoint=fast", "-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("pg_basebackup: {e}"))?;
        if !out.status.success() {
            return Err(format!("pg_basebackup: {}: {}", out.status, String::from_utf8_lossy(&out.stderr)));
        }
        let mut replica = Self { cluster, port: free_port()?, _dir: dir };
        replica.first_start()?;
        replica.watch();
        Ok(replica)
    }

    /// One cluster per test binary, started on first use; `Err` says why PostgreSQL is not
    /// available (tests skip with that message).
    pub fn shared() -> Result<&'static PgCluster, String> {
        static SHARED: OnceLock<Result<PgCluster, String>> = OnceLock::new();
        SHARED.get_or_init(PgCluster::start).as_ref().map_err(Clone::clone)
    }

    /// The first start, on a port found free a moment before: another process (a test running
    /// beside this one) may take it in between, so a port found taken is replaced by a fresh
    /// free one, a few times, before the start fails.
    fn first_start(&mut self) -> Result<(), String> {
        for _ in 0..4 {
            match self.start_again() {
                Err(e) if e.contains("in use") => self.port = free_port()?,
                other => return other,
            }
        }
        self.start_again()
    }

    /// Starts the (stopped) server again on the same port and data.
    pub fn start_again(&self) -> Result<(), String> {
        self.cluster.start(self.port, TEST_SETTINGS).map_err(|e| e.to_string())
    }

    /// Stops the server (fast shutdown: sessions are disconnected, nothing committed is lost).
    pub fn stop(&self) -> Result<(), String> {
        self.cluster.stop().map(drop).map_err(|e| e.to_string())
    }

    /// Stops the server and removes its directory when this process exits, however it exits.
    fn watch(&self) {
        let data = self.cluster.data_dir();
        let base = data.parent().unwrap_or(data);
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             if [ -f '{data}/postmaster.pid' ]; then kill -INT \"$(head -n 1 '{data}/postmaster.pid')\"; fi; \
             for _ in $(seq 1 30); do [ -f '{data}/postmaster.pid' ] || break; sleep 0.5; done; rm -rf '{base}'",
            pid = std::process::id(),
            data = data.display(),
            base = base.display()
        );
        let _ = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        rcp_pg_local::url(self.port, db)
    }

    /// Runs SQL through `psql` on database `db`; returns its unaligned output.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        self.cluster.psql(self.port, db, sql).map_err(|e| e.to_string())
    }

    /// Creates a new, empty database with a unique name and returns its URL.
    pub fn create_database(&self, prefix: &str) -> Result<String, String> {
        let name = format!("{}_{}", prefix.replace(|c: char| !c.is_ascii_alphanumeric(), "_"), unique());
        self.psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(self.url(&name))
    }

    /// The server log so far (for failure messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.cluster.log_path()).unwrap_or_default()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.cluster.data_dir()
    }
}

/// A port free at the time of asking.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() as u64);
    (t << 8) ^ N.fetch_add(1, Ordering::Relaxed)
}
