//! Why a wheel could not be fetched; every message names the wheel and what to do next.

use std::io;
use std::path::PathBuf;

/// A failure of [`crate::download`] or [`crate::verify`].
/// Its users map it onto their own errors variant by variant, so it is exhaustive.
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    /// `pip download` could not be run, failed, or left no wheel of the pinned version.
    #[error(
        "pip download {wheel} failed: {detail}; this needs python3 with pip and access to PyPI (or \
         the wheel in pip's --find-links), or RCP_PIP naming a pip command that has them"
    )]
    Pip {
        /// `package==version`.
        wheel: String,
        /// What happened: the command and its exit status with the end of its stderr, or why it
        /// could not run.
        detail: String,
    },
    /// A wheel file does not have the pinned SHA-256.
    #[error("{}: sha256 {actual} is not the pinned {expected} of {wheel}; delete the file and run again", file.display())]
    HashMismatch {
        /// `package==version`.
        wheel: String,
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
}

/// Maps an I/O error on `path` to [`WheelError::Io`].
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(io::Error) -> WheelError + '_ {
    move |cause| WheelError::Io { path: path.to_path_buf(), cause }
}
