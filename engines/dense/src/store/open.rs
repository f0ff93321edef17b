//! Opening a data directory: take its lock, read and check the manifest, load the snapshot (its
//! vectors mapped, their checksum verified on a second thread meanwhile) and its graph, replay
//! the log tail and index it.

use std::fs;
use std::path::Path;

use crate::ann::{Backend, HnswParams};
use crate::wal::Wal;
use rcp_embedder::model::DIMENSION;

use super::error::{StoreError, io_at};
use super::generation::{check_vectors, load_snapshot};
use super::graph::{GraphSource, open_graph};
use super::layout::{MANIFEST, WAL};
use super::lock::DirLock;
use super::manifest::Manifest;
use super::options::StoreOptions;
use super::repair::refuse_orphaned_data;
use super::table::Table;
use super::writer::Writer;

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

/// Opens (creating) the data directory `dir`: snapshot, then log replay, then the graph. The
/// manifest is written back with the parameters and backend `options` chose.
pub(super) fn open(dir: &Path, options: StoreOptions) -> Result<(Table, Writer, OpenReport), StoreError> {
    fs::create_dir_all(dir).map_err(io_at(dir))?;
    let lock = DirLock::acquire(dir)?;
    let manifest_path = dir.join(MANIFEST);
    let mut manifest = match Manifest::read(&manifest_path)? {
        Some(manifest) => manifest,
        None => {
            refuse_orphaned_data(dir, &manifest_path)?;
            Manifest::new(HnswParams::default(), Backend::default())
        }
    };
    manifest.check_servable(&manifest_path)?;
    manifest.hnsw = options.hnsw.apply(manifest.hnsw);
    manifest.ann = options.ann.unwrap_or(manifest.ann);
    if !manifest.ann.available() {
        return Err(StoreError::Incompatible {
            path: manifest_path.clone(),
            detail: format!(
                "the graph is built with {}, which this build of rcp-dense lacks (its `{}` feature): \
                 build with it, or pass --ann rcp-hnsw to rebuild the graph from the stored vectors",
                manifest.ann,
                manifest.ann.name()
            ),
        });
    }
    let (params, backend) = (manifest.hnsw, manifest.ann);
    let mut table = Table::new(DIMENSION, params, backend, &manifest.fields);
    let mut report = OpenReport::default();
    let mut last_seq = 0;
    if let Some(snap) = manifest.snapshot {
        // The vector table's checksum is read beside the documents and the graph; nothing is
        // served before all three are in and checked.
        std::thread::scope(|scope| {
            let checked = scope.spawn(|| check_vectors(dir, snap));
            let loaded = load_snapshot(dir, snap, &mut table).and_then(|()| match options.defer_graph {
                true => Ok(None),
                false => open_graph(dir, &mut manifest, &mut table),
            });
            let checked = checked.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            report.graph = loaded?;
            checked
        })?;
        report.snapshot_docs = snap.docs;
        last_seq = snap.seq;
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
    let writer = Writer::on_disk(lock, dir.to_path_buf(), wal, manifest, max_seq + 1);
    writer.write_manifest()?;
    Ok((table, writer, report))
}
