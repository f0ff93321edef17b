//! The persistent vector store behind the engine: documents and their vectors in slot order,
//! the HNSW graph over them, tombstones, and durability (§7.10, §7.11).
//!
//! On disk (`--data-dir`):
//!
//! | file | content |
//! |------|---------|
//! | `manifest.json` | model identity and dimension, typed filter fields, HNSW parameters, current snapshot |
//! | `snapshot-NNNNNN.docs` | the snapshot's documents in slot order, binary, with a checksum (`.jsonl` in older snapshots) |
//! | `snapshot-NNNNNN.f32` | their vectors, a flat little-endian `f32` table (`docs × dimension`; CRC-32 in the manifest), mapped in place |
//! | `snapshot-NNNNNN.postings` | the postings of the declared filter fields (derived; rebuilt from the documents when missing or damaged) |
//! | `snapshot-NNNNNN.graph` | the ANN graph over them, when the backend can save it (CRC-32 in the manifest) |
//! | `wal.log` | writes since the snapshot (see [`crate::wal`]) |
//!
//! Opening maps the snapshot's vector table (its length checked before the map is made, its
//! CRC-32 checked before anything is served), reads its documents and its graph, then inserts
//! the vectors of the log records newer than it into that graph — nothing is re-embedded, and
//! only the log tail is indexed. A graph
//! file that is missing, fails its checksum or does not fit the snapshot is rebuilt from the
//! stored vectors (with a warning) and saved again. A snapshot (taken after `index`, and when
//! tombstones exceed a quarter of the slots or the log grows past its limit) writes a new
//! generation (each file through a temporary file, fsync and rename), switches `manifest.json`
//! atomically, then empties the log; a crash between the two steps is harmless because replay
//! skips records the snapshot already holds.
//!
//! This module is the store's face ([`Store`]); its parts, one concern each:
//!
//! | module | concern |
//! |--------|---------|
//! | `table` | the in-memory [`Table`]: documents, vectors, id map, tombstones, the graph |
//! | `vectors` | [`Vectors`]: the snapshot's vector table mapped in place, newer rows in memory |
//! | `postings` | [`MetaIndex`]: postings of the declared filter fields, the filter's candidate slots |
//! | `plan` | [`Plan`]: the filter planner, choosing a search by the filter's cardinality |
//! | `search` | [`Table::search`]: running the chosen plan, with its fallbacks |
//! | `open` | bringing a data directory up: lock, manifest, snapshot, graph, log replay |
//! | `writer` | the write path: logging a batch, committing a snapshot generation |
//! | `manifest` | `manifest.json` ([`Manifest`]) |
//! | `generation` | a snapshot generation's documents and `.f32` files |
//! | `docs` | the binary documents file |
//! | `graph` | a generation's saved `.graph`: saved, checked, loaded or rebuilt |
//! | `repair` | a data directory whose manifest is lost or unreadable ([`repair_manifest`]) |
//! | `lock` | the data directory's lock ([`DirLock`]): serve, index and repair exclude each other |
//! | `layout`, `durable`, `options`, `error` | file names, durable writes, tunables, errors |

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::RwLock;

use rcp_wire::filter::FieldType;

use crate::ann::HnswParams;
use crate::wal::{Op, Origin, StoredDoc, Wal};
use rcp_embedder::model::DIMENSION;

mod docs;
mod durable;
mod error;
mod generation;
mod graph;
mod ids;
mod layout;
mod lock;
mod manifest;
mod open;
mod options;
mod plan;
mod postings;
mod repair;
mod search;
mod table;
mod vectors;
mod writer;

#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;

pub use error::StoreError;
pub use graph::GraphSource;
pub use lock::DirLock;
pub use manifest::{GraphInfo, Manifest, SnapshotInfo};
pub use open::OpenReport;
pub use options::{HnswOverride, StoreOptions};
pub use plan::{Estimate, Plan, PlannerOptions};
pub use postings::{Candidates, MetaIndex};
pub use repair::{ManifestOutcome, ManifestRepair, rebuild_manifest, repair_manifest};
pub use search::Route;
pub use table::Table;
pub use vectors::Vectors;

use writer::Writer;

/// The store: the table behind a lock, plus the write path (log, snapshots) behind another.
///
/// Writers are serialised by the caller (the engine holds an async mutex around
/// [`Store::upsert`]/[`Store::delete`]); readers only take the table's read lock.
#[derive(Debug)]
pub struct Store {
    table: RwLock<Table>,
    writer: std::sync::Mutex<Writer>,
    options: StoreOptions,
}

impl Store {
    /// An empty store that lives in memory only (no `--data-dir`).
    pub fn in_memory(options: StoreOptions) -> Self {
        let params = options.hnsw.apply(HnswParams::default());
        let backend = options.ann.unwrap_or_default();
        Self {
            table: RwLock::new(Table::new(DIMENSION, params, backend, &BTreeMap::new())),
            writer: std::sync::Mutex::new(Writer::in_memory(Manifest::new(params, backend))),
            options,
        }
    }

