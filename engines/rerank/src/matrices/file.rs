//! The matrix file: a header naming the model, then one record per stored matrix, appended.
//!
//! ```text
//! header  "RCP-COLBERT-MATRICES 1\n" · u16 model-name length · model name (UTF-8)
//! record  u32 payload length · u32 CRC-32 of the payload · payload
//! payload 16-byte key · u32 rows · rows × f32 scale · rows × 384 i8 codes
//! ```
//!
//! Integers and floats are little-endian. One process holds the file at a time (an exclusive
//! lock, taken at opening: a second opener is refused, so no two writers interleave records).
//! Opening walks the records' headers — each record's length must agree with its row count —
//! and checks the CRC of the last one; the first record that is cut short or inconsistent ends
//! the file: it and what follows are cut off and the bytes dropped are reported (the matrices
//! are derived from the documents' texts, so what was cut is encoded again when next needed,
//! never served damaged). Every record's CRC and key are checked when it is read, so damage
//! inside the file is found then, and that one matrix is encoded again. Opening a large file
//! thus reads 28 bytes a record, not the whole file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::float::{DIMENSION, DOCUMENT_LENGTH};
use super::quantised::QuantisedMatrix;
use super::{Key, MatrixStoreError};

const MAGIC: &[u8] = b"RCP-COLBERT-MATRICES 1\n";

/// The largest payload a record may declare: a document matrix has at most
/// [`DOCUMENT_LENGTH`] rows.
const MAX_PAYLOAD: usize = 20 + DOCUMENT_LENGTH * (4 + DIMENSION);

/// Where a record sits: its payload's offset and length, and its CRC.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    offset: u64,
    len: u32,
    crc: u32,
}

impl Slot {
    /// Token rows of the matrix it holds.
    pub(super) fn rows(&self) -> usize {
        (self.len as usize).saturating_sub(20) / (4 + DIMENSION)
    }
}

/// The open file: positioned reads need no lock; appends take `end`'s.
#[derive(Debug)]
pub(super) struct MatrixFile {
    path: PathBuf,
    file: File,
    /// Where the next record goes: the end of the last whole record.
    end: Mutex<u64>,
}

/// What opening found: the records, and the bytes of a damaged tail cut off.
#[derive(Debug)]
pub(super) struct Scan {
    pub(super) records: Vec<(Key, Slot)>,
    pub(super) dropped: u64,
}

impl MatrixFile {
    /// Opens (or creates) the file at `path` for `model`, holding its lock; a file of another
    /// model, or not a matrix file, or one another process holds, is refused.
    pub(super) fn open(path: &Path, model: &str) -> Result<(Self, Scan), MatrixStoreError> {
        let io = |e| MatrixStoreError::Io { path: path.to_owned(), source: e };
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(io)?;
        if file.try_lock().is_err() {
            return Err(MatrixStoreError::Held { path: path.to_owned() });
        }
        let header = header(model);
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            file.write_all(&header).map_err(io)?;
            file.sync_all().map_err(io)?;
            let end = Mutex::new(header.len() as u64);
            return Ok((Self { path: path.to_owned(), file, end }, Scan { records: Vec::new(), dropped: 0 }));
        }
        let mut found = vec![0; header.len().min(len as usize)];
        read_at(&file, &mut found, 0).map_err(io)?;
        if found != header {
            return Err(MatrixStoreError::Foreign { path: path.to_owned(), model: model.to_owned() });
        }
        let mut records = Vec::new();
        let mut at = header.len() as u64;
        let mut head = [0; 28];
        while at + 28 <= len {
            if read_at(&file, &mut head, at).is_err() {
                break;
            }
            let Some((slot, key)) = record_head(&head, at) else { break };
            if slot.offset + u64::from(slot.len) > len {
                break;
            }
            records.push((key, slot));
            at = slot.offset + u64::from(slot.len);
        }
        // A torn write can only be the last record: check its bytes whole.
        let last_intact = match records.last() {
            Some((key, slot)) => read_slot(&file, *slot, key).map_err(io)?.is_some(),
            None => true,
        };
        if !last_intact && let Some((_, slot)) = records.pop() {
            at = slot.offset - 8;
        }
        let dropped = len - at;
        if dropped > 0 {
            file.set_len(at).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        Ok((Self { path: path.to_owned(), file, end: Mutex::new(at) }, Scan { records, dropped }))
    }

