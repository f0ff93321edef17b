//! Engine failures, mapped to protocol errors (§12) at the edge.

use std::path::{Path, PathBuf};

use rcp_wire::{ErrorCode, RcpError};
use tantivy::directory::error::OpenDirectoryError;

/// Everything that can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// tantivy failed (I/O, corrupted index, ...).
    #[error("index error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// A file or directory of the data directory could not be read or written.
    #[error("configuration: {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The tantivy index directory could not be opened.
    #[error("configuration: {0}")]
    Directory(#[from] OpenDirectoryError),
    /// `rcp-bm25.json` could not be parsed or written.
    #[error("configuration: {path}: {source}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A segment's document store could not be opened (repair).
    #[error("configuration: segment {segment}: {source}")]
    Segment {
        /// The segment id.
        segment: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The data directory's configuration is unreadable or inconsistent.
    #[error("configuration: {0}")]
    Config(String),
    /// The data directory does not exist or holds no index (and creating one was not asked).
    #[error("{0}")]
    NoIndex(String),
    /// The data directory is damaged: a file is missing, unreadable or fails its checksum.
    #[error("{0}")]
    Integrity(String),
    /// A params value is unusable; `field` is the params path (§12.1).
    #[error("{field}: {detail}")]
    InvalidParams {
        /// The offending params path.
        field: String,
        /// What is wrong.
        detail: String,
    },
    /// A pinned `indexVersion` is not (or no longer) held (§7.7.1).
    #[error("{0}")]
    SnapshotGone(String),
    /// A `cursor` names a snapshot that is no longer held (§10, §12: expired cursor).
    #[error("{0}")]
    CursorExpired(String),
    /// The write queue is full: too many writes wait for the writer (§12 `-32011`).
    #[error("{queued} writes are already waiting for the writer; retry after {retry_after_ms} ms")]
    Overloaded {
        /// Writes waiting.
        queued: usize,
        /// Suggested back-off.
        retry_after_ms: u64,
    },
    /// The request was cancelled or its deadline passed.
    #[error("cancelled")]
    Cancelled,
    /// An `index` run left lines out, or `--strict` stopped it (the ingestion policy).
    #[error(transparent)]
    NotIndexed(#[from] rcp_corpus::policy::NotIndexed),
    /// A blocking task failed to complete (panic or runtime shutdown).
    #[error("internal: {0}")]
    Internal(String),
}

impl EngineError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { path: path.to_owned(), source }
    }

    /// An invalid-params error at `field`.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::InvalidParams { field: field.into(), detail: detail.into() }
    }
}

impl From<EngineError> for RcpError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidParams { field, detail } => RcpError::invalid_params(field, detail),
            EngineError::SnapshotGone(msg) => RcpError::new(ErrorCode::BACKEND_UNAVAILABLE, msg),
            EngineError::CursorExpired(msg) => RcpError::cursor_expired(msg),
            EngineError::Cancelled => RcpError::cancelled(Some("stopped early")),
            EngineError::Overloaded { retry_after_ms, .. } => {
                let detail = e.to_string();
                RcpError::rate_limited(retry_after_ms).with_detail(detail)
            }
            other => RcpError::internal(other.to_string()),
        }
    }
}
