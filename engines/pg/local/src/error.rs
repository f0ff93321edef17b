//! Why a local PostgreSQL could not be provisioned, started or stopped; every message says what
//! to do next.

use std::io;
use std::path::PathBuf;

/// A failure of provisioning or of running the local cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The pinned wheel has no build for this machine.
    #[error(
        "pgserver {version} has no wheel for {os}/{arch}; install PostgreSQL 13+ with pgvector and \
         set RCP_PG_BIN to its bin directory, or give rcp-pg the --database-url of an existing server"
    )]
    UnsupportedPlatform {
        /// The pinned pgserver version.
        version: &'static str,
        /// `std::env::consts::OS`.
        os: &'static str,
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },
    /// `RCP_PG_BIN` names a directory without PostgreSQL's tools.
    #[error(
        "RCP_PG_BIN={} has no pg_ctl; point it at the bin directory of a PostgreSQL installation, \
         or unset it to use the pinned pgserver wheel", .0.display()
    )]
    BadBinDir(PathBuf),
    /// `pip download` could not be run or failed.
    #[error(
        "pip download {wheel} failed: {detail}; provisioning PostgreSQL needs python3 with pip and \
         access to PyPI (or the wheel in pip's --find-links), or set RCP_PG_BIN to an installed \
         PostgreSQL's bin directory"
    )]
    Pip {
        /// `package==version`.
        wheel: String,
        /// What happened.
        detail: String,
    },
    /// A downloaded or cached wheel does not have the pinned SHA-256.
    #[error("{}: sha256 {actual} is not the pinned {expected}; delete the file and run again", file.display())]
    HashMismatch {
        /// The wheel file.
        file: PathBuf,
        /// The pinned hash.
        expected: &'static str,
        /// The hash found.
        actual: String,
    },
    /// A file system operation failed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error (in the message, so not also a `source`).
        cause: io::Error,
    },
    /// The wheel is not a readable archive.
    #[error("{}: {detail}; delete the file and run again", wheel.display())]
    Wheel {
        /// The wheel file.
        wheel: PathBuf,
        /// The archive error.
        detail: String,
    },
    /// The data directory holds files but no cluster.
    #[error(
        "{} is not empty and holds no PostgreSQL cluster (no PG_VERSION); name a new or empty directory",
        .0.display()
    )]
    NotACluster(PathBuf),
    /// The data directory was made by another major version of PostgreSQL.
    #[error(
        "{} holds a PostgreSQL {found} cluster, but these binaries are PostgreSQL {ours}; use another \
         data directory, or PostgreSQL {found}'s binaries through RCP_PG_BIN (pg_upgrade converts a \
         cluster)", dir.display()
    )]
    VersionMismatch {
        /// The data directory.
        dir: PathBuf,
        /// Its `PG_VERSION`.
        found: String,
        /// The binaries' major version.
        ours: String,
    },
    /// Something else listens on the port.
    #[error(
        "port {port} on 127.0.0.1 is in use (another PostgreSQL?); pass --port with a free port \
         (the data directory remembers it)"
    )]
    PortInUse {
        /// The port.
        port: u16,
    },
    /// The cluster runs on another port than the one asked for.
    #[error("the cluster in {} is already running on port {running}; stop it first to move it to port {asked}", dir.display())]
    RunningElsewhere {
        /// The data directory.
        dir: PathBuf,
        /// The port it runs on.
        running: u16,
        /// The port asked for.
        asked: u16,
    },
    /// Running as root, the server's user cannot use the data directory.
    #[error(
        "PostgreSQL refuses to run as root, so the server runs as `{user}`, who cannot write {}; \
         choose a directory {user} can reach (e.g. under /tmp), or run as an ordinary user", dir.display()
    )]
    Unreachable {
        /// The unprivileged user.
        user: String,
        /// The data directory.
        dir: PathBuf,
    },
    /// A PostgreSQL tool failed.
    #[error("{tool} failed ({status}){detail}")]
    Tool {
        /// The tool and its main argument.
        tool: String,
        /// Its exit status, or why it could not run.
        status: String,
        /// Its stderr and, for the server, the end of its log (`: ...`, or empty).
        detail: String,
    },
    /// A database name that is not a plain SQL identifier.
    #[error("invalid database name {0:?}: use ASCII letters, digits and _ (not starting with a digit)")]
    BadName(String),
}

/// Maps an I/O error on `path` to [`LocalError::Io`].
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(io::Error) -> LocalError + '_ {
    move |cause| LocalError::Io { path: path.to_path_buf(), cause }
}

impl From<rcp_wheel::WheelError> for LocalError {
    /// Keeps this crate's variants, whose messages add what to do instead (`RCP_PG_BIN`).
    fn from(e: rcp_wheel::WheelError) -> Self {
        use rcp_wheel::WheelError as W;
        match e {
            W::Pip { wheel, detail } => LocalError::Pip { wheel, detail },
            W::HashMismatch { file, expected, actual, .. } => LocalError::HashMismatch { file, expected, actual },
            W::Io { path, cause } => LocalError::Io { path, cause },
        }
    }
}
