//! The persistent vector store behind the engine: documents and their vectors in slot order,
//! the HNSW graph over them, tombstones, and durability (§7.10, §7.11).
//!
//! On disk (`--data-dir`):
//!
//! | file | content |
//! |------|---------|
//! | `manifest.json` | model identity and dimension, typed filter fields, HNSW parameters, current snapshot |
//! | `snapshot-NNNNNN.jsonl` | the snapshot's documents, one per line, in slot order |
//! | `snapshot-NNNNNN.f32` | their vectors, a flat little-endian `f32` table (`docs × dimension`) |
//! | `snapshot-NNNNNN.graph` | the ANN graph over them, when the backend can save it (CRC-32 in the manifest) |
//! | `wal.log` | writes since the snapshot (see [`crate::wal`]) |
//!
//! Opening reads the snapshot and its graph, then inserts the vectors of the log records newer
//! than it into that graph — nothing is re-embedded, and only the log tail is indexed. A graph
//! file that is missing, fails its checksum or does not fit the snapshot is rebuilt from the
//! stored vectors (with a warning) and saved again. A snapshot (taken after `index`, and when
//! tombstones exceed a quarter of the slots or the log grows past its limit) writes a new
//! generation (each file through a temporary file, fsync and rename), switches `manifest.json`
//! atomically, then empties the log; a crash between the two steps is harmless because replay
//! skips records the snapshot already holds.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use rcp_protocol::filter::{FieldType, Filter};
use serde::{Deserialize, Serialize};

use crate::ann::{self, AnnError, AnnIndex, Backend, HnswParams, Precision, Scored};
use crate::model::{DIMENSION, IDENTITY};
use crate::wal::{self, Op, Origin, StoredDoc, Wal};

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
    /// The ANN index failed.
    #[error("ANN index: {0}")]
    Ann(#[from] AnnError),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

const MANIFEST: &str = "manifest.json";
const WAL: &str = "wal.log";
const FORMAT: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// On-disk format version.
    pub format: u32,
    /// The model the vectors come from (`embed.identity`).
    pub identity: String,
    /// Vector dimension.
    pub dimension: usize,
    /// Typed filter fields (§8).
    #[serde(default)]
    pub fields: BTreeMap<String, FieldType>,
    /// HNSW parameters the graph is built with.
    pub hnsw: HnswParams,
    /// The ANN backend the graph is built with.
    #[serde(default)]
    pub ann: Backend,
    /// The current snapshot, if one was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotInfo>,
}

/// A snapshot generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Generation number (file names).
    pub generation: u64,
    /// Documents in it.
    pub docs: usize,
    /// Last write-ahead-log sequence number it includes.
    pub seq: u64,
    /// Its saved ANN graph, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphInfo>,
}

/// A saved ANN graph (`snapshot-NNNNNN.graph`): which backend wrote it, with what parameters,
/// and its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphInfo {
    /// The backend that wrote it.
    pub backend: Backend,
    /// The parameters it was built with.
    pub hnsw: HnswParams,
    /// Nodes in it (the snapshot's documents).
    pub nodes: usize,
    /// File size in bytes.
    pub bytes: u64,
    /// CRC-32 of the file.
    pub crc32: u32,
}

impl Manifest {
    fn new(hnsw: HnswParams, ann: Backend) -> Self {
        Self {
            format: FORMAT,
            identity: IDENTITY.to_owned(),
            dimension: DIMENSION,
            fields: BTreeMap::new(),
            hnsw,
            ann,
            snapshot: None,
        }
    }
}

/// Tunables of the store.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreOptions {
    /// HNSW parameters to change; the others keep their value in the manifest (or the default).
    pub hnsw: HnswOverride,
    /// The ANN backend to switch to; `None` keeps the stored one (or the default).
    pub ann: Option<Backend>,
    /// Collections at or below this many live documents are searched exactly.
    pub full_scan_threshold: usize,
    /// Compact when tombstones reach this fraction of the slots (and at least 64 of them).
    pub compact_ratio: f64,
    /// Snapshot when the log grows past this many bytes.
    pub wal_limit: u64,
    /// Build no graph (bulk loading with `rcp-dense index`: the server builds it on start).
    pub defer_graph: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            hnsw: HnswOverride::default(),
            ann: None,
            full_scan_threshold: 1000,
            compact_ratio: 0.25,
            wal_limit: 256 << 20,
            defer_graph: false,
        }
    }
}

/// HNSW parameters given on the command line; `None` keeps the stored (or default) value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HnswOverride {
    /// Links per node and layer.
    pub m: Option<usize>,
    /// Beam width while building.
    pub ef_construction: Option<usize>,
    /// Beam width while searching.
    pub ef_search: Option<usize>,
    /// Element type of the graph's vectors.
    pub precision: Option<Precision>,
}

impl HnswOverride {
    /// `base` with the given values replaced.
    pub fn apply(&self, base: HnswParams) -> HnswParams {
        HnswParams {
            m: self.m.unwrap_or(base.m),
            ef_construction: self.ef_construction.unwrap_or(base.ef_construction),
            ef_search: self.ef_search.unwrap_or(base.ef_search),
            precision: self.precision.unwrap_or(base.precision),
        }
    }
}

