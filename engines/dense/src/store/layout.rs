//! Where each file of a data directory lives: the manifest, the log, the lock and the snapshot
//! generations (`snapshot-NNNNNN.{docs,f32,graph,postings}`).

use std::fs;
use std::path::{Path, PathBuf};

/// The manifest's file name.
pub(super) const MANIFEST: &str = "manifest.json";
/// The write-ahead log's file name.
pub(super) const WAL: &str = "wal.log";
/// The lock file held for the store's lifetime (one process per data directory).
pub(super) const LOCK: &str = ".lock";

/// The extensions of a snapshot generation's files: documents (`docs`, or `jsonl` in older
/// snapshots), vectors, graph, metadata postings.
pub(super) const SNAPSHOT_EXTENSIONS: [&str; 5] = ["docs", "jsonl", "f32", "graph", "postings"];

/// The file of generation `generation` with extension `ext`.
pub(super) fn snapshot_path(dir: &Path, generation: u64, ext: &str) -> PathBuf {
    dir.join(format!("snapshot-{generation:06}.{ext}"))
}

/// The snapshot generations with at least one file in `dir`, ascending.
pub(super) fn generations(dir: &Path) -> Vec<u64> {
    let mut found: Vec<u64> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name();
                    let name = name.to_str()?;
                    let rest = name.strip_prefix("snapshot-")?;
                    let (number, ext) = rest.split_once('.')?;
                    SNAPSHOT_EXTENSIONS.contains(&ext).then(|| number.parse::<u64>().ok())?
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found.dedup();
    found
}
