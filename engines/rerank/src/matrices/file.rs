//! The matrix file: a header naming the model, then one record per stored matrix, appended.
//!
//! ```text
//! header  "RCP-COLBERT-MATRICES 1\n" · u16 model-name length · model name (UTF-8)
//! record  u32 payload length · u32 CRC-32 of the payload · payload
//! payload 16-byte key · u32 rows · rows × f32 scale · rows × 384 i8 codes
//! ```
//!
//! Integers and floats are little-endian. Opening reads every record's header and checks its
//! CRC; the first record that is cut short or fails its check ends the file: it and what
//! follows are cut off (the matrices are derived from the documents' texts, so what was cut
//! is encoded again when next needed — never served damaged) and the bytes dropped are
//! reported. A record read later is checked again.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::colbert::{DIMENSION, DOCUMENT_LENGTH};

use super::quantised::QuantisedMatrix;
use super::{Key, MatrixStoreError};

const MAGIC: &[u8] = b"RCP-COLBERT-MATRICES 1\n";

/// The largest payload a record may declare: a document matrix has at most
/// [`DOCUMENT_LENGTH`] rows.
const MAX_PAYLOAD: usize = 16 + 4 + DOCUMENT_LENGTH * (4 + DIMENSION);

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

/// The open file, appended to under the store's lock.
#[derive(Debug)]
pub(super) struct MatrixFile {
    path: PathBuf,
    file: File,
    end: u64,
}

/// What opening found: the records, and the bytes of a damaged tail cut off.
#[derive(Debug)]
pub(super) struct Scan {
    pub(super) records: Vec<(Key, Slot, usize)>,
    pub(super) dropped: u64,
}

impl MatrixFile {
    /// Opens (or creates) the file at `path` for `model`; a file of another model, or not a
    /// matrix file, is refused.
    pub(super) fn open(path: &Path, model: &str) -> Result<(Self, Scan), MatrixStoreError> {
        let io = |e| MatrixStoreError::Io { path: path.to_owned(), source: e };
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(io)?;
        let header = header(model);
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            file.write_all(&header).map_err(io)?;
            file.sync_all().map_err(io)?;
            let end = header.len() as u64;
            return Ok((Self { path: path.to_owned(), file, end }, Scan { records: Vec::new(), dropped: 0 }));
        }
        let mut reader = BufReader::new(&file);
        let mut found = vec![0; header.len().min(len as usize)];
        reader.read_exact(&mut found).map_err(io)?;
        if found != header {
            return Err(MatrixStoreError::Foreign { path: path.to_owned(), model: model.to_owned() });
        }
        let mut records = Vec::new();
        let mut at = header.len() as u64;
        let mut payload = Vec::new();
        while at < len {
            match read_record(&mut reader, &mut payload) {
                Some((crc, key, rows)) => {
                    let slot = Slot { offset: at + 8, len: payload.len() as u32, crc };
                    records.push((key, slot, rows));
                    at += 8 + payload.len() as u64;
                }
                None => break,
            }
        }
        drop(reader);
        let dropped = len - at;
        if dropped > 0 {
            file.set_len(at).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok((Self { path: path.to_owned(), file, end: at }, Scan { records, dropped }))
    }

    /// Appends `matrix` under `key`; where it was written.
    pub(super) fn append(&mut self, key: &Key, matrix: &QuantisedMatrix) -> Result<Slot, MatrixStoreError> {
        let payload = payload(key, matrix);
        let crc = crc32fast::hash(&payload);
        let mut record = Vec::with_capacity(8 + payload.len());
        record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        record.extend_from_slice(&crc.to_le_bytes());
        record.extend_from_slice(&payload);
        if let Err(e) = self.file.write_all(&record) {
            // A partial record would end the file at the next open; cut it now.
            let _ = self.file.set_len(self.end);
            return Err(MatrixStoreError::Io { path: self.path.clone(), source: e });
        }
        let slot = Slot { offset: self.end + 8, len: payload.len() as u32, crc };
        self.end += record.len() as u64;
        Ok(slot)
    }

    /// Flushes appended records to the disk.
    pub(super) fn sync(&self) -> Result<(), MatrixStoreError> {
        self.file.sync_data().map_err(|e| MatrixStoreError::Io { path: self.path.clone(), source: e })
    }

    /// The matrix in `slot`, or `None` when its bytes no longer pass their check.
    pub(super) fn read(&self, slot: Slot) -> Result<Option<QuantisedMatrix>, MatrixStoreError> {
        let mut payload = vec![0; slot.len as usize];
        read_at(&self.file, &mut payload, slot.offset)
            .map_err(|e| MatrixStoreError::Io { path: self.path.clone(), source: e })?;
        if crc32fast::hash(&payload) != slot.crc {
            return Ok(None);
        }
        Ok(decode(&payload).map(|(_, m)| m))
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    // Positioned reads elsewhere go through a clone of the handle.
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}

fn header(model: &str) -> Vec<u8> {
    let name = model.as_bytes();
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&(name.len().min(u16::MAX as usize) as u16).to_le_bytes());
    h.extend_from_slice(&name[..name.len().min(u16::MAX as usize)]);
    h
}

/// One record from `reader` into `payload`: its CRC, key and rows, or `None` when it is cut
/// short, too long, or fails its check.
fn read_record(reader: &mut impl Read, payload: &mut Vec<u8>) -> Option<(u32, Key, usize)> {
    let mut head = [0; 8];
    reader.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().ok()?);
    if len > MAX_PAYLOAD {
        return None;
    }
    payload.resize(len, 0);
    reader.read_exact(payload).ok()?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let (key, matrix) = decode(payload)?;
    Some((crc, key, matrix.len()))
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
