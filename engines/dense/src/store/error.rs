//! Why the store could not be opened or written.

use std::io;
use std::path::{Path, PathBuf};

use crate::ann::AnnError;

/// Why the store could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The data directory holds something this engine cannot serve.
    #[error("{path}: {detail}")]
    Incompatible {
        /// The offending file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The write-ahead log is damaged beyond a torn final write.
    #[error(transparent)]
    Wal(#[from] crate::wal::WalError),
    /// The data directory is damaged in a way that serving it would lose data (for example
    /// snapshots or a log without the manifest that names them). Nothing was changed.
    #[error("{path}: {detail}")]
    Damaged {
        /// The missing or damaged file.
        path: PathBuf,
        /// What is wrong and what to do.
        detail: String,
    },
    /// Another process (a running `serve`, `index` or `repair`) holds the data directory's
    /// lock. Nothing was changed.
    #[error(
        "{path}: the data directory is in use by another rcp-dense process (a running `serve`, `index` or `repair`?): stop it first; nothing was changed"
    )]
    InUse {
        /// The data directory.
        path: PathBuf,
    },
    /// The ANN index failed.
    #[error("ANN index: {0}")]
    Ann(#[from] AnnError),
}

/// Turns an I/O error at `path` into [`StoreError::Io`].
pub(super) fn io_at(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}
