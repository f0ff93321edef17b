//! Scratch directories and sibling binaries for the benchmarks that drive engine processes.

use std::path::{Path, PathBuf};

/// Copies the directory tree `from` into `to`, leaving out lock files (so a copy of a served
/// index can be opened by another process).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if !entry.file_name().to_string_lossy().ends_with(".lock") {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// A binary named `name` beside the running executable (`target/<profile>/name`).
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join(name))).unwrap_or_else(|| PathBuf::from(name))
}

/// Removes its directory when dropped.
#[derive(Debug)]
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
