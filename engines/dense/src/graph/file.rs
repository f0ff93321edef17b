//! `docgraph.rcpg`: read whole and checked by [`rcp_graph::persist`], written through a
//! temporary file, fsync and rename, so a crash leaves the old file or the new one (the
//! memory file is written the same way).

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use rcp_graph::DocGraph;

/// Most bytes a graph file may have before it is refused unread (far above 2^24 nodes ×
/// 64 edges, the bound of what the engine writes).
const MAX_BYTES: u64 = 16 << 30;

/// The graph in `path`, or why it cannot be used (missing, unreadable, damaged).
pub(super) fn load(path: &Path) -> Result<DocGraph, String> {
    let len = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err("no saved graph".into()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if len > MAX_BYTES {
        return Err(format!("{}: {len} bytes, more than a graph file may hold", path.display()));
    }
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    rcp_graph::persist::decode(&bytes).map(|(g, _)| g).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path` atomically (through `path` + `.tmp`).
pub(crate) fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) => crate::wal::sync_dir(dir),
            None => Ok(()),
        }
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}
