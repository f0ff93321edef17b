//! A snapshot's documents, `snapshot-NNNNNN.docs`: a compact binary file read in one pass on
//! open (ids and bodies are copied out as they are, only non-empty metadata is parsed as JSON),
//! with its own checksum, so a damaged file is refused, never served as fewer documents.
//!
//! ```text
//! magic "RCPDOCS1" | documents u64
//! per document: origin u8 (0 corpus, 1 client) | id len u32 | text len u32 | meta len u32
//!               | id | text | meta (a JSON object; empty when there is none)
//! crc32 u32 of every byte before it
//! ```
//!
//! All integers little-endian. Snapshots written before this format hold their documents as
//! JSON lines (`snapshot-NNNNNN.jsonl`), which are still read.

use std::io::{self, Write};

use rcp_wire::Meta;

use crate::wal::{Origin, StoredDoc};

const MAGIC: &[u8; 8] = b"RCPDOCS1";

/// Writes `docs` (`count` of them) to `out`.
pub(super) fn write_docs<'a>(
    out: &mut impl Write,
    count: usize,
    docs: impl Iterator<Item = &'a StoredDoc>,
) -> io::Result<()> {
    let mut crc = crc32fast::Hasher::new();
    let mut put = |bytes: &[u8]| -> io::Result<()> {
        crc.update(bytes);
        out.write_all(bytes)
    };
    put(MAGIC)?;
    put(&(count as u64).to_le_bytes())?;
    let mut written = 0usize;
    let mut meta = Vec::new();
    for doc in docs {
        meta.clear();
        if !doc.meta.is_empty() {
            serde_json::to_writer(&mut meta, &doc.meta)?;
        }
        let origin = match doc.origin {
            Origin::Corpus => 0u8,
            Origin::Client => 1,
        };
        put(&[origin])?;
        for len in [doc.id.len(), doc.text.len(), meta.len()] {
            let len = u32::try_from(len).map_err(|_| io::Error::other("a document part of 4 GiB or more"))?;
            put(&len.to_le_bytes())?;
        }
        put(doc.id.as_bytes())?;
        put(doc.text.as_bytes())?;
        put(&meta)?;
        written += 1;
    }
    if written != count {
        return Err(io::Error::other(format!("{written} documents written, {count} announced")));
    }
    let sum = crc.finalize();
    out.write_all(&sum.to_le_bytes())
}

/// The documents of a file written by [`write_docs`], or what is wrong with it.
pub(super) fn read_docs(bytes: &[u8]) -> Result<Vec<StoredDoc>, String> {
    let Some(body_len) = bytes.len().checked_sub(4).filter(|&n| n >= MAGIC.len() + 8) else {
        return Err(format!("{} bytes: too short for a documents file", bytes.len()));
    };
    let (body, sum) = bytes.split_at(body_len);
    let want = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    let got = crc32fast::hash(body);
    if got != want {
        return Err(format!("checksum {got:08x} over {body_len} bytes, the file says {want:08x}"));
    }
    let mut r = Cursor { bytes: body, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a documents file".to_owned());
    }
    let count = r.u64()?;
    // Every document takes at least 13 bytes: a count past that is damage, not a reservation.
    if count > (body.len() / 13) as u64 {
        return Err(format!("{count} documents announced in {} bytes", body.len()));
    }
    let mut docs = Vec::with_capacity(count as usize);
    for n in 0..count {
        let origin = match r.take(1)?[0] {
            0 => Origin::Corpus,
            1 => Origin::Client,
            o => return Err(format!("document {n}: origin {o}")),
        };
        let (id_len, text_len, meta_len) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
        let id = r.text(id_len).map_err(|e| format!("document {n}: id: {e}"))?;
        let text = r.text(text_len).map_err(|e| format!("document {n} ({id}): text: {e}"))?;
        let meta: Meta = match meta_len {
            0 => Meta::new(),
            len => serde_json::from_slice(r.take(len)?).map_err(|e| format!("document {n} ({id}): meta: {e}"))?,
        };
        docs.push(StoredDoc { id, text, meta, origin });
    }
    if r.at != body.len() {
        return Err(format!("{} bytes after document {count}", body.len() - r.at));
    }
    Ok(docs)
}

/// A cursor over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("the file ends early")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    fn text(&mut self, n: usize) -> Result<String, String> {
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map(str::to_owned).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<StoredDoc> {
        let mut meta = Meta::new();
        meta.insert("year".into(), serde_json::json!(1999));
        vec![
            StoredDoc { id: "a".into(), text: "body \"quoted\" é".into(), meta, origin: Origin::Corpus },
            StoredDoc { id: "b".into(), text: String::new(), meta: Meta::new(), origin: Origin::Client },
        ]
    }

    #[test]
    fn round_trips_and_refuses_any_damage() {
        let mut bytes = Vec::new();
        write_docs(&mut bytes, 2, docs().iter()).unwrap();
        assert_eq!(read_docs(&bytes).unwrap(), docs());
        for cut in [0, 1, 12, bytes.len() / 2, bytes.len() - 1] {
            assert!(read_docs(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in [0, 9, 20, bytes.len() - 6] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(read_docs(&bad).unwrap_err().contains("checksum"), "flip at {at}");
        }
        assert!(write_docs(&mut Vec::new(), 3, docs().iter()).is_err(), "count must match");
    }
}
