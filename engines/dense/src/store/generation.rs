//! A snapshot generation on disk: `snapshot-NNNNNN.docs` (the documents in slot order, see
//! [`super::docs`]; `.jsonl`, one JSON document per line, in snapshots written before it) and `snapshot-NNNNNN.f32` (their vectors, a flat little-endian `f32` table of
//! `docs × dimension`, its CRC-32 in the manifest). Written, loaded (the vectors mapped in
//! place, see [`super::vectors`]), checked for repair, and removed once superseded.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use rcp_hnsw::Mapped;

use crate::wal::StoredDoc;
use rcp_embedder::model::DIMENSION;

use super::docs::{read_docs, write_docs};
use super::durable::{file_crc32, write_durably};
use super::error::{StoreError, io_at};
use super::layout::{SNAPSHOT_EXTENSIONS, generations, snapshot_path};
use super::manifest::SnapshotInfo;
use super::postings::MetaIndex;
use super::table::Table;
use super::vectors::Vectors;

/// Writes the live documents of `table` and their vectors as generation `info.generation`;
/// returns the CRC-32 of the vector table.
pub(super) fn write_snapshot(dir: &Path, info: SnapshotInfo, table: &Table) -> Result<u32, StoreError> {
    let live = || table.docs.iter().enumerate().filter_map(|(s, d)| d.as_ref().map(|d| (s, d)));
    write_durably(&snapshot_path(dir, info.generation, "docs"), |f| {
        write_docs(f, table.live(), live().map(|(_, d)| d))
    })?;
    // The table is compacted (slots `0..live`), so its postings name the snapshot's slots.
    write_durably(&snapshot_path(dir, info.generation, "postings"), |f| table.meta.write_to(f))?;
    let mut crc = crc32fast::Hasher::new();
    write_durably(&snapshot_path(dir, info.generation, "f32"), |f| {
        let mut row = Vec::with_capacity(DIMENSION * 4);
        for (slot, _) in live() {
            row.clear();
            row.extend(table.vector(slot).iter().flat_map(|x| x.to_le_bytes()));
            crc.update(&row);
            f.write_all(&row)?;
        }
        Ok(())
    })?;
    Ok(crc.finalize())
}

/// Maps the vector table of generation `info` after checking its length (its checksum is
/// [`check_vectors`]'s).
pub(super) fn map_vectors(dir: &Path, info: SnapshotInfo) -> Result<Vectors, StoreError> {
    let path = snapshot_path(dir, info.generation, "f32");
    let expected = (info.docs * DIMENSION * 4) as u64;
    match Mapped::open(&path, expected, false) {
        Ok(map) => Ok(Vectors::mapped(DIMENSION, map)),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(StoreError::Damaged {
            path: path.clone(),
            detail: format!(
                "{e} ({} documents × {DIMENSION} × 4): the vector table is truncated or damaged and is not served",
                info.docs
            ),
        }),
        Err(e) => Err(StoreError::Io { path, source: e }),
    }
}

/// Checks the vector table of generation `info` against the CRC-32 the manifest records
/// (read through the file, not the map, so its pages do not count as the server's memory).
pub(super) fn check_vectors(dir: &Path, info: SnapshotInfo) -> Result<(), StoreError> {
    let Some(want) = info.vectors_crc32 else { return Ok(()) };
    let path = snapshot_path(dir, info.generation, "f32");
    let (crc, bytes) = file_crc32(&path).map_err(io_at(&path))?;
    if crc != want {
        return Err(StoreError::Damaged {
            path,
            detail: format!(
                "checksum {crc:08x} over {bytes} bytes, the manifest says {want:08x}: the vector table is damaged \
                 and is not served (restore the data directory from a backup, or re-index the corpus)"
            ),
        });
    }
    Ok(())
}

/// Loads generation `info` into an empty `table`: its vectors mapped (length checked; the
/// caller runs [`check_vectors`]), its documents read (the graph comes after).
pub(super) fn load_snapshot(dir: &Path, info: SnapshotInfo, table: &mut Table) -> Result<(), StoreError> {
    let vectors = map_vectors(dir, info)?;
    let (docs_path, docs) = read_documents(dir, info.generation);
    let docs = docs.map_err(|e| match e {
        DocsError::Io(source) => StoreError::Io { path: docs_path.clone(), source },
        DocsError::Bad(detail) => StoreError::Damaged {
            detail: format!("{detail}: the snapshot's documents are damaged and are not served"),
            path: docs_path.clone(),
        },
    })?;
    if docs.len() != info.docs {
        return Err(StoreError::Incompatible {
            path: docs_path,
            detail: format!("{} documents, the manifest says {}", docs.len(), info.docs),
        });
    }
    table.docs.reserve(info.docs);
    table.by_id.reserve(info.docs, &table.docs);
    table.vectors = vectors;
    let postings_path = snapshot_path(dir, info.generation, "postings");
    let saved = fs::read(&postings_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| MetaIndex::read_from(&bytes, table.meta.declared(), info.docs));
    let indexed = match saved {
        Ok(meta) => {
            table.meta = meta;
            true
        }
        Err(why) => {
            tracing::info!(path = %postings_path.display(), reason = %why, "rebuilding the metadata postings from the documents");
            false
        }
    };
    for doc in docs {
        table.place(doc, !indexed);
    }
    Ok(())
}

/// Why a generation's documents could not be read.
enum DocsError {
    /// The file could not be read.
    Io(io::Error),
    /// It was read and is damaged (the reason).
    Bad(String),
}

/// The documents of generation `generation` and the file they come from: `.docs`, or the JSON
/// lines of a snapshot written before that format (`.jsonl`).
fn read_documents(dir: &Path, generation: u64) -> (std::path::PathBuf, Result<Vec<StoredDoc>, DocsError>) {
    let binary = snapshot_path(dir, generation, "docs");
    match fs::read(&binary) {
        Ok(bytes) => {
            let docs = read_docs(&bytes).map_err(DocsError::Bad);
            (binary, docs)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let lines = snapshot_path(dir, generation, "jsonl");
            let docs = read_lines(&lines);
            (lines, docs)
        }
        Err(e) => (binary, Err(DocsError::Io(e))),
    }
}

/// Documents as JSON lines.
fn read_lines(path: &Path) -> Result<Vec<StoredDoc>, DocsError> {
    let file = File::open(path).map_err(DocsError::Io)?;
    let mut docs = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(DocsError::Io)?;
        let doc: StoredDoc = serde_json::from_str(&line).map_err(|e| DocsError::Bad(format!("line {}: {e}", i + 1)))?;
        docs.push(doc);
    }
    Ok(docs)
}

/// The documents of one snapshot generation, if its two files are present and agree.
pub(super) fn read_generation(dir: &Path, generation: u64) -> Result<Vec<StoredDoc>, String> {
    let vec_path = snapshot_path(dir, generation, "f32");
    let vec_bytes = fs::metadata(&vec_path).map_err(|e| format!("{}: {e}", vec_path.display()))?.len();
    let (docs_path, docs) = read_documents(dir, generation);
    let docs = docs.map_err(|e| match e {
        DocsError::Io(e) => format!("{}: {e}", docs_path.display()),
        DocsError::Bad(why) => format!("{}: {why}", docs_path.display()),
    })?;
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
        for ext in SNAPSHOT_EXTENSIONS {
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
