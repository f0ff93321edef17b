//! The append-only signal log: one JSON record per line, each made durable (`fsync`) before the
//! call that wrote it is acknowledged.
//!
//! A crash can leave only the last line torn (it was never acknowledged): opening the log for
//! writing cuts it off and says so. Any other line that does not parse is damage, and opening
//! fails rather than serve less than was acknowledged. Compaction replaces the log with one
//! snapshot record, written to a temporary file, synced, then renamed over the log.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::ledger::Record;

/// The log's file name inside the feedback directory.
const LOG_FILE: &str = "signals.log";
/// The compaction's temporary file name.
const COMPACT_FILE: &str = "signals.log.compact";

/// An open log, locked for this process's exclusive writing.
#[derive(Debug)]
pub(super) struct Log {
    dir: PathBuf,
    file: File,
    len: u64,
}

/// The records of a log and the length of its whole lines.
pub(super) struct Contents {
    pub records: Vec<Record>,
    /// Bytes up to the end of the last whole line.
    pub whole: u64,
    /// Bytes after it: a torn last line, never acknowledged.
    pub torn: u64,
}

fn data_error(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads the log in `dir` (empty when absent), without changing it.
pub(super) fn read(dir: &Path) -> io::Result<Contents> {
    let path = dir.join(LOG_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    for (n, line) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let record = serde_json::from_slice(line)
            .map_err(|e| data_error(format!("{}: line {} is damaged ({e})", path.display(), n + 1)))?;
        records.push(record);
    }
    Ok(Contents { records, whole: whole as u64, torn: (bytes.len() - whole) as u64 })
}

impl Log {
    /// Opens (creating) the log in `dir` for appending, locked against a second writer, and
    /// returns it with its records. A torn last line is cut off, with a warning.
    pub(super) fn open(dir: &Path) -> io::Result<(Self, Vec<Record>)> {
        fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let file = OpenOptions::new().create(true).read(true).append(true).open(&path)?;
        file.try_lock().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is in use by another process (a running server?)", path.display()),
            )
        })?;
        let contents = read(dir)?;
        if contents.torn > 0 {
            tracing::warn!(
                log = %path.display(),
                bytes = contents.torn,
                "feedback log: cutting off a torn last line (a write that was never acknowledged)"
            );
            file.set_len(contents.whole)?;
            file.sync_all()?;
        }
        Ok((Self { dir: dir.to_owned(), file, len: contents.whole }, contents.records))
    }

    /// The log's size in bytes.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The size `record` would add.
    pub(super) fn line(record: &Record) -> io::Result<Vec<u8>> {
        let mut line = serde_json::to_vec(record).map_err(|e| data_error(e.to_string()))?;
        line.push(b'\n');
        Ok(line)
    }

    /// Appends `line` (from [`Log::line`]) and syncs it to disk.
    pub(super) fn append(&mut self, line: &[u8]) -> io::Result<()> {
        self.file.write_all(line)?;
        self.file.sync_data()?;
        self.len += line.len() as u64;
        Ok(())
    }

    /// Replaces the whole log with `snapshot`, atomically: a crash leaves the old log or the new.
    pub(super) fn compact(&mut self, snapshot: &Record) -> io::Result<()> {
        let line = Self::line(snapshot)?;
        let tmp = self.dir.join(COMPACT_FILE);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&line)?;
            f.sync_all()?;
        }
        let path = self.dir.join(LOG_FILE);
        fs::rename(&tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        let file = OpenOptions::new().read(true).append(true).open(&path)?;
        file.try_lock().map_err(|e| io::Error::other(format!("relocking {}: {e}", path.display())))?;
        self.file = file;
        self.len = line.len() as u64;
        Ok(())
    }
}
