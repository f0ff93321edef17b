//! The write path's state (the data directory and its lock, the log, the manifest, the next
//! sequence number): logging a batch durably and committing a snapshot generation.

use std::path::PathBuf;

use crate::wal::{Op, Wal};

use super::error::StoreError;
use super::generation::{map_vectors, remove_generations_except, write_snapshot};
use super::graph::write_graph;
use super::lock::DirLock;
use super::manifest::{Manifest, SnapshotInfo};
use super::table::Table;
use super::vectors::Vectors;

/// What the writer owns; one at a time holds it (the store keeps it behind a mutex).
#[derive(Debug)]
pub(super) struct Writer {
    /// Held for the store's lifetime: one process per data directory.
    _lock: Option<DirLock>,
    /// The data directory (`None` in memory).
    pub(super) dir: Option<PathBuf>,
    /// The write-ahead log (`None` in memory).
    pub(super) wal: Option<Wal>,
    /// The manifest as last written.
    pub(super) manifest: Manifest,
    /// The sequence number the next logged record gets.
    pub(super) next_seq: u64,
    /// Ids minted so far by this process.
    pub(super) minted: u64,
}

impl Writer {
    /// The writer of a store that lives in memory only.
    pub(super) fn in_memory(manifest: Manifest) -> Self {
        Self { _lock: None, dir: None, wal: None, manifest, next_seq: 1, minted: 0 }
    }

    /// The writer of the data directory `dir`, holding its `lock`.
    pub(super) fn on_disk(lock: DirLock, dir: PathBuf, wal: Wal, manifest: Manifest, next_seq: u64) -> Self {
        Self { _lock: Some(lock), dir: Some(dir), wal: Some(wal), manifest, next_seq, minted: 0 }
    }

    /// Numbers `ops`, appends them to the log and syncs it (in memory: only numbers them).
    pub(super) fn log(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let first = self.next_seq;
        self.next_seq += ops.len() as u64;
        let Some(wal) = self.wal.as_mut() else { return Ok(()) };
        let records: Vec<(u64, &Op)> = ops.iter().enumerate().map(|(i, op)| (first + i as u64, op)).collect();
        wal.append(&records)
            .and_then(|_| wal.sync())
            .map_err(|e| StoreError::Io { path: wal.path().to_path_buf(), source: e })
    }

    /// Writes the manifest (nothing in memory).
    pub(super) fn write_manifest(&self) -> Result<(), StoreError> {
        let Some(dir) = &self.dir else { return Ok(()) };
        self.manifest.write(dir)
    }

    /// With a data directory, writes `table` (compacted) as the next generation with its graph
    /// (unless `defer_graph`), names it in the manifest, empties the log and removes every
    /// other generation; returns the new generation's vector table, mapped (`None` if it could
    /// not be mapped: the table keeps its rows in memory). Nothing in memory.
    pub(super) fn commit_snapshot(&mut self, table: &Table, defer_graph: bool) -> Result<Option<Vectors>, StoreError> {
        let Some(dir) = self.dir.clone() else { return Ok(None) };
        let generation = self.manifest.snapshot.map_or(1, |s| s.generation + 1);
        let mut info =
            SnapshotInfo { generation, docs: table.live(), seq: self.next_seq - 1, graph: None, vectors_crc32: None };
        info.vectors_crc32 = Some(write_snapshot(&dir, info, table)?);
        if !defer_graph {
            info.graph = write_graph(&dir, generation, table.ann())?;
        }
        self.manifest.snapshot = Some(info);
        self.write_manifest()?;
        if let Some(wal) = self.wal.as_mut() {
            wal.truncate().map_err(|e| StoreError::Io { path: wal.path().to_path_buf(), source: e })?;
        }
        // The new generation is durable and named by the manifest: every other generation,
        // the previous one and any a crash orphaned, is garbage now.
        remove_generations_except(&dir, generation);
        Ok(map_vectors(&dir, info)
            .inspect_err(|e| tracing::warn!(error = %e, "the new snapshot's vectors stay in memory"))
            .ok())
    }
}