/// The in-memory table: documents and vectors by slot, the id map and the graph.
#[derive(Debug)]
pub struct Table {
    dim: usize,
    docs: Vec<Option<StoredDoc>>,
    vectors: Vec<f32>,
    by_id: HashMap<String, usize>,
    ann: Box<dyn AnnIndex>,
    tombstones: usize,
}

/// How a search was served, for `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchPath {
    /// The HNSW graph, with this beam width.
    Hnsw {
        /// The final `ef`.
        ef: usize,
    },
    /// An exact scan of a collection at or below the full-scan threshold.
    Exact,
    /// An exact scan after the graph could not fill the request (a very selective filter).
    ExactFallback,
}

impl Table {
    fn new(dim: usize, params: HnswParams, backend: Backend) -> Self {
        Self {
            dim,
            docs: Vec::new(),
            vectors: Vec::new(),
            by_id: HashMap::new(),
            ann: ann::new_index(backend, params, dim, 0),
            tombstones: 0,
        }
    }

    /// Live documents.
    pub fn live(&self) -> usize {
        self.by_id.len()
    }

    /// Deleted or replaced slots still in the graph.
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// The document with this id.
    pub fn get(&self, id: &str) -> Option<&StoredDoc> {
        self.by_id.get(id).and_then(|&s| self.docs[s].as_ref())
    }

    /// The slot of the live document with this id.
    pub fn slot(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied().filter(|&s| self.docs.get(s).is_some_and(Option::is_some))
    }

    /// The document in a slot (`None` for a tombstone).
    pub fn doc(&self, slot: usize) -> Option<&StoredDoc> {
        self.docs.get(slot).and_then(Option::as_ref)
    }

    /// The vector in a slot.
    pub fn vector(&self, slot: usize) -> &[f32] {
        &self.vectors[slot * self.dim..(slot + 1) * self.dim]
    }

    /// The HNSW parameters.
    pub fn params(&self) -> HnswParams {
        self.ann.params()
    }

    /// The ANN backend.
    pub fn backend(&self) -> Backend {
        self.ann.backend()
    }

    /// The ANN index.
    pub fn ann(&self) -> &dyn AnnIndex {
        self.ann.as_ref()
    }

    /// Applies an operation to the documents only (the graph is built or extended separately).
    fn apply(&mut self, op: Op) -> usize {
        match op {
            Op::Upsert(doc, vector) => {
                if let Some(old) = self.by_id.remove(&doc.id) {
                    self.docs[old] = None;
                    self.tombstones += 1;
                }
                let slot = self.docs.len();
                self.by_id.insert(doc.id.clone(), slot);
                self.docs.push(Some(doc));
                self.vectors.extend_from_slice(&vector);
                1
            }
            Op::Delete(ids) => {
                let mut removed = 0;
                for id in ids {
                    if let Some(slot) = self.by_id.remove(&id) {
                        self.docs[slot] = None;
                        self.tombstones += 1;
                        removed += 1;
                    }
                }
                removed
            }
        }
    }

    /// A new table holding only the live documents (renumbered), with a fresh graph unless
    /// `defer_graph`.
    fn compacted(&self, params: HnswParams, backend: Backend, defer_graph: bool) -> Result<Self, StoreError> {
        let mut t = Table::new(self.dim, params, backend);
        for (slot, doc) in self.docs.iter().enumerate() {
            if let Some(doc) = doc {
                t.apply(Op::Upsert(doc.clone(), self.vector(slot).to_vec()));
            }
        }
        if !defer_graph {
            t.rebuild_graph(params, backend)?;
        }
        Ok(t)
    }

    fn rebuild_graph(&mut self, params: HnswParams, backend: Backend) -> Result<(), StoreError> {
        let docs = &self.docs;
        self.ann = ann::build(backend, params, &self.vectors, self.dim, |s| docs[s].is_some())?;
        Ok(())
    }

    /// Inserts the live slots from `first` on into the graph (the log tail replayed on open).
    fn index_tail(&self, first: usize) -> Result<(), StoreError> {
        let rows: Vec<(&[f32], usize)> =
            (first..self.docs.len()).filter(|&s| self.docs[s].is_some()).map(|s| (self.vector(s), s)).collect();
        self.ann.insert_many(&rows)?;
        Ok(())
    }

