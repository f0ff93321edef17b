//! `manifest.json`: the model and dimension the vectors come from, the typed filter fields,
//! the HNSW parameters and backend, and the current snapshot generation.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use rcp_wire::filter::FieldType;
use serde::{Deserialize, Serialize};

use crate::ann::{Backend, HnswParams};
use rcp_embedder::model::{DIMENSION, IDENTITY};

use super::durable::write_durably;
use super::error::StoreError;
use super::layout::MANIFEST;

/// The on-disk format version this engine writes.
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
    /// CRC-32 of its `.f32` vector table, checked before the table is mapped (absent in
    /// snapshots written before it was recorded: their length alone is checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors_crc32: Option<u32>,
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
    /// A manifest for an empty store of this engine's model.
    pub(super) fn new(hnsw: HnswParams, ann: Backend) -> Self {
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

    /// Reads the manifest at `path`; `None` when there is none.
    pub(super) fn read(path: &Path) -> Result<Option<Self>, StoreError> {
        match fs::read(path) {
            Ok(bytes) => serde_json::from_slice::<Manifest>(&bytes).map(Some).map_err(|e| StoreError::Damaged {
                path: path.to_path_buf(),
                detail: format!(
                    "unreadable ({e}). Nothing was changed. Run `rcp-dense repair --data-dir {}` to set it aside \
                     and rebuild it from the newest complete snapshot (the write-ahead log is then replayed)",
                    path.parent().map_or_else(|| ".".into(), |d| d.display().to_string())
                ),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: path.to_path_buf(), source: e }),
        }
    }

    /// Refuses a manifest written by another format, model or dimension (`path` names it).
    pub(super) fn check_servable(&self, path: &Path) -> Result<(), StoreError> {
        if self.format != FORMAT || self.identity != IDENTITY || self.dimension != DIMENSION {
            return Err(StoreError::Incompatible {
                path: path.to_path_buf(),
                detail: format!(
                    "index built by format {} with model '{}' ({} dims); this engine writes format {FORMAT} with \
                     '{IDENTITY}' ({DIMENSION} dims): re-index the corpus into a new --data-dir",
                    self.format, self.identity, self.dimension
                ),
            });
        }
        Ok(())
    }

    /// Writes it durably as `dir/manifest.json`, replacing the previous one atomically.
    pub(super) fn write(&self, dir: &Path) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        write_durably(&dir.join(MANIFEST), |f| f.write_all(&bytes))
    }
}
