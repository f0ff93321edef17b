//! The saved ANN graph of a generation (`snapshot-NNNNNN.graph`, its CRC-32 in the manifest):
//! saved when the backend can, loaded only when it fits the snapshot and passes its checksum,
//! otherwise rebuilt from the stored vectors and saved again.

use std::fs::{self, File};
use std::path::Path;

use rcp_hnsw::Mapped;

use crate::ann::{self, AnnError, AnnIndex, Backend, HnswParams, RcpHnswIndex};
use crate::wal;
use rcp_embedder::model::DIMENSION;

use super::durable::file_crc32;
use super::error::{StoreError, io_at};
use super::layout::snapshot_path;
use super::manifest::{GraphInfo, Manifest};
use super::table::Table;

/// Where the graph over the snapshot came from on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphSource {
    /// Loaded from `snapshot-NNNNNN.graph`.
    Loaded,
    /// Built from the stored vectors, for this reason (no saved graph, another backend or
    /// parameters, a failed checksum, ...).
    Rebuilt(String),
}

/// Saves the graph of generation `generation` through a temporary file, fsync and rename;
/// `None` when the backend cannot save it.
pub(super) fn write_graph(dir: &Path, generation: u64, ann: &dyn AnnIndex) -> Result<Option<GraphInfo>, StoreError> {
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
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let mismatch = |crc32: u32, bytes: u64| {
        format!(
            "{}: checksum {crc32:08x} over {bytes} bytes, the manifest says {:08x} over {}",
            path.display(),
            info.crc32,
            info.bytes
        )
    };
    if backend == Backend::RcpHnsw {
        // One read of the file: mapped (its length checked first), summed, then parsed.
        let map = Mapped::open(path, info.bytes, true).map_err(|e| at(&e))?;
        let crc32 = crc32fast::hash(map.bytes());
        if crc32 != info.crc32 {
            return Err(mismatch(crc32, info.bytes));
        }
        let index = RcpHnswIndex::from_bytes(params, DIMENSION, map.bytes()).map_err(|e| at(&e))?;
        if index.len() != docs {
            return Err(format!("{}: {} nodes, expected {docs}", path.display(), index.len()));
        }
        return Ok(Box::new(index));
    }
    let (crc32, bytes) = file_crc32(path).map_err(|e| at(&e))?;
    if (crc32, bytes) != (info.crc32, info.bytes) {
        return Err(mismatch(crc32, bytes));
    }
    ann::load(backend, params, DIMENSION, docs, path).map_err(|e| at(&e))
}

/// Gives a freshly loaded snapshot its graph: the saved one when it is sound, else one built
/// from the stored vectors, which is then saved for the next start.
pub(super) fn open_graph(
    dir: &Path,
    manifest: &mut Manifest,
    table: &mut Table,
) -> Result<Option<GraphSource>, StoreError> {
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