    /// The `want` best live documents for a unit query vector among those `filter` accepts,
    /// each scored by its exact cosine.
    ///
    /// Collections up to `full_scan_threshold` live documents are scanned exactly. Otherwise:
    /// 1. the plain graph search with beam `ef` (at least `want`) returns the whole beam, and
    ///    tombstones and documents the filter rejects are dropped; when fewer than `want` remain,
    ///    the beam is widened ×4 and the search repeated once;
    /// 2. with a filter, a filtered graph walk follows (the filter applied during the walk,
    ///    which reaches the matches of a selective filter);
    /// 3. an exact scan, so `want` is met whenever that many documents match.
    pub fn search(
        &self,
        query: &[f32],
        want: usize,
        ef: usize,
        filter: Option<&Filter>,
        full_scan_threshold: usize,
    ) -> (Vec<Scored>, SearchPath) {
        let keep = |s: usize| match self.docs.get(s) {
            Some(Some(d)) => filter.is_none_or(|f| f.matches(&d.meta)),
            _ => false,
        };
        let live = self.live();
        if want == 0 || live == 0 {
            return (Vec::new(), SearchPath::Exact);
        }
        if live <= full_scan_threshold {
            return (ann::exact(&self.vectors, self.dim, query, want, None, &keep), SearchPath::Exact);
        }
        let enough = want.min(live);
        let rescore = |mut found: Vec<Scored>| {
            for s in &mut found {
                s.score = ann::dot(query, self.vector(s.slot));
            }
            found.sort_by(ann::by_score);
            found.truncate(want);
            found
        };
        let mut beam = ef.max(want);
        for _ in 0..2 {
            let mut found = self.ann.search(query, beam, beam, None);
            found.retain(|s| keep(s.slot));
            if found.len() >= enough {
                return (rescore(found), SearchPath::Hnsw { ef: beam });
            }
            beam = beam.saturating_mul(4).min(self.docs.len().max(want));
        }
        if filter.is_some() {
            let found = self.ann.search(query, want, ef.max(want), Some(&keep));
            if found.len() >= enough {
                return (rescore(found), SearchPath::Hnsw { ef: ef.max(want) });
            }
        }
        (ann::exact(&self.vectors, self.dim, query, want, None, &keep), SearchPath::ExactFallback)
    }
}

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

#[derive(Debug)]
struct Writer {
    /// Held for the store's lifetime: one process per data directory.
    _lock: Option<File>,
    dir: Option<PathBuf>,
    wal: Option<Wal>,
    manifest: Manifest,
    next_seq: u64,
    minted: u64,
}

/// What opening a store found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Documents loaded from the snapshot.
    pub snapshot_docs: usize,
    /// Log records replayed.
    pub replayed: usize,
    /// Bytes of torn log tail that were discarded.
    pub truncated: u64,
    /// How the snapshot's graph was obtained (`None` without a snapshot or with `defer_graph`).
    pub graph: Option<GraphSource>,
}

/// Where the graph over the snapshot came from on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphSource {
    /// Loaded from `snapshot-NNNNNN.graph`.
    Loaded,
    /// Built from the stored vectors, for this reason (no saved graph, another backend or
    /// parameters, a failed checksum, ...).
    Rebuilt(String),
}

impl Store {
    /// An empty store that lives in memory only (no `--data-dir`).
    pub fn in_memory(options: StoreOptions) -> Self {
        let params = options.hnsw.apply(HnswParams::default());
        let backend = options.ann.unwrap_or_default();
        Self {
            table: RwLock::new(Table::new(DIMENSION, params, backend)),
            writer: std::sync::Mutex::new(Writer {
                _lock: None,
                dir: None,
                wal: None,
                manifest: Manifest::new(params, backend),
                next_seq: 1,
                minted: 0,
            }),
            options,
        }
    }

