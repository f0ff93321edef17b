//! A snapshot generation on disk: `snapshot-NNNNNN.jsonl` (the documents, one per line, in slot
//! order) and `snapshot-NNNNNN.f32` (their vectors, a flat little-endian `f32` table of
//! `docs × dimension`). Written, loaded, checked for repair, and removed once superseded.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use crate::wal::{self, Op, StoredDoc};
use rcp_embedder::model::DIMENSION;

use super::durable::write_durably;
use super::error::{StoreError, io_at};
use super::layout::{generations, snapshot_path};
use super::manifest::SnapshotInfo;
use super::table::Table;

/// Writes the live documents of `table` and their vectors as generation `info.generation`.
pub(super) fn write_snapshot(dir: &Path, info: SnapshotInfo, table: &Table) -> Result<(), StoreError> {
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

/// Loads generation `info` into an empty `table` (documents only: the graph comes after).
pub(super) fn load_snapshot(dir: &Path, info: SnapshotInfo, table: &mut Table) -> Result<(), StoreError> {
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

/// The documents of one snapshot generation, if its two files are present and agree.
pub(super) fn read_generation(dir: &Path, generation: u64) -> Result<Vec<StoredDoc>, String> {
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

/// Removes the files of every snapshot generation but `keep` (and temporary files a crash
/// left behind while writing one).
pub(super) fn remove_generations_except(dir: &Path, keep: u64) {
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
