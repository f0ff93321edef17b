//! Durable file writes (temporary file, fsync, rename, fsync of the directory) and the
//! checksum that guards a saved graph.

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::Path;

use crate::wal;

use super::error::{StoreError, io_at};

/// Writes `path` through a temporary file, fsyncs it, renames it into place and fsyncs the
/// directory.
pub(super) fn write_durably(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), StoreError> {
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

/// CRC-32 and length of a file, read in 1 MiB blocks.
pub(super) fn file_crc32(path: &Path) -> io::Result<(u32, u64)> {
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