    /// Opens (creating) the store in `dir`: snapshot, then log replay, then the graph.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<(Self, OpenReport), StoreError> {
        fs::create_dir_all(dir).map_err(io_at(dir))?;
        let lock_path = dir.join(".lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_at(&lock_path))?;
        if lock.try_lock().is_err() {
            return Err(StoreError::Incompatible {
                path: dir.to_path_buf(),
                detail: "the data directory is in use by another rcp-dense process".to_owned(),
            });
        }
        let manifest_path = dir.join(MANIFEST);
        let mut manifest = match fs::read(&manifest_path) {
            Ok(bytes) => serde_json::from_slice::<Manifest>(&bytes)
                .map_err(|e| StoreError::Incompatible { path: manifest_path.clone(), detail: e.to_string() })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                refuse_orphaned_data(dir, &manifest_path)?;
                Manifest::new(HnswParams::default(), Backend::default())
            }
            Err(e) => return Err(StoreError::Io { path: manifest_path, source: e }),
        };
        if manifest.format != FORMAT || manifest.identity != IDENTITY || manifest.dimension != DIMENSION {
            return Err(StoreError::Incompatible {
                path: manifest_path,
                detail: format!(
                    "index built by format {} with model '{}' ({} dims); this engine writes format {FORMAT} with \
                     '{IDENTITY}' ({DIMENSION} dims): re-index the corpus into a new --data-dir",
                    manifest.format, manifest.identity, manifest.dimension
                ),
            });
        }
        manifest.hnsw = options.hnsw.apply(manifest.hnsw);
        manifest.ann = options.ann.unwrap_or(manifest.ann);
        let (params, backend) = (manifest.hnsw, manifest.ann);
        let mut table = Table::new(DIMENSION, params, backend);
        let mut report = OpenReport::default();
        let mut last_seq = 0;
        if let Some(snap) = manifest.snapshot {
            load_snapshot(dir, snap, &mut table)?;
            report.snapshot_docs = snap.docs;
            last_seq = snap.seq;
            if !options.defer_graph {
                report.graph = open_graph(dir, &mut manifest, &mut table)?;
            }
        }
        let wal_path = dir.join(WAL);
        let (wal, replay) = Wal::open(&wal_path, DIMENSION)?;
        report.truncated = replay.truncated;
        let mut max_seq = last_seq;
        let tail = table.docs.len();
        for (seq, op) in replay.records {
            max_seq = max_seq.max(seq);
            if seq > last_seq {
                table.apply(op);
                report.replayed += 1;
            }
        }
        if !options.defer_graph {
            table.index_tail(tail)?;
        }
        let store = Self {
            table: RwLock::new(table),
            writer: std::sync::Mutex::new(Writer {
                _lock: Some(lock),
                dir: Some(dir.to_path_buf()),
                wal: Some(wal),
                manifest,
                next_seq: max_seq + 1,
                minted: 0,
            }),
            options,
        };
        store.with_writer(|w| write_manifest(w))?;
        Ok((store, report))
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
            write_manifest(w)
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
            log_ops(w, &ops)?;
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
                ids.into_iter().filter(|id| t.by_id.contains_key(id)).collect()
            };
            if present.is_empty() {
                return Ok(0);
            }
            let op = Op::Delete(present);
            log_ops(w, std::slice::from_ref(&op))?;
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
        if let Some(dir) = w.dir.clone() {
            let generation = w.manifest.snapshot.map_or(1, |s| s.generation + 1);
            let mut info = SnapshotInfo { generation, docs: compacted.live(), seq: w.next_seq - 1, graph: None };
            write_snapshot(&dir, info, &compacted)?;
            if !self.options.defer_graph {
                info.graph = write_graph(&dir, generation, compacted.ann())?;
            }
            w.manifest.snapshot = Some(info);
            write_manifest(w)?;
            if let Some(wal) = w.wal.as_mut() {
                wal.truncate().map_err(|e| StoreError::Io { path: wal.path().to_path_buf(), source: e })?;
            }
            // The new generation is durable and named by the manifest: every other generation,
            // the previous one and any a crash orphaned, is garbage now.
            remove_generations_except(&dir, generation);
        }
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = compacted;
        Ok(())
    }
}

fn log_ops(w: &mut Writer, ops: &[Op]) -> Result<(), StoreError> {
    let first = w.next_seq;
    w.next_seq += ops.len() as u64;
    let Some(wal) = w.wal.as_mut() else { return Ok(()) };
    let records: Vec<(u64, &Op)> = ops.iter().enumerate().map(|(i, op)| (first + i as u64, op)).collect();
    wal.append(&records)
        .and_then(|_| wal.sync())
        .map_err(|e| StoreError::Io { path: wal.path().to_path_buf(), source: e })
}

/// The snapshot generations with at least one file in `dir`, ascending.
fn generations(dir: &Path) -> Vec<u64> {
    let mut found: Vec<u64> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name();
                    let name = name.to_str()?;
                    let rest = name.strip_prefix("snapshot-")?;
                    let (number, ext) = rest.split_once('.')?;
                    matches!(ext, "jsonl" | "f32" | "graph").then(|| number.parse::<u64>().ok())?
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found.dedup();
    found
}

/// Removes the files of every snapshot generation but `keep` (and temporary files a crash
/// left behind while writing one).
fn remove_generations_except(dir: &Path, keep: u64) {
    for generation in generations(dir).into_iter().filter(|g| *g != keep) {
        for ext in ["jsonl", "f32", "graph"] {
            let path = snapshot_path(dir, generation, ext);
            match fs::remove_file(&path) {
                Ok(()) => tracing::info!(path = %path.display(), "removed a superseded snapshot file"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "could not remove a superseded snapshot file")
                }
            }
        }
    }
}

/// A data directory without `manifest.json` is new only when it holds no snapshot and no
/// logged write; otherwise the manifest was lost and opening it empty would serve less data.
fn refuse_orphaned_data(dir: &Path, manifest_path: &Path) -> Result<(), StoreError> {
    let found = generations(dir);
    let wal_bytes = fs::metadata(dir.join(WAL)).map(|m| m.len()).unwrap_or(0);
    if found.is_empty() && wal_bytes == 0 {
        return Ok(());
    }
    let mut held = Vec::new();
    if let Some(last) = found.last() {
        held.push(format!("snapshot generation(s) {found:?} (newest snapshot-{last:06}.*)"));
    }
    if wal_bytes > 0 {
        held.push(format!("a {wal_bytes}-byte {WAL}"));
    }
    Err(StoreError::Damaged {
        path: manifest_path.to_path_buf(),
        detail: format!(
            "missing, but the directory holds {}: opening it would serve less data than was \
             acknowledged. Nothing was changed. Run `rcp-dense repair --data-dir {}` to rebuild the \
             manifest from the newest complete snapshot (the write-ahead log is then replayed)",
            held.join(" and "),
            dir.display()
        ),
    })
}

