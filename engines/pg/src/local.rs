//! `rcp-pg postgres start|stop|status --data-dir DIR`: a local PostgreSQL 16 + pgvector to try
//! rcp-pg with, from the pinned `pgserver` wheel (the mechanism is [`rcp_pg_local`], which the
//! tests and CI use too).
//!
//! ```sh
//! export DATABASE_URL=$(rcp-pg postgres start --data-dir ~/rcp-pg-data)
//! rcp-pg index --builtin --fetch-model
//! rcp-pg postgres stop --data-dir ~/rcp-pg-data
//! ```
//! `start` prints only the URL on stdout (progress goes to stderr); the server keeps running
//! after the command returns, listening on 127.0.0.1 only with `trust` authentication.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rcp_pg_local::{DEFAULT_PORT, State};

/// The `postgres` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum LocalCmd {
    /// Provision PostgreSQL (first use), create the cluster if DIR holds none, start it unless it
    /// runs, create the database with pgvector; print its DATABASE_URL on stdout.
    Start {
        #[command(flatten)]
        dir: DataDir,
        /// Port on 127.0.0.1 [default: the port of the last start, else 55432].
        #[arg(long)]
        port: Option<u16>,
        #[command(flatten)]
        database: Database,
    },
    /// Stop the cluster (fast shutdown: nothing committed is lost).
    Stop {
        #[command(flatten)]
        dir: DataDir,
    },
    /// Print the DATABASE_URL when the cluster runs (exit 0); say it is stopped otherwise (exit 1).
    Status {
        #[command(flatten)]
        dir: DataDir,
        #[command(flatten)]
        database: Database,
    },
}

/// The cluster's data directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct DataDir {
    /// The cluster's data directory (created on first start; reused after).
    #[arg(long, env = "RCP_PG_DATA_DIR", value_name = "DIR")]
    data_dir: PathBuf,
}

/// The database the URL names.
#[derive(Debug, Clone, Args)]
pub(crate) struct Database {
    /// The database (created with the `vector` extension when missing).
    #[arg(long, default_value = "rcp", value_name = "NAME")]
    database: String,
}

impl LocalCmd {
    /// Runs the subcommand.
    pub(crate) fn run(self) -> anyhow::Result<()> {
        match self {
            LocalCmd::Start { dir, port, database } => start(&dir, port, &database.database),
            LocalCmd::Stop { dir } => stop(&dir),
            LocalCmd::Status { dir, database } => status(&dir, &database.database),
        }
    }
}

fn say(msg: &str) {
    eprintln!("rcp-pg: {msg}");
}

fn start(dir: &DataDir, port: Option<u16>, database: &str) -> anyhow::Result<()> {
    let started = rcp_pg_local::start(&dir.data_dir, port, database, &mut say)?;
    let verb = if started.was_running { "already running" } else { "running" };
    say(&format!(
        "PostgreSQL {verb} on 127.0.0.1:{} (data {}); stop it with `rcp-pg postgres stop --data-dir {}`",
        started.port,
        dir.data_dir.display(),
        dir.data_dir.display()
    ));
    println!("{}", started.url);
    Ok(())
}

fn stop(dir: &DataDir) -> anyhow::Result<()> {
    if rcp_pg_local::stop(&dir.data_dir)? {
        say(&format!("stopped the PostgreSQL of {}", dir.data_dir.display()));
    } else {
        say(&format!("no PostgreSQL runs from {}; nothing to stop", dir.data_dir.display()));
    }
    Ok(())
}

fn status(dir: &DataDir, database: &str) -> anyhow::Result<()> {
    let shown = dir.data_dir.display();
    match rcp_pg_local::status(&dir.data_dir)? {
        State::Running { pid, port } => {
            say(&format!("PostgreSQL of {shown} runs (pid {pid}) on 127.0.0.1:{port}"));
            println!("{}", rcp_pg_local::url(port, database));
            Ok(())
        }
        State::Stopped { port } => anyhow::bail!(
            "the PostgreSQL of {shown} is stopped (port {}); start it with `rcp-pg postgres start --data-dir {shown}`",
            port.unwrap_or(DEFAULT_PORT)
        ),
        State::Absent => anyhow::bail!(
            "{shown} holds no PostgreSQL cluster; create one with `rcp-pg postgres start --data-dir {shown}`"
        ),
    }
}
