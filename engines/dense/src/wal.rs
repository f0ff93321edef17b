//! The write-ahead log of `index/add` and `index/delete` (§7.10, §7.11): every acknowledged
//! write is in the log, fsynced, before the answer leaves the engine.
//!
//! A record is `[len: u32 LE][crc32(payload): u32 LE][payload]`. The payload is
//! `[seq: u64 LE][op: u8][json_len: u32 LE][json][vector: dim × f32 LE]` (the vector only for
//! an upsert).
//!
//! Replay distinguishes a crash from damage. Only a torn *final* record — a write a crash cut
//! short, which was never acknowledged — is cut off. A bad record followed by any readable
//! record, a record that passes its checksum but does not decode, or a zero-filled file is
//! corruption: opening fails with [`WalError::Corrupt`] naming the file and byte offset and
//! leaves the file untouched. [`salvage`] (behind `rcp-dense repair`) keeps every record that
//! verifies, reports what it dropped, and keeps the original as a backup.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rcp_wire::Meta;
use serde::{Deserialize, Serialize};

/// Where a document came from, which decides its `trust.level` (§15.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Loaded by the operator from a corpus file (`rcp-dense index`): `trusted`.
    Corpus,
    /// Written by a client through `index/add`: `community`.
    Client,
}

impl Origin {
    /// The `trust.level` of documents of this origin.
    pub fn trust_level(self) -> &'static str {
        match self {
            Origin::Corpus => "trusted",
            Origin::Client => "community",
        }
    }
}

/// A stored document (without its vector).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDoc {
    /// The document id.
    pub id: String,
    /// The body.
    pub text: String,
    /// Metadata (filterable fields, `title`).
    #[serde(default, skip_serializing_if = "Meta::is_empty")]
    pub meta: Meta,
    /// Provenance.
    pub origin: Origin,
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Insert or replace a document.
    Upsert(StoredDoc, Vec<f32>),
    /// Delete documents by id.
    Delete(Vec<String>),
}

const OP_UPSERT: u8 = 1;
const OP_DELETE: u8 = 2;
/// Largest record accepted on replay; anything larger is corruption.
const MAX_RECORD: u32 = 256 << 20;

/// An append-only log file.
#[derive(Debug)]
pub struct Wal {
    file: File,
    path: PathBuf,
    len: u64,
}

/// Why a log could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// Reading or writing the file failed.
    #[error("write-ahead log {}: {source}", path.display())]
    Io {
        /// The log file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The log is damaged in a way a crash cannot explain.
    #[error(
        "write-ahead log {} is corrupt at byte {offset}: {reason}; {after} bytes follow it, \
         {later} of them in readable records that would be lost. Nothing was changed. Run \
         `rcp-dense repair --data-dir <DIR>` to keep what verifies (the original is backed up)",
        path.display()
    )]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// Offset of the first bad record.
        offset: u64,
        /// What is wrong there.
        reason: String,
        /// Bytes from the bad record to the end of the file.
        after: u64,
        /// Bytes of verifiable records after the bad one.
        later: u64,
    },
}

/// What replay found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Good records in order, with their sequence numbers.
    pub records: Vec<(u64, Op)>,
    /// Bytes of torn or corrupted tail that were cut off.
    pub truncated: u64,
}

impl Wal {
    /// Opens (creating) the log at `path` and replays it for vectors of `dim` components.
    ///
    /// A torn final record is cut off (reported in [`Replay::truncated`]); any other damage is
    /// [`WalError::Corrupt`] and the file is left as it is.
    pub fn open(path: &Path, dim: usize) -> Result<(Self, Replay), WalError> {
        let io = |source| WalError::Io { path: path.to_path_buf(), source };
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path).map_err(io)?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.read_to_end(&mut bytes).map_err(io)?;
        let scan = scan(&bytes, dim);
        let total = bytes.len() as u64;
        let mut replay = Replay { records: scan.records, truncated: 0 };
        if let Some(bad) = scan.first_bad {
            let later: u64 = scan.later.iter().map(|r| r.1 - r.0).sum();
            if !bad.torn || later > 0 {
                return Err(WalError::Corrupt {
                    path: path.to_path_buf(),
                    offset: bad.offset,
                    reason: bad.reason,
                    after: total - bad.offset,
                    later,
                });
            }
            replay.truncated = total - bad.offset;
            file.set_len(bad.offset).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        if let Some(dir) = path.parent() {
            sync_dir(dir).map_err(io)?;
        }
        let len = total - replay.truncated;
        Ok((Self { file, path: path.to_path_buf(), len }, replay))
    }