/// What [`rebuild_manifest`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestRepair {
    /// The snapshot generation the new manifest names (`None`: no complete snapshot; the log
    /// alone holds the data).
    pub generation: Option<u64>,
    /// Documents in that snapshot.
    pub docs: usize,
    /// Generations found incomplete or unreadable, each with the reason; left on disk.
    pub skipped: Vec<(u64, String)>,
    /// The filter fields written to the new manifest.
    pub fields: BTreeMap<String, FieldType>,
}

/// Writes a new `manifest.json` for a data directory that lost it: names the newest snapshot
/// generation whose documents and vectors agree, with sequence 0 so that the whole log is
/// replayed on open (replaying writes a snapshot already holds leaves it unchanged: each
/// record sets or removes whole documents). The filter fields are recomputed by `fields`
/// from the snapshot's documents. Refuses when a manifest exists.
pub fn rebuild_manifest(
    dir: &Path,
    fields: impl FnOnce(&[StoredDoc]) -> BTreeMap<String, FieldType>,
) -> Result<ManifestRepair, StoreError> {
    let manifest_path = dir.join(MANIFEST);
    if manifest_path.exists() {
        return Err(StoreError::Incompatible {
            path: manifest_path,
            detail: "present; rebuild_manifest only replaces a missing manifest".to_owned(),
        });
    }
    let mut repair = ManifestRepair { generation: None, docs: 0, skipped: Vec::new(), fields: BTreeMap::new() };
    let mut docs_seen: Vec<StoredDoc> = Vec::new();
    for generation in generations(dir).into_iter().rev() {
        match read_generation(dir, generation) {
            Ok(docs) => {
                repair.generation = Some(generation);
                repair.docs = docs.len();
                docs_seen = docs;
                break;
            }
            Err(why) => repair.skipped.push((generation, why)),
        }
    }
    repair.fields = fields(&docs_seen);
    let mut manifest = Manifest::new(HnswParams::default(), Backend::default());
    manifest.fields = repair.fields.clone();
    manifest.snapshot =
        repair.generation.map(|generation| SnapshotInfo { generation, docs: repair.docs, seq: 0, graph: None });
    let bytes = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    write_durably(&manifest_path, |f| f.write_all(&bytes))?;
    Ok(repair)
}

/// The documents of one snapshot generation, if its two files are present and agree.
fn read_generation(dir: &Path, generation: u64) -> Result<Vec<StoredDoc>, String> {
    let docs_path = snapshot_path(dir, generation, "jsonl");
    let vec_path = snapshot_path(dir, generation, "f32");
    let vec_bytes = fs::metadata(&vec_path).map_err(|e| format!("{}: {e}", vec_path.display()))?.len();
    let file = File::open(&docs_path).map_err(|e| format!("{}: {e}", docs_path.display()))?;
    let mut docs = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", docs_path.display()))?;
        let doc: StoredDoc =
            serde_json::from_str(&line).map_err(|e| format!("{} line {}: {e}", docs_path.display(), i + 1))?;
        docs.push(doc);
    }
    let expected = (docs.len() * DIMENSION * 4) as u64;
    if vec_bytes != expected {
        return Err(format!("{}: {vec_bytes} bytes, but {} documents need {expected}", vec_path.display(), docs.len()));
    }
    Ok(docs)
}

fn snapshot_path(dir: &Path, generation: u64, ext: &str) -> PathBuf {
    dir.join(format!("snapshot-{generation:06}.{ext}"))
}

fn write_manifest(w: &Writer) -> Result<(), StoreError> {
    let Some(dir) = &w.dir else { return Ok(()) };
    let bytes = serde_json::to_vec_pretty(&w.manifest).unwrap_or_default();
    write_durably(&dir.join(MANIFEST), |f| f.write_all(&bytes))
}

/// Writes `path` through a temporary file, fsyncs it, renames it into place and fsyncs the
/// directory.
fn write_durably(path: &Path, fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>) -> Result<(), StoreError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!("{name}.tmp"));
    let result = (|| {
        let mut f = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        fill(&mut f)?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) => wal::sync_dir(dir),
            None => Ok(()),
        }
    })();
    result.map_err(io_at(path))
}

fn write_snapshot(dir: &Path, info: SnapshotInfo, table: &Table) -> Result<(), StoreError> {
    let live = || table.docs.iter().enumerate().filter_map(|(s, d)| d.as_ref().map(|d| (s, d)));
    write_durably(&snapshot_path(dir, info.generation, "jsonl"), |f| {
        for (_, doc) in live() {
            serde_json::to_writer(&mut *f, doc)?;
            f.write_all(b"\n")?;
        }
        Ok(())
    })?;
    write_durably(&snapshot_path(dir, info.generation, "f32"), |f| {
        for (slot, _) in live() {
            for x in table.vector(slot) {
                f.write_all(&x.to_le_bytes())?;
            }
        }
        Ok(())
    })
}