    /// Opens (creating) the store in `dir`: snapshot, then log replay, then the graph.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<(Self, OpenReport), StoreError> {
        let (table, writer, report) = open::open(dir, options)?;
        let store = Self { table: RwLock::new(table), writer: std::sync::Mutex::new(writer), options };
        Ok((store, report))
    }

    /// Whether `dir` holds a store (a manifest, a snapshot or a logged write): what `serve`
    /// without `--create` requires of its data directory.
    pub fn held_in(dir: &Path) -> bool {
        dir.join(layout::MANIFEST).exists() || dir.join(layout::WAL).exists() || !layout::generations(dir).is_empty()
    }

    /// Reads the table.
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The options.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The sequence number of the last applied write (the index version) and the size of the
    /// write-ahead log in bytes (`None` in memory), for operators.
    pub fn write_position(&self) -> (u64, Option<u64>) {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        (w.next_seq.saturating_sub(1), w.wal.as_ref().map(Wal::len))
    }

    /// The typed filter fields (§8).
    pub fn fields(&self) -> BTreeMap<String, FieldType> {
        self.writer.lock().map(|w| w.manifest.fields.clone()).unwrap_or_default()
    }

    /// Replaces the typed filter fields and persists them.
    pub fn set_fields(&self, fields: BTreeMap<String, FieldType>) -> Result<(), StoreError> {
        self.with_writer(|w| {
            w.manifest.fields = fields;
            w.write_manifest()?;
            self.table.write().unwrap_or_else(|p| p.into_inner()).reindex(&w.manifest.fields);
            Ok(())
        })
    }

    fn with_writer<T>(&self, f: impl FnOnce(&mut Writer) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut w)
    }

    /// Mints an id for a document sent without one (§7.10: not idempotent by design).
    pub fn mint_id(&self) -> String {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.minted += 1;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("dense-{nanos:x}-{}", w.minted)
    }

    /// Upserts documents with their vectors: logged and made durable first, then inserted
    /// into the graph (invisible until the documents are published), then published in one
    /// step. May compact afterwards.
    pub fn upsert(&self, docs: Vec<(StoredDoc, Vec<f32>)>) -> Result<(), StoreError> {
        if docs.is_empty() {
            return Ok(());
        }
        let ops: Vec<Op> = docs.into_iter().map(|(d, v)| Op::Upsert(d, v)).collect();
        self.with_writer(|w| {
            w.log(&ops)?;
            {
                // New slots start at the current end; `keep` rejects slots past it, so the
                // inserted nodes stay invisible until the write lock below publishes them.
                let table = self.read();
                let base = table.docs.len();
                let ops = if self.options.defer_graph { &[][..] } else { &ops[..] };
                let rows: Vec<(&[f32], usize)> = ops
                    .iter()
                    .enumerate()
                    .filter_map(|(i, op)| match op {
                        Op::Upsert(_, v) => Some((v.as_slice(), base + i)),
                        Op::Delete(_) => None,
                    })
                    .collect();
                table.ann.insert_many(&rows)?;
            }
            let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
            for op in ops {
                table.apply(op);
            }
            drop(table);
            self.maybe_compact(w)
        })
    }

    /// Deletes documents by id; returns how many existed.
    pub fn delete(&self, ids: Vec<String>) -> Result<u64, StoreError> {
        self.with_writer(|w| {
            let present: Vec<String> = {
                let t = self.read();
                ids.into_iter().filter(|id| t.slot(id).is_some()).collect()
            };
            if present.is_empty() {
                return Ok(0);
            }
            let op = Op::Delete(present);
            w.log(std::slice::from_ref(&op))?;
            let removed = self.table.write().unwrap_or_else(|p| p.into_inner()).apply(op);
            self.maybe_compact(w)?;
            Ok(removed as u64)
        })
    }

    fn maybe_compact(&self, w: &mut Writer) -> Result<(), StoreError> {
        let (tomb, slots) = {
            let t = self.read();
            (t.tombstones, t.docs.len())
        };
        let too_many = tomb >= 64 && tomb as f64 >= self.options.compact_ratio * slots as f64;
        let wal_full = w.wal.as_ref().is_some_and(|l| l.len() > self.options.wal_limit);
        if too_many || wal_full { self.snapshot_locked(w) } else { Ok(()) }
    }

    /// Compacts (drops tombstones, rebuilds the graph) and, with a data directory, writes a
    /// snapshot and empties the log.
    pub fn snapshot(&self) -> Result<(), StoreError> {
        self.with_writer(|w| self.snapshot_locked(w))
    }

    fn snapshot_locked(&self, w: &mut Writer) -> Result<(), StoreError> {
        let compacted = {
            let t = self.read();
            t.compacted(t.params(), t.backend(), self.options.defer_graph)?
        };
        let mut compacted = compacted;
        if let Some(vectors) = w.commit_snapshot(&compacted, self.options.defer_graph)? {
            // The rows just written, now served from the file instead of the heap.
            compacted.vectors = vectors;
        }
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = compacted;
        Ok(())
    }
}

/// The document a corpus or `index/add` document becomes.
pub fn stored(id: String, text: String, meta: rcp_wire::Meta, origin: Origin) -> StoredDoc {
    StoredDoc { id, text, meta, origin }
}
