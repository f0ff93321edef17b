//! The write-ahead log of `index/add` and `index/delete` (§7.10, §7.11): every acknowledged
//! write is in the log, fsynced, before the answer leaves the engine.
//!
//! A record is `[len: u32 LE][crc32(payload): u32 LE][payload]`. The payload is
//! `[seq: u64 LE][op: u8][json_len: u32 LE][json][vector: dim × f32 LE]` (the vector only for
//! an upsert). Replay stops at the first record that is short or fails its checksum — a write
//! torn by a crash, which was never acknowledged — and the file is cut back to the last good
//! record so later appends are readable.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rcp_protocol::Meta;
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

/// What replay found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Good records in order, with their sequence numbers.
    pub records: Vec<(u64, Op)>,
    /// Bytes of torn or corrupted tail that were cut off.
    pub truncated: u64,
}

impl Wal {
    /// Opens (creating) the log at `path`, replays it for vectors of `dim` components, and cuts
    /// off a torn tail.
    pub fn open(path: &Path, dim: usize) -> io::Result<(Self, Replay)> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
        let total = file.metadata()?.len();
        file.seek(SeekFrom::Start(0))?;
        let mut replay = Replay::default();
        let mut good = 0u64;
        let mut reader = BufReader::with_capacity(1 << 20, &mut file);
        while let Some((record, size)) = read_record(&mut reader, total - good)? {
            match decode(&record, dim) {
                Some(op) => replay.records.push(op),
                None => break,
            }
            good += size;
        }
        drop(reader);
        if good < total {
            replay.truncated = total - good;
            file.set_len(good)?;
            file.sync_all()?;
        }
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        Ok((Self { file, path: path.to_path_buf(), len: good }, replay))
    }

    /// Appends records (not yet durable: call [`Wal::sync`] before acknowledging).
    pub fn append(&mut self, records: &[(u64, &Op)]) -> io::Result<()> {
        let mut buf = Vec::new();
        for (seq, op) in records {
            let payload = encode(*seq, op);
            buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            buf.extend_from_slice(&payload);
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

/// Reads one framed record; `None` at a clean end, a short frame or a bad checksum.
fn read_record(r: &mut impl Read, remaining: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
    if remaining < 8 {
        return Ok(None);
    }
    let mut head = [0u8; 8];
    if read_full(r, &mut head)? < 8 {
        return Ok(None);
    }
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_RECORD || u64::from(len) > remaining - 8 {
        return Ok(None);
    }
    let mut payload = vec![0u8; len as usize];
    if read_full(r, &mut payload)? < payload.len() || crc32fast::hash(&payload) != crc {
        return Ok(None);
    }
    Ok(Some((payload, 8 + u64::from(len))))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
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
}