/// CRC-32 and length of a file, read in 1 MiB blocks.
fn file_crc32(path: &Path) -> io::Result<(u32, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = io::Read::read(&mut file, &mut buf)?;
        if n == 0 {
            return Ok((hasher.finalize(), len));
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
}

/// Saves the graph of generation `generation` through a temporary file, fsync and rename;
/// `None` when the backend cannot save it.
fn write_graph(dir: &Path, generation: u64, ann: &dyn AnnIndex) -> Result<Option<GraphInfo>, StoreError> {
    let path = snapshot_path(dir, generation, "graph");
    let tmp = snapshot_path(dir, generation, "graph.tmp");
    match ann.save(&tmp) {
        Ok(()) => {}
        Err(AnnError::Unsupported(_)) => return Ok(None),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e.into());
        }
    }
    let (crc32, bytes) = (|| {
        File::open(&tmp)?.sync_all()?;
        let sum = file_crc32(&tmp)?;
        fs::rename(&tmp, &path)?;
        wal::sync_dir(dir)?;
        Ok(sum)
    })()
    .map_err(io_at(&path))?;
    Ok(Some(GraphInfo { backend: ann.backend(), hnsw: ann.params(), nodes: ann.len(), bytes, crc32 }))
}

/// Loads the saved graph of `info` if it fits, or says why not.
fn read_graph(
    path: &Path,
    info: GraphInfo,
    params: HnswParams,
    backend: Backend,
    docs: usize,
) -> Result<Box<dyn AnnIndex>, String> {
    let shape = |p: HnswParams| (p.m, p.ef_construction, p.precision);
    if info.backend != backend || shape(info.hnsw) != shape(params) {
        let (m, efc, precision) = shape(info.hnsw);
        return Err(format!(
            "saved by {} (M {m}, efConstruction {efc}, {}), serving {backend} (M {}, efConstruction {}, {})",
            info.backend,
            precision.name(),
            params.m,
            params.ef_construction,
            params.precision.name()
        ));
    }
    if info.nodes != docs {
        return Err(format!("{} nodes for {docs} documents", info.nodes));
    }
    let (crc32, bytes) = file_crc32(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if (crc32, bytes) != (info.crc32, info.bytes) {
        return Err(format!(
            "{}: checksum {crc32:08x} over {bytes} bytes, the manifest says {:08x} over {}",
            path.display(),
            info.crc32,
            info.bytes
        ));
    }
    ann::load(backend, params, DIMENSION, docs, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Gives a freshly loaded snapshot its graph: the saved one when it is sound, else one built
/// from the stored vectors, which is then saved for the next start.
fn open_graph(dir: &Path, manifest: &mut Manifest, table: &mut Table) -> Result<Option<GraphSource>, StoreError> {
    let Some(snap) = manifest.snapshot else { return Ok(None) };
    let (params, backend) = (manifest.hnsw, manifest.ann);
    let path = snapshot_path(dir, snap.generation, "graph");
    let why = match snap.graph {
        None => "no saved graph".to_owned(),
        Some(info) => match read_graph(&path, info, params, backend, snap.docs) {
            Ok(index) => {
                table.ann = index;
                return Ok(Some(GraphSource::Loaded));
            }
            Err(why) => {
                tracing::warn!(reason = %why, "the saved ANN graph is not used; rebuilding it from the stored vectors");
                why
            }
        },
    };
    let started = std::time::Instant::now();
    table.rebuild_graph(params, backend)?;
    tracing::info!(nodes = table.ann.len(), %backend, elapsed_ms = started.elapsed().as_millis() as u64, "ANN graph built");
    let graph = if backend.persists() {
        write_graph(dir, snap.generation, table.ann()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not save the ANN graph; it will be rebuilt on the next start");
            None
        })
    } else {
        let _ = fs::remove_file(&path);
        None
    };
    if let Some(s) = manifest.snapshot.as_mut() {
        s.graph = graph;
    }
    Ok(Some(GraphSource::Rebuilt(why)))
}

fn load_snapshot(dir: &Path, info: SnapshotInfo, table: &mut Table) -> Result<(), StoreError> {
    let docs_path = snapshot_path(dir, info.generation, "jsonl");
    let vec_path = snapshot_path(dir, info.generation, "f32");
    let bytes = fs::read(&vec_path).map_err(io_at(&vec_path))?;
    if bytes.len() != info.docs * DIMENSION * 4 {
        return Err(StoreError::Incompatible {
            path: vec_path,
            detail: format!("{} bytes, expected {} documents × {DIMENSION} × 4", bytes.len(), info.docs),
        });
    }
    let vectors = wal::f32s(&bytes);
    drop(bytes);
    let file = File::open(&docs_path).map_err(io_at(&docs_path))?;
    let mut docs = Vec::with_capacity(info.docs);
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_at(&docs_path))?;
        let doc: StoredDoc = serde_json::from_str(&line).map_err(|e| StoreError::Incompatible {
            path: docs_path.clone(),
            detail: format!("line {}: {e}", i + 1),
        })?;
        docs.push(doc);
    }
    if docs.len() != info.docs {
        return Err(StoreError::Incompatible {
            path: docs_path,
            detail: format!("{} documents, the manifest says {}", docs.len(), info.docs),
        });
    }
    table.docs.reserve(info.docs);
    table.vectors.reserve_exact(info.docs * DIMENSION);
    for (n, doc) in docs.into_iter().enumerate() {
        table.apply(Op::Upsert(doc, vectors[n * DIMENSION..(n + 1) * DIMENSION].to_vec()));
    }
    Ok(())
}

