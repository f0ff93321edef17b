//! ColBERT's token matrices — as the encoder gives them ([`Matrix`], `float.rs`), quantised to
//! int8 ([`QuantisedMatrix`], `quantised.rs`) — and their store.
//!
//! Stored document matrices are late interaction as it is meant to run. A document's
//! token matrix is encoded once (at indexing, or the first time the document is reranked) and
//! kept, quantised to int8 ([`QuantisedMatrix`], 388 bytes a token); a rerank then costs one
//! query encoding and MaxSim over the stored matrices.
//!
//! The store is addressed by content: a matrix is kept under the first 16 bytes of the
//! SHA-256 of the exact passage text it was encoded from ([`key`]), so a passage whose text
//! changed is simply not found (and encoded afresh), a stale matrix is never used for a new
//! text, and no engine has to tell the store about its ids, updates or deletes. A matrix of a
//! document deleted since stays in the file until the file is rebuilt (`rcp-dense index
//! --colbert` on a new file), costing disk, never answers.
//!
//! Two homes: a file ([`MatrixStore::open`], the format in `file.rs`; only each matrix's place
//! is held in memory, 40 bytes or so per matrix, and a matrix is read and checked when
//! scored), or memory ([`MatrixStore::in_memory`], up to a byte limit past which new matrices
//! are scored but not kept).

mod file;
mod float;
mod quantised;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

pub use float::{DIMENSION, DOCUMENT_LENGTH, Matrix, max_sim};
pub use quantised::QuantisedMatrix;

use file::{MatrixFile, Slot};

/// The address of a stored matrix: the first 16 bytes of the SHA-256 of its passage text.
pub type Key = [u8; 16];

/// The key of `text`.
pub fn key(text: &str) -> Key {
    let digest = Sha256::digest(text.as_bytes());
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Why the store could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum MatrixStoreError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// Another process holds the file (each serving process needs its own).
    #[error("{} is held by another process: give each process its own --colbert-store file", path.display())]
    Held {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a matrix file of this model.
    #[error("{} is not a ColBERT matrix file of {model} (another model's, or not a matrix file); move it away or name another with --colbert-store", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The model the store was opened for.
        model: String,
    },
}

/// What opening a matrix file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenReport {
    /// Matrices in the file.
    pub matrices: usize,
    /// Bytes of a damaged or torn tail cut off (their matrices are encoded again when needed).
    pub dropped_bytes: u64,
}

/// Where one matrix is held.
#[derive(Debug, Clone)]
enum Held {
    Memory(Arc<QuantisedMatrix>),
    File(Slot),
}

/// Content-addressed ColBERT document matrices, in a file or in memory (see the module docs).
/// Safe to share between requests: lookups take a read lock, inserts a write lock.
#[derive(Debug)]
pub struct MatrixStore {
    index: RwLock<HashMap<Key, Held>>,
    file: Option<MatrixFile>,
    /// Most bytes of matrices an in-memory store keeps.
    limit: u64,
    /// Bytes of the matrices held (codes and scales).
    bytes: AtomicU64,
    /// Token rows of the matrices held.
    rows: AtomicU64,
    /// Whether the in-memory limit has been reported.
    full: AtomicBool,
}

impl MatrixStore {
    /// An in-memory store keeping at most `limit` bytes of matrices.
    pub fn in_memory(limit: u64) -> Self {
        Self {
            index: RwLock::default(),
            file: None,
            limit,
            bytes: AtomicU64::new(0),
            rows: AtomicU64::new(0),
            full: AtomicBool::new(false),
        }
    }

    /// Opens the matrix file at `path` for `model` (its identity, written in the header),
    /// creating it if absent. A file of another model is refused; a damaged tail is cut off
    /// and reported.
    pub fn open(path: &Path, model: &str) -> Result<(Self, OpenReport), MatrixStoreError> {
        let (file, scan) = MatrixFile::open(path, model)?;
        let store = Self { file: Some(file), limit: u64::MAX, ..Self::in_memory(u64::MAX) };
        let report = OpenReport { matrices: scan.records.len(), dropped_bytes: scan.dropped };
        {
            let mut index = store.index.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (key, slot) in scan.records {
                if let Entry::Vacant(e) = index.entry(key) {
                    e.insert(Held::File(slot));
                    store.count(slot.rows(), 1);
                }
            }
        }
        Ok((store, report))
    }

    /// Matrices held.
    pub fn len(&self) -> usize {
        self.index.read().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no matrix is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the matrices held (int8 codes and one `f32` scale per row).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Token rows of the matrices held.
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Whether a matrix of `text` is held.
    pub fn contains(&self, text: &str) -> bool {
        self.index.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&key(text))
    }

    /// The matrix of `text`, if held and intact. A record that fails its check (or cannot be
    /// read) on reading is forgotten (and reported), so the caller encodes the text again and
    /// keeps it anew.
    pub fn get(&self, text: &str) -> Option<Arc<QuantisedMatrix>> {
        let key = key(text);
        let held = self.index.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned()?;
        match held {
            Held::Memory(m) => Some(m),
            Held::File(slot) => match self.file.as_ref()?.read(slot, &key) {
                Ok(Some(m)) => Some(Arc::new(m)),
                Ok(None) => {
                    tracing::warn!("a stored ColBERT matrix failed its check: encoding its passage again");
                    self.forget(&key);
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading a stored ColBERT matrix failed: encoding its passage again");
                    self.forget(&key);
                    None
                }
            },
        }
    }

    /// Keeps `matrix` as the matrix of `text` (a text already held is left as it is). Whether
    /// it is kept: an in-memory store past its limit keeps nothing more, and a matrix with a
    /// scale that is not a finite number is never kept. A file's record is written before the
    /// index is locked, so lookups never wait for the disk.
    pub fn insert(&self, text: &str, matrix: QuantisedMatrix) -> Result<bool, MatrixStoreError> {
        let key = key(text);
        if self.index.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&key) {
            return Ok(true);
        }
        if !matrix.scales().iter().all(|s| s.is_finite()) {
            return Ok(false);
        }
        let rows = matrix.len();
        let held = match &self.file {
            Some(file) => Held::File(file.append(&key, &matrix)?),
            None => {
                if self.bytes() + matrix.bytes() as u64 > self.limit {
                    if !self.full.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            limit_bytes = self.limit,
                            "the in-memory ColBERT matrix store is full: further passages are encoded at every rerank"
                        );
                    }
                    return Ok(false);
                }
                Held::Memory(Arc::new(matrix))
            }
        };
        let mut index = self.index.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Another request may have kept the same text meanwhile: the first entry stands (a
        // second record in the file is harmless; opening keeps the first of a key).
        if let Entry::Vacant(slot) = index.entry(key) {
            slot.insert(held);
            self.count(rows, 1);
        }
        Ok(true)
    }

    /// Flushes the file's appended matrices to the disk (nothing for an in-memory store).
    pub fn sync(&self) -> Result<(), MatrixStoreError> {
        self.file.as_ref().map_or(Ok(()), MatrixFile::sync)
    }

    fn count(&self, rows: usize, sign: i64) {
        let bytes = (rows * (DIMENSION + 4)) as u64;
        if sign > 0 {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        } else {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.rows.fetch_sub(rows as u64, Ordering::Relaxed);
        }
    }

    fn forget(&self, key: &Key) {
        let mut index = self.index.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match index.remove(key) {
            Some(Held::File(slot)) => self.count(slot.rows(), -1),
            Some(Held::Memory(m)) => self.count(m.len(), -1),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests;
