//! A data directory that lost its manifest, or whose manifest is unreadable: refused on open
//! (serving it empty would lose acknowledged writes), and repaired on request from the newest
//! complete snapshot. An unreadable manifest is set aside (`manifest.json.corrupt-<secs>`),
//! never overwritten; one written for another format or model is refused, not repaired.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use rcp_wire::filter::FieldType;

use crate::ann::{Backend, HnswParams};
use crate::wal::StoredDoc;

use super::error::{StoreError, io_at};
use super::generation::read_generation;
use super::layout::{MANIFEST, WAL, generations};
use super::manifest::{Manifest, SnapshotInfo};

/// A data directory without `manifest.json` is new only when it holds no snapshot and no
/// logged write; otherwise the manifest was lost and opening it empty would serve less data.
pub(super) fn refuse_orphaned_data(dir: &Path, manifest_path: &Path) -> Result<(), StoreError> {
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

/// What [`repair_manifest`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestOutcome {
    /// The manifest is readable and servable; nothing was changed.
    Intact,
    /// There was none; a new one was written.
    Rebuilt(ManifestRepair),
    /// It was unreadable (the reason); it was renamed to `set_aside` and a new one written.
    Replaced {
        /// Why it could not be read.
        reason: String,
        /// Where the unreadable file now is.
        set_aside: std::path::PathBuf,
        /// The new manifest.
        repair: ManifestRepair,
    },
}

/// Repairs the manifest of `dir` (call with the directory's [`super::DirLock`] held): a
/// missing one is rebuilt ([`rebuild_manifest`]); an unreadable one is set aside and rebuilt;
/// a readable one written by another format or model, or one that cannot be read at all
/// (permissions), is an error and nothing is changed.
pub fn repair_manifest(
    dir: &Path,
    fields: impl FnOnce(&[StoredDoc]) -> BTreeMap<String, FieldType>,
) -> Result<ManifestOutcome, StoreError> {
    let path = dir.join(MANIFEST);
    match Manifest::read(&path) {
        Ok(Some(manifest)) => {
            manifest.check_servable(&path)?;
            Ok(ManifestOutcome::Intact)
        }
        Ok(None) => rebuild_manifest(dir, fields).map(ManifestOutcome::Rebuilt),
        Err(StoreError::Damaged { detail, .. }) => {
            let reason = detail.split(". Nothing was changed").next().unwrap_or(&detail).to_owned();
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let set_aside = dir.join(format!("{MANIFEST}.corrupt-{stamp}"));
            fs::rename(&path, &set_aside).map_err(io_at(&path))?;
            let repair = rebuild_manifest(dir, fields)?;
            Ok(ManifestOutcome::Replaced { reason, set_aside, repair })
        }
        Err(other) => Err(other),
    }
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
    manifest.snapshot = repair.generation.map(|generation| SnapshotInfo {
        generation,
        docs: repair.docs,
        seq: 0,
        graph: None,
        vectors_crc32: None,
    });
    manifest.write(dir)?;
    Ok(repair)
}
