//! A real PostgreSQL 16 with pgvector for tests, without Docker: the binaries come from the
//! `pgserver` wheel on PyPI (PostgreSQL + pgvector, relocatable), `initdb` makes a cluster in
//! a temporary directory and `pg_ctl` runs it on a free loopback port.
//!
//! Binaries: `$RCP_PG_BIN` (a directory with `initdb`, `pg_ctl`, `psql`), else a copy
//! provisioned once per machine under the temp directory with `pip download` (PyPI is one of
//! the reachable registries). When the tests run as root, the server runs as `nobody`
//! (PostgreSQL refuses root). A watcher stops the server when the test process exits.
//! [`PgCluster::shared`] is one server per test binary; tests create their own databases.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The pinned wheel.
pub const PGSERVER_WHEEL: &str = "pgserver==0.1.4";

/// A running PostgreSQL cluster.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<String>,
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

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{cmd:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr)))
    }
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).is_ok_and(|u| u.trim() == "0")
}

/// The PostgreSQL binaries: `$RCP_PG_BIN`, else provisioned from the pinned wheel.
pub fn binaries() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("RCP_PG_BIN").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.join("pg_ctl").is_file() {
            Ok(dir)
        } else {
            Err(format!("RCP_PG_BIN={} has no pg_ctl", dir.display()))
        };
    }
    let root = std::env::temp_dir().join(format!("rcp-{}", PGSERVER_WHEEL.replace("==", "-")));
    let bin = root.join("pgserver/pginstall/bin");
    if bin.join("pg_ctl").is_file() && root.join(".complete").is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let lock = fs::File::create(root.join(".lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| e.to_string())?;
    if !root.join(".complete").is_file() {
        let wheels = root.join("wheel");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(&python)
            .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
            .arg(&wheels)
            .arg(PGSERVER_WHEEL))
        .map_err(|e| format!("cannot provision PostgreSQL ({PGSERVER_WHEEL}): {e}"))?;
        let wheel = fs::read_dir(&wheels)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or("pip download produced no wheel")?;
        run(Command::new(&python).args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&root))?;
        // Zip archives do not keep the executable bit; the whole tree must be readable by
        // the server's user.
        run(Command::new("chmod").args(["-R", "a+rX"]).arg(&root))?;
        run(Command::new("sh").arg("-c").arg("chmod a+x \"$0\"/*").arg(&bin))?;
        fs::write(root.join(".complete"), b"").map_err(|e| e.to_string())?;
    }
    Ok(bin)
}

impl PgCluster {
    /// `initdb` a new cluster and start it on a free port.
    pub fn start() -> Result<Self, String> {
        let bin = binaries()?;
        let base = std::env::temp_dir().join(format!("rcp-pg-{}-{}", std::process::id(), unique()));
        let data = base.join("data");
        fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let run_as = is_root().then(|| "nobody".to_owned());
        if let Some(user) = &run_as {
            run(Command::new("chown").args(["-R", user]).arg(&base))?;
        }
        let cluster = Self { bin, data, port: free_port()?, run_as, _dir: TempDir(base) };
        cluster
            .as_user("initdb")
            .args(["-D"])
            .arg(&cluster.data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
            .output()
            .map_err(|e| e.to_string())
            .and_then(
                |o| if o.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&o.stderr).into_owned()) },
            )
            .map_err(|e| format!("initdb: {e}"))?;
        cluster.start_again()?;
        cluster.watch();
        Ok(cluster)
    }

    /// A streaming replica of this (running) cluster, started on its own port: a
    /// `pg_basebackup -R` copy that follows the primary's WAL and serves read-only queries.
    pub fn start_replica(&self) -> Result<Self, String> {
        let base = std::env::temp_dir().join(format!("rcp-pg-{}-{}", std::process::id(), unique()));
        fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        if let Some(user) = &self.run_as {
            run(Command::new("chown").args(["-R", user]).arg(&base))?;
        }
        let replica = Self {
            bin: self.bin.clone(),
            data: base.join("data"),
            port: free_port()?,
            run_as: self.run_as.clone(),
            _dir: TempDir(base),
        };
        run(replica
            .as_user("pg_basebackup")
            .arg("-D")
            .arg(&replica.data)
            .args(["-R", "-X", "stream", "--checkpoint=fast", "-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string()))
        .map_err(|e| format!("pg_basebackup: {e}"))?;
        replica.start_again()?;
        replica.watch();
        Ok(replica)
    }

    /// One cluster per test binary, started on first use; `Err` says why PostgreSQL is not
    /// available (tests skip with that message).
    pub fn shared() -> Result<&'static PgCluster, String> {
        static SHARED: OnceLock<Result<PgCluster, String>> = OnceLock::new();
        SHARED.get_or_init(PgCluster::start).as_ref().map_err(Clone::clone)
    }

    fn as_user(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => Command::new(path),
        }
    }

    /// Starts the (stopped) server again on the same port and data.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.data.display()
        );
        run(self
            .as_user("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", "60", "-o", &options, "-l"])
            .arg(self.data.join("server.log"))
            .arg("start"))
        .map(drop)
        .map_err(|e| format!("{e}\n{}", fs::read_to_string(self.data.join("server.log")).unwrap_or_default()))
    }

    /// Stops the server (fast shutdown: sessions are disconnected, nothing committed is lost).
    pub fn stop(&self) -> Result<(), String> {
        run(self.as_user("pg_ctl").arg("-D").arg(&self.data).args(["-w", "-m", "fast", "stop"])).map(drop)
    }

    /// Stops the server and removes its directory when this process exits, however it exits.
    fn watch(&self) {
        let base = self.data.parent().unwrap_or(&self.data);
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             if [ -f '{data}/postmaster.pid' ]; then kill -INT \"$(head -n 1 '{data}/postmaster.pid')\"; fi; \
             for _ in $(seq 1 30); do [ -f '{data}/postmaster.pid' ] || break; sleep 0.5; done; rm -rf '{base}'",
            pid = std::process::id(),
            data = self.data.display(),
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
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL through `psql` on database `db`; returns its unaligned output.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        run(Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .args(["-d", db, "-c", sql]))
    }

    /// Creates a new, empty database with a unique name and returns its URL.
    pub fn create_database(&self, prefix: &str) -> Result<String, String> {
        let name = format!("{}_{}", prefix.replace(|c: char| !c.is_ascii_alphanumeric(), "_"), unique());
        self.psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(self.url(&name))
    }

    /// The server log so far (for failure messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.data.join("server.log")).unwrap_or_default()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() as u64);
    (t << 8) ^ N.fetch_add(1, Ordering::Relaxed)
}