    /// Appends `matrix` under `key`; where it was written.
    pub(super) fn append(&self, key: &Key, matrix: &QuantisedMatrix) -> Result<Slot, MatrixStoreError> {
        let payload = payload(key, matrix);
        let crc = crc32fast::hash(&payload);
        let mut record = Vec::with_capacity(8 + payload.len());
        record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        record.extend_from_slice(&crc.to_le_bytes());
        record.extend_from_slice(&payload);
        let mut end = self.end.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = (&self.file).write_all(&record) {
            // A partial record would end the file at the next open: cut it now, and take the
            // end from the file itself whatever happened.
            let _ = self.file.set_len(*end);
            if let Ok(m) = self.file.metadata() {
                *end = m.len();
            }
            return Err(MatrixStoreError::Io { path: self.path.clone(), source: e });
        }
        let slot = Slot { offset: *end + 8, len: payload.len() as u32, crc };
        *end += record.len() as u64;
        Ok(slot)
    }

    /// Flushes appended records to the disk.
    pub(super) fn sync(&self) -> Result<(), MatrixStoreError> {
        self.file.sync_data().map_err(|e| MatrixStoreError::Io { path: self.path.clone(), source: e })
    }

    /// The matrix in `slot` stored under `key`, or `None` when its bytes no longer pass their
    /// check.
    pub(super) fn read(&self, slot: Slot, key: &Key) -> Result<Option<QuantisedMatrix>, MatrixStoreError> {
        read_slot(&self.file, slot, key).map_err(|e| MatrixStoreError::Io { path: self.path.clone(), source: e })
    }
}

/// The matrix in `slot` if its CRC, key and shape check.
fn read_slot(file: &File, slot: Slot, key: &Key) -> std::io::Result<Option<QuantisedMatrix>> {
    let mut payload = vec![0; slot.len as usize];
    read_at(file, &mut payload, slot.offset)?;
    if crc32fast::hash(&payload) != slot.crc {
        return Ok(None);
    }
    Ok(decode(&payload).filter(|(k, _)| k == key).map(|(_, m)| m))
}

/// A record's slot and key from its first 28 bytes (at `at`), or `None` when its length and
/// row count disagree.
fn record_head(head: &[u8; 28], at: u64) -> Option<(Slot, Key)> {
    let len = u32::from_le_bytes(head[..4].try_into().ok()?);
    let crc = u32::from_le_bytes(head[4..8].try_into().ok()?);
    let key: Key = head[8..24].try_into().ok()?;
    let rows = u32::from_le_bytes(head[24..28].try_into().ok()?) as usize;
    let fits = (len as usize) <= MAX_PAYLOAD && len as usize == 20 + rows * (4 + DIMENSION);
    fits.then_some((Slot { offset: at + 8, len, crc }, key))
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

fn header(model: &str) -> Vec<u8> {
    let name = &model.as_bytes()[..model.len().min(u16::MAX as usize)];
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&(name.len() as u16).to_le_bytes());
    h.extend_from_slice(name);
    h
}

fn payload(key: &Key, matrix: &QuantisedMatrix) -> Vec<u8> {
    let mut p = Vec::with_capacity(20 + matrix.bytes());
    p.extend_from_slice(key);
    p.extend_from_slice(&(matrix.len() as u32).to_le_bytes());
    for s in matrix.scales() {
        p.extend_from_slice(&s.to_le_bytes());
    }
    p.extend(matrix.codes().iter().map(|&c| c as u8));
    p
}

fn decode(payload: &[u8]) -> Option<(Key, QuantisedMatrix)> {
    let key: Key = payload.get(..16)?.try_into().ok()?;
    let rows = u32::from_le_bytes(payload.get(16..20)?.try_into().ok()?) as usize;
    if rows > DOCUMENT_LENGTH || payload.len() != 20 + rows * (4 + DIMENSION) {
        return None;
    }
    let (scales, codes) = payload[20..].split_at(rows * 4);
    let scales = scales.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let codes = codes.iter().map(|&b| b as i8).collect();
    Some((key, QuantisedMatrix::from_parts(scales, codes)?))
}
