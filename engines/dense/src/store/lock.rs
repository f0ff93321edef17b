//! The data directory's lock (`.lock`): one process at a time may change a data directory.
//! `serve` and `index` hold it while the store is open, `repair` while it repairs, so a repair
//! never replaces a file a live server is still appending to.

use std::fs::{self, File};
use std::path::Path;

use super::error::{StoreError, io_at};
use super::layout::LOCK;

/// The held lock of a data directory, released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir` (an existing directory), without waiting: another process
    /// holding it is [`StoreError::InUse`].
    pub fn acquire(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(LOCK);
        let file = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io_at(&path))?;
        if file.try_lock().is_err() {
            return Err(StoreError::InUse { path: dir.to_path_buf() });
        }
        Ok(Self { _file: file })
    }
}