/// The document a corpus or `index/add` document becomes.
pub fn stored(id: String, text: String, meta: rcp_protocol::Meta, origin: Origin) -> StoredDoc {
    StoredDoc { id, text, meta, origin }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcp_protocol::Meta;
    use serde_json::json;

    fn unit(seed: usize) -> Vec<f32> {
        crate::testutil::random_unit(1, DIMENSION, seed as u64)
    }

    fn doc(id: &str, year: i64) -> (StoredDoc, Vec<f32>) {
        let meta: Meta = json!({"year": year}).as_object().cloned().unwrap();
        (stored(id.into(), format!("body {id}"), meta, Origin::Client), unit(id.len() * 7 + year as usize))
    }

    fn ids(store: &Store) -> Vec<String> {
        let t = store.read();
        let mut v: Vec<String> = t.by_id.keys().cloned().collect();
        v.sort();
        v
    }

    #[test]
    fn persistence_round_trip_with_wal_and_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions::default();
        {
            let m8 = StoreOptions { hnsw: HnswOverride { m: Some(8), ..Default::default() }, ..opts };
            let (s, report) = Store::open(dir.path(), m8).unwrap();
            assert_eq!(report, OpenReport::default());
            s.upsert(vec![doc("a", 2000), doc("b", 2001)]).unwrap();
            s.snapshot().unwrap();
            s.upsert(vec![doc("c", 2002)]).unwrap();
            assert_eq!(s.delete(vec!["a".into(), "zz".into()]).unwrap(), 1);
            assert_eq!(s.delete(vec!["a".into()]).unwrap(), 0);
        }
        let (s, report) = Store::open(dir.path(), opts).unwrap();
        assert!(Store::open(dir.path(), opts).unwrap_err().to_string().contains("in use"));
        assert_eq!(s.read().params().m, 8, "HNSW parameters persist in the manifest");
        assert_eq!(report.snapshot_docs, 2);
        assert_eq!(report.replayed, 2);
        assert_eq!(ids(&s), vec!["b", "c"]);
        let t = s.read();
        assert_eq!(t.get("c").unwrap().meta["year"], 2002);
        let slot = t.by_id["c"];
        assert_eq!(t.vector(slot), unit(7 + 2002).as_slice());
    }

    #[test]
    fn a_new_snapshot_removes_every_older_generation_including_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.upsert(vec![doc("a", 2000)]).unwrap();
        s.snapshot().unwrap();
        // A crash between writing a generation and switching the manifest leaves it orphaned.
        for ext in ["jsonl", "f32"] {
            fs::write(snapshot_path(dir.path(), 7, ext), b"orphan").unwrap();
        }
        s.upsert(vec![doc("b", 2001)]).unwrap();
        s.snapshot().unwrap();
        let current = s.writer.lock().unwrap().manifest.snapshot.unwrap().generation;
        assert_eq!(generations(dir.path()), vec![current]);
    }

    #[test]
    fn a_lost_manifest_is_refused_and_rebuilt_from_the_newest_complete_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, _) = Store::open(dir.path(), StoreOptions::default()).unwrap();
            s.upsert(vec![doc("a", 2000), doc("b", 2001)]).unwrap();
            s.snapshot().unwrap();
            s.upsert(vec![doc("c", 2002)]).unwrap();
            s.delete(vec!["a".into()]).unwrap();
        }
        // A newer, incomplete generation must be skipped, not trusted.
        fs::write(snapshot_path(dir.path(), 9, "jsonl"), b"{}\n").unwrap();
        fs::remove_file(dir.path().join(MANIFEST)).unwrap();
        let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err().to_string();
        assert!(err.contains("manifest.json") && err.contains("missing") && err.contains("repair"), "{err}");
        assert!(!dir.path().join(MANIFEST).exists());

        let repair = rebuild_manifest(dir.path(), |docs| {
            assert_eq!(docs.len(), 2);
            BTreeMap::from([("year".to_owned(), FieldType::Int)])
        })
        .unwrap();
        assert_eq!((repair.docs, repair.skipped.len()), (2, 1));
        assert!(rebuild_manifest(dir.path(), |_| BTreeMap::new()).is_err(), "never replaces a manifest");
        let (s, report) = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(report.snapshot_docs, 2);
        assert_eq!(ids(&s), vec!["b", "c"], "snapshot plus the replayed log");
        assert_eq!(s.fields().get("year"), Some(&FieldType::Int));
    }

    #[test]
    fn upsert_replaces_and_compaction_drops_tombstones() {
        let opts = StoreOptions { full_scan_threshold: 0, ..StoreOptions::default() };
        let s = Store::in_memory(opts);
        let batch: Vec<_> = (0..200).map(|i| doc(&format!("d{i}"), 1900 + i)).collect();
        s.upsert(batch).unwrap();
        // Re-adding replaces: one live copy, the old slot is a tombstone.
        s.upsert(vec![doc("d5", 3000)]).unwrap();
        {
            let t = s.read();
            assert_eq!(t.live(), 200);
            assert_eq!(t.tombstones(), 1);
            assert_eq!(t.get("d5").unwrap().meta["year"], 3000);
            let (hits, _) = t.search(&unit(2 * 7 + 3000), 200, 64, None, 0);
            assert_eq!(hits.len(), 200, "over-fetch meets want despite the tombstone");
            assert_eq!(hits.iter().filter(|h| t.doc(h.slot).unwrap().id == "d5").count(), 1);
        }
        let gone: Vec<String> = (0..100).map(|i| format!("d{i}")).collect();
        assert_eq!(s.delete(gone).unwrap(), 100);
        let t = s.read();
        assert_eq!(t.live(), 100);
        assert_eq!(t.tombstones(), 0, "compacted once tombstones passed a quarter of the slots");
        assert_eq!(t.ann.len(), 100);
    }

    #[test]
    fn graph_is_saved_loaded_checked_and_extended_by_the_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { full_scan_threshold: 0, ..StoreOptions::default() };
        let find = |s: &Store, id: &str| {
            let t = s.read();
            let q = t.vector(t.by_id[id]).to_vec();
            let (hits, path) = t.search(&q, 1, 16, None, 0);
            assert!(matches!(path, SearchPath::Hnsw { .. }), "{path:?}");
            t.doc(hits[0].slot).unwrap().id.clone()
        };
        {
            let (s, _) = Store::open(dir.path(), opts).unwrap();
            s.upsert((0..300).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
            s.snapshot().unwrap();
            s.upsert(vec![doc("tail", 5000)]).unwrap();
        }
        let graph = snapshot_path(dir.path(), 1, "graph");
        assert!(graph.exists());
        {
            let (s, report) = Store::open(dir.path(), opts).unwrap();
            assert_eq!(report.graph, Some(GraphSource::Loaded));
            assert_eq!(report.replayed, 1);
            assert_eq!(s.read().ann.len(), 301, "the log tail is inserted into the loaded graph");
            assert_eq!(find(&s, "tail"), "tail");
            assert_eq!(find(&s, "d42"), "d42");
        }
        // A corrupt graph is never served: it is rebuilt from the vectors and saved again.
        let mut bytes = fs::read(&graph).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        fs::write(&graph, bytes).unwrap();
        {
            let (s, report) = Store::open(dir.path(), opts).unwrap();
            match report.graph {
                Some(GraphSource::Rebuilt(why)) => assert!(why.contains("checksum"), "{why}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(find(&s, "d42"), "d42");
        }
        let (_, report) = Store::open(dir.path(), opts).unwrap();
        assert_eq!(report.graph, Some(GraphSource::Loaded));
    }

    #[test]
    fn another_backend_rebuilds_the_graph() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { full_scan_threshold: 0, ..StoreOptions::default() };
        {
            let (s, _) = Store::open(dir.path(), opts).unwrap();
            s.upsert((0..50).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
            s.snapshot().unwrap();
        }
        let hnsw_rs = StoreOptions { ann: Some(Backend::HnswRs), ..opts };
        {
            let (s, report) = Store::open(dir.path(), hnsw_rs).unwrap();
            assert!(matches!(report.graph, Some(GraphSource::Rebuilt(ref why)) if why.contains("saved by rcp-hnsw")));
            assert_eq!(s.read().backend(), Backend::HnswRs);
            assert_eq!(s.read().ann.len(), 50);
        }
        // The backend persists in the manifest; hnsw_rs saves no graph.
        let (s, report) = Store::open(dir.path(), opts).unwrap();
        assert_eq!(s.read().backend(), Backend::HnswRs);
        assert!(matches!(report.graph, Some(GraphSource::Rebuilt(ref why)) if why == "no saved graph"));
    }

    #[test]
    fn selective_filter_falls_back_to_exact() {
        let opts = StoreOptions { full_scan_threshold: 0, ..StoreOptions::default() };
        let s = Store::in_memory(opts);
        s.upsert((0..300).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
        let t = s.read();
        let f = Filter::parse(&json!({"field": "year", "op": "in", "value": [7, 250]})).unwrap();
        let (hits, _) = t.search(&unit(3), 10, 16, Some(&f), 0);
        let mut got: Vec<i64> = hits.iter().map(|h| t.doc(h.slot).unwrap().meta["year"].as_i64().unwrap()).collect();
        got.sort();
        assert_eq!(got, vec![7, 250]);
    }
}
