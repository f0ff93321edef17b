//! `memory.rcpm`, the live index's memory beside the graph: `RCPMEMRY`, a version, the index
//! version it describes, its level, then each entry (community id, size, centroid, key terms,
//! representative ids, member ids) and a CRC-32 of everything before it. Decoding checks every length
//! against the bytes present, so a damaged file is refused whole, never half-read; it is
//! written through a temporary file, fsync and rename like the graph file.

use std::path::Path;

use super::digest::{Digest, Entry, MAX_ENTRIES};

/// The first bytes of a memory file.
pub const MAGIC: &[u8; 8] = b"RCPMEMRY";
/// The format version this engine writes and reads.
pub const VERSION: u32 = 2;
/// Most bytes a memory file may have before it is refused unread (far above
/// [`MAX_ENTRIES`] entries of 384 dimensions with their terms and ids).
const MAX_BYTES: u64 = 256 << 20;

/// Encodes a memory.
pub fn encode(d: &Digest) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&d.stamp.to_le_bytes());
    out.extend_from_slice(&d.level.to_le_bytes());
    put_len(&mut out, d.entries.len());
    for e in &d.entries {
        put_str(&mut out, &e.community);
        out.extend_from_slice(&e.size.to_le_bytes());
        put_len(&mut out, e.centroid.len());
        for x in &e.centroid {
            out.extend_from_slice(&x.to_le_bytes());
        }
        for list in [&e.terms, &e.representatives, &e.members] {
            put_len(&mut out, list.len());
            for s in list {
                put_str(&mut out, s);
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Decodes a memory file, or says why it cannot be used.
pub fn decode(bytes: &[u8]) -> Result<Digest, String> {
    if bytes.len() < MAGIC.len() + 8 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a memory file (bad magic)".into());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let mut r = Reader { bytes: body, at: MAGIC.len() };
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!("memory file version {version}, expected {VERSION}"));
    }
    if crc32fast::hash(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err("memory file checksum mismatch".into());
    }
    let stamp = r.u64()?;
    let level = r.u32()?;
    let n = r.len()?;
    if n > MAX_ENTRIES {
        return Err(format!("memory file holds {n} entries, more than {MAX_ENTRIES}"));
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let community = r.str()?;
        let size = r.u32()?;
        let dim = r.len()?;
        let centroid: Vec<f32> = r
            .take(dim.checked_mul(4).ok_or("centroid length overflows")?)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if centroid.iter().any(|x| !x.is_finite()) {
            return Err(format!("memory file inconsistent: community {community} has a non-finite centroid"));
        }
        let terms = r.strs()?;
        let representatives = r.strs()?;
        let members = r.strs()?;
        entries.push(Entry { community, size, centroid, terms, representatives, members });
    }
    if r.at != body.len() {
        return Err(format!("memory file has {} bytes after its entries", body.len() - r.at));
    }
    Ok(Digest { stamp, level, entries })
}

/// A bounds-checked cursor over the file's body.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("memory file truncated")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from(self.u32()?) | (u64::from(self.u32()?) << 32))
    }

    /// A count, refused when even one byte per item would run past the end.
    fn len(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.bytes.len() - self.at {
            return Err("memory file truncated".into());
        }
        Ok(n)
    }

    fn str(&mut self) -> Result<String, String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "memory file inconsistent: a string is not UTF-8".into())
    }

    fn strs(&mut self) -> Result<Vec<String>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.str()).collect()
    }
}

/// The memory in `path`: `Ok(None)` when there is no file, `Err` when it cannot be used.
pub fn load(path: &Path) -> Result<Option<Digest>, String> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if len > MAX_BYTES {
        return Err(format!("{}: {len} bytes, more than a memory file may hold", path.display()));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    decode(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the memory to `path` atomically.
pub fn save(path: &Path, d: &Digest) -> std::io::Result<()> {
    crate::graph::file::save(path, &encode(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Digest {
        Digest {
            stamp: 42,
            level: 1,
            entries: vec![Entry {
                community: "L1C0".into(),
                size: 7,
                centroid: vec![0.6, -0.8],
                terms: vec!["wing".into(), "lift".into()],
                representatives: vec!["d1".into(), "d2".into()],
                members: vec!["d1".into(), "d2".into(), "d3".into()],
            }],
        }
    }

    #[test]
    fn round_trips_and_refuses_any_damage() {
        let bytes = encode(&sample());
        assert_eq!(decode(&bytes), Ok(sample()));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad).is_err(), "a flipped bit at byte {i} was read");
        }
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "a file cut at {cut} was read");
        }
    }
}