    /// Appends records (not yet durable: call [`Wal::sync`] before acknowledging).
    pub fn append(&mut self, records: &[(u64, &Op)]) -> io::Result<()> {
        let mut buf = Vec::new();
        for (seq, op) in records {
            frame_into(&mut buf, *seq, op);
        }
        self.file.write_all(&buf)?;
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Empties the log (after a snapshot made its records redundant).
    pub fn truncate(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_all()?;
        self.len = 0;
        Ok(())
    }

    /// Current size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The first record that failed, and why.
#[derive(Debug)]
struct Bad {
    offset: u64,
    reason: String,
    /// Whether a crash can explain it: the record runs past the end of the file (a write cut
    /// short) or it is the last thing in the file and fails its checksum.
    torn: bool,
}

/// A whole scan of a log's bytes.
#[derive(Debug, Default)]
struct Scan {
    /// Good records before the first bad one.
    records: Vec<(u64, Op)>,
    first_bad: Option<Bad>,
    /// Byte ranges `[start, end)` of records that verify after the first bad one.
    later: Vec<(u64, u64)>,
    /// Those records, decoded.
    later_records: Vec<(u64, Op)>,
}

enum Frame {
    /// A record that verifies and decodes, with its size.
    Good((u64, Op), u64),
    /// Damage at this position.
    Bad(String, bool),
}

/// Reads the record framed at the start of `b`.
fn frame(b: &[u8], dim: usize) -> Frame {
    if b.len() < 8 {
        return Frame::Bad(format!("a record header cut short ({} of 8 bytes)", b.len()), true);
    }
    let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let crc = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if len > MAX_RECORD {
        return Frame::Bad(format!("a record length of {len} bytes (the limit is {MAX_RECORD})"), false);
    }
    let end = 8 + len as usize;
    let Some(payload) = b.get(8..end) else {
        return Frame::Bad(format!("a record of {len} bytes cut short at {} bytes", b.len() - 8), true);
    };
    if crc32fast::hash(payload) != crc {
        // Only the file's last record can be a write a crash interrupted.
        return Frame::Bad("a checksum mismatch".to_owned(), end == b.len());
    }
    match decode(payload, dim) {
        Some(op) => Frame::Good(op, end as u64),
        None => Frame::Bad("a record that passes its checksum but does not decode".to_owned(), false),
    }
}

/// Scans every record; after the first bad one, looks for records that still verify (every
/// later byte offset is tried, so damage in a length field cannot hide what follows).
fn scan(bytes: &[u8], dim: usize) -> Scan {
    let mut out = Scan::default();
    let mut at = 0usize;
    while at < bytes.len() {
        match frame(&bytes[at..], dim) {
            Frame::Good(op, size) => {
                if out.first_bad.is_none() {
                    out.records.push(op);
                } else {
                    out.later.push((at as u64, at as u64 + size));
                    out.later_records.push(op);
                }
                at += size as usize;
            }
            Frame::Bad(reason, torn) => {
                if out.first_bad.is_none() {
                    out.first_bad = Some(Bad { offset: at as u64, reason, torn });
                }
                at += 1;
            }
        }
    }
    out
}

/// What [`salvage`] kept and dropped.
#[derive(Debug, Default, PartialEq)]
pub struct Salvage {
    /// Records kept, in log order.
    pub kept: usize,
    /// Sequence numbers of the kept records (first, last), if any.
    pub seq_range: Option<(u64, u64)>,
    /// Bytes that belonged to no verifiable record and were dropped.
    pub dropped_bytes: u64,
    /// Byte ranges `[start, end)` that were dropped.
    pub dropped: Vec<(u64, u64)>,
    /// Where the original file was copied before it was rewritten (`None` when it was intact).
    pub backup: Option<PathBuf>,
}

/// Rewrites the log at `path` with every record that verifies (before and after any damage),
/// after copying the original to `<path>.bak-<unix seconds>`. An intact log is left alone.
pub fn salvage(path: &Path, dim: usize) -> io::Result<Salvage> {
    let bytes = std::fs::read(path)?;
    let scan = scan(&bytes, dim);
    let mut kept: Vec<(u64, Op)> = scan.records;
    let good_prefix: u64 = scan.first_bad.as_ref().map_or(bytes.len() as u64, |b| b.offset);
    let mut covered = vec![(0, good_prefix)];
    covered.extend(scan.later.iter().copied());
    kept.extend(scan.later_records);
    let mut report = Salvage { kept: kept.len(), ..Salvage::default() };
    report.seq_range = kept.first().zip(kept.last()).map(|(a, b)| (a.0, b.0));
    let mut at = 0;
    for (start, end) in covered {
        if start > at {
            report.dropped.push((at, start));
        }
        at = at.max(end);
    }
    if (at as usize) < bytes.len() {
        report.dropped.push((at, bytes.len() as u64));
    }
    report.dropped_bytes = report.dropped.iter().map(|(a, b)| b - a).sum();
    if report.dropped.is_empty() {
        return Ok(report);
    }
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let name = path.file_name().map_or_else(|| "wal.log".into(), |n| n.to_string_lossy().into_owned());
    let backup = path.with_file_name(format!("{name}.bak-{stamp}"));
    std::fs::copy(path, &backup)?;
    let tmp = path.with_file_name(format!("{name}.repair-tmp"));
    {
        let mut f = File::create(&tmp)?;
        let mut buf = Vec::new();
        for (seq, op) in &kept {
            frame_into(&mut buf, *seq, op);
        }
        f.write_all(&buf)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    report.backup = Some(backup);
    Ok(report)
}

/// Appends one framed record (`len`, `crc`, payload) to `buf`.
fn frame_into(buf: &mut Vec<u8>, seq: u64, op: &Op) {
    let payload = encode(seq, op);
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    buf.extend_from_slice(&payload);
}

fn encode(seq: u64, op: &Op) -> Vec<u8> {
    let (code, json, vector): (u8, Vec<u8>, &[f32]) = match op {
        Op::Upsert(doc, v) => (OP_UPSERT, serde_json::to_vec(doc).unwrap_or_default(), v),
        Op::Delete(ids) => (OP_DELETE, serde_json::to_vec(ids).unwrap_or_default(), &[]),
    };
    let mut out = Vec::with_capacity(13 + json.len() + vector.len() * 4);
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(code);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

fn decode(p: &[u8], dim: usize) -> Option<(u64, Op)> {
    let seq = u64::from_le_bytes(p.get(0..8)?.try_into().ok()?);
    let code = *p.get(8)?;
    let json_len = u32::from_le_bytes(p.get(9..13)?.try_into().ok()?) as usize;
    let json = p.get(13..13 + json_len)?;
    let rest = p.get(13 + json_len..)?;
    match code {
        OP_UPSERT => {
            let doc: StoredDoc = serde_json::from_slice(json).ok()?;
            if rest.len() != dim * 4 {
                return None;
            }
            Some((seq, Op::Upsert(doc, f32s(rest))))
        }
        OP_DELETE if rest.is_empty() => Some((seq, Op::Delete(serde_json::from_slice(json).ok()?))),
        _ => None,
    }
}

/// Little-endian `f32`s of a byte slice (trailing bytes ignored).
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// fsyncs a directory so renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str) -> StoredDoc {
        StoredDoc { id: id.into(), text: format!("text of {id}"), meta: Meta::new(), origin: Origin::Client }
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (mut wal, replay) = Wal::open(&path, 3).unwrap();
        assert!(replay.records.is_empty());
        let a = Op::Upsert(doc("a"), vec![1.0, 0.0, 0.0]);
        let d = Op::Delete(vec!["x".into()]);
        wal.append(&[(1, &a), (2, &d)]).unwrap();
        wal.sync().unwrap();
        let good = wal.len();
        let b = Op::Upsert(doc("b"), vec![0.0, 1.0, 0.0]);
        wal.append(&[(3, &b)]).unwrap();
        drop(wal);
        // Tear the last record: drop its final byte.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        let full = f.metadata().unwrap().len();
        f.set_len(full - 1).unwrap();
        let (wal, replay) = Wal::open(&path, 3).unwrap();
        assert_eq!(replay.records, vec![(1, a.clone()), (2, d.clone())]);
        assert_eq!(replay.truncated, full - 1 - good);
        assert_eq!(wal.len(), good);
        drop(wal);
        // A flipped bit in the payload is caught by the checksum.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let (_, replay) = Wal::open(&path, 3).unwrap();
        assert_eq!(replay.records, vec![(1, a)]);
    }

    fn four_records(path: &Path) -> Vec<(u64, Op)> {
        let (mut wal, _) = Wal::open(path, 3).unwrap();
        let ops: Vec<(u64, Op)> =
            (1..=4).map(|i| (i, Op::Upsert(doc(&format!("d{i}")), vec![i as f32, 0.0, 1.0]))).collect();
        let refs: Vec<(u64, &Op)> = ops.iter().map(|(s, o)| (*s, o)).collect();
        wal.append(&refs).unwrap();
        wal.sync().unwrap();
        ops
    }

    fn corrupt_offset(e: WalError) -> u64 {
        match e {
            WalError::Corrupt { offset, .. } => offset,
            other => panic!("expected corruption, got {other}"),
        }
    }

    #[test]
    fn a_flipped_byte_before_good_records_is_refused_and_the_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let ops = four_records(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 4 + 20; // inside the second record's payload
        bytes[at] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let err = Wal::open(&path, 3).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("wal.log") && msg.contains("repair"), "{msg}");
        assert!(corrupt_offset(err) > 0);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the log was modified");
        // repair keeps the three records that verify and backs up the original
        let report = salvage(&path, 3).unwrap();
        assert_eq!(report.kept, 3);
        assert_eq!(report.dropped.len(), 1);
        let backup = report.backup.clone().unwrap();
        assert_eq!(std::fs::read(&backup).unwrap(), bytes);
        let (_, replay) = Wal::open(&path, 3).unwrap();
        assert_eq!(replay.records, vec![ops[0].clone(), ops[2].clone(), ops[3].clone()]);
        // a second repair finds nothing to do
        assert_eq!(salvage(&path, 3).unwrap().dropped_bytes, 0);
    }

    #[test]
    fn a_damaged_length_field_cannot_hide_the_records_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        four_records(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.len() / 4;
        bytes[second + 3] = 0x7f; // the second record now claims ~2 GB
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(corrupt_offset(Wal::open(&path, 3).unwrap_err()), second as u64);
    }

    #[test]
    fn a_zero_filled_log_is_corruption_not_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        four_records(&path);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        std::fs::write(&path, vec![0u8; len]).unwrap();
        assert_eq!(corrupt_offset(Wal::open(&path, 3).unwrap_err()), 0);
        assert_eq!(std::fs::read(&path).unwrap().len(), len);
    }

    #[test]
    fn a_write_cut_short_at_the_end_is_still_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let ops = four_records(&path);
        let full = std::fs::metadata(&path).unwrap().len();
        for cut in [1u64, 7, 9, 30] {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(full - cut).unwrap();
            drop(f);
            let (wal, replay) = Wal::open(&path, 3).unwrap();
            assert_eq!(replay.records, ops[..3].to_vec(), "cut {cut}");
            drop(wal);
            // put the last record back for the next cut
            let (mut wal, _) = Wal::open(&path, 3).unwrap();
            wal.append(&[(4, &ops[3].1)]).unwrap();
            wal.sync().unwrap();
        }
    }
}
