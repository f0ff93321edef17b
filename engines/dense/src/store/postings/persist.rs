//! The metadata index saved with a snapshot (`snapshot-NNNNNN.postings`), so a restart reads
//! the postings instead of re-deriving them from every document's metadata. The file is
//! derived data with its own checksum: one that is missing, damaged, or made for other field
//! declarations is ignored (the postings are then rebuilt from the documents), never trusted.
//!
//! ```text
//! magic "RCPPOST1" | declared fields (JSON, len u32 + bytes) | live slots (bitmap)
//! fields u32 | per field: name (len u32 + bytes) | kind u8 | present (bitmap) | unkeyed (bitmap)
//!            | terms u32 × (term: len u32 + bytes, bitmap) | numbers u32 × (i64, bitmap)
//! crc32 u32 of every byte before it
//! ```
//!
//! A bitmap is `len u32` then roaring's portable serialization; integers are little-endian.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use rcp_wire::filter::FieldType;
use roaring::RoaringBitmap;

use super::{FieldPostings, Kind, MetaIndex};

const MAGIC: &[u8; 8] = b"RCPPOST1";

fn kind_byte(kind: Kind) -> u8 {
    match kind {
        Kind::Keyword => 0,
        Kind::Bool => 1,
        Kind::Int => 2,
        Kind::Date => 3,
    }
}

impl MetaIndex {
    /// Writes the index to `out`.
    pub(in crate::store) fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut buf = Vec::new();
        buf.extend_from_slice(MAGIC);
        put_bytes(&mut buf, &serde_json::to_vec(&self.declared)?)?;
        put_bitmap(&mut buf, &self.live)?;
        put_len(&mut buf, self.fields.len())?;
        for (name, (kind, p)) in &self.fields {
            put_bytes(&mut buf, name.as_bytes())?;
            buf.push(kind_byte(*kind));
            put_bitmap(&mut buf, &p.present)?;
            put_bitmap(&mut buf, &p.unkeyed)?;
            put_len(&mut buf, p.terms.len())?;
            for (term, slots) in &p.terms {
                put_bytes(&mut buf, term.as_bytes())?;
                put_bitmap(&mut buf, slots)?;
            }
            put_len(&mut buf, p.numbers.len())?;
            for (number, slots) in &p.numbers {
                buf.extend_from_slice(&number.to_le_bytes());
                put_bitmap(&mut buf, slots)?;
            }
        }
        let sum = crc32fast::hash(&buf);
        out.write_all(&buf)?;
        out.write_all(&sum.to_le_bytes())
    }

    /// The index saved in `bytes` if it is sound and made for the `declared` fields over
    /// exactly `slots` live slots `0..slots`, or why not.
    pub(in crate::store) fn read_from(
        bytes: &[u8],
        declared: &BTreeMap<String, FieldType>,
        slots: usize,
    ) -> Result<Self, String> {
        let body_len = bytes.len().checked_sub(4).ok_or("too short")?;
        let (body, sum) = bytes.split_at(body_len);
        let want = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        if crc32fast::hash(body) != want {
            return Err("checksum mismatch".to_owned());
        }
        let mut r = Cursor { bytes: body };
        if r.take(MAGIC.len())? != MAGIC {
            return Err("not a postings file".to_owned());
        }
        let saved: BTreeMap<String, FieldType> =
            serde_json::from_slice(r.bytes_field()?).map_err(|e| format!("declared fields: {e}"))?;
        if &saved != declared {
            return Err("made for other field declarations".to_owned());
        }
        let mut index = MetaIndex::new(declared);
        index.live = r.bitmap()?;
        let full = u32::try_from(slots).map_err(|_| "too many slots")?;
        if index.live.len() != u64::from(full) || index.live.max().is_some_and(|m| m + 1 != full) {
            return Err(format!("{} live slots, the snapshot has {slots} documents", index.live.len()));
        }
        let fields = r.len()?;
        if fields != index.fields.len() {
            return Err(format!("{fields} fields, {} expected", index.fields.len()));
        }
        for _ in 0..fields {
            let name = String::from_utf8(r.bytes_field()?.to_vec()).map_err(|e| e.to_string())?;
            let kind = r.take(1)?[0];
            let Some((expected, postings)) = index.fields.get_mut(&name) else {
                return Err(format!("field {name} is not declared"));
            };
            if kind != kind_byte(*expected) {
                return Err(format!("field {name}: kind {kind}"));
            }
            let mut p = FieldPostings { present: r.bitmap()?, unkeyed: r.bitmap()?, ..FieldPostings::default() };
            let terms = r.len()?;
            let mut map = HashMap::with_capacity(terms.min(body.len()));
            for _ in 0..terms {
                let term = String::from_utf8(r.bytes_field()?.to_vec()).map_err(|e| e.to_string())?;
                map.insert(term, r.bitmap()?);
            }
            p.terms = map;
            for _ in 0..r.len()? {
                let b = r.take(8)?;
                let number = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                p.numbers.insert(number, r.bitmap()?);
            }
            let outside = |b: &RoaringBitmap| !b.is_subset(&index.live);
            if outside(&p.present) || outside(&p.unkeyed) || p.terms.values().chain(p.numbers.values()).any(outside) {
                return Err(format!("field {name}: postings name slots that are not live"));
            }
            *postings = p;
        }
        if !r.bytes.is_empty() {
            return Err("bytes after the last field".to_owned());
        }
        Ok(index)
    }
}

fn put_len(buf: &mut Vec<u8>, n: usize) -> io::Result<()> {
    let n = u32::try_from(n).map_err(|_| io::Error::other("a postings part of 2^32 entries or bytes"))?;
    buf.extend_from_slice(&n.to_le_bytes());
    Ok(())
}

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) -> io::Result<()> {
    put_len(buf, bytes.len())?;
    buf.extend_from_slice(bytes);
    Ok(())
}

fn put_bitmap(buf: &mut Vec<u8>, bitmap: &RoaringBitmap) -> io::Result<()> {
    put_len(buf, bitmap.serialized_size())?;
    bitmap.serialize_into(&mut *buf)
}

/// A cursor over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() < n {
            return Err("the file ends early".to_owned());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn len(&mut self) -> Result<usize, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn bytes_field(&mut self) -> Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n)
    }

    fn bitmap(&mut self) -> Result<RoaringBitmap, String> {
        let bytes = self.bytes_field()?;
        RoaringBitmap::deserialize_from(bytes).map_err(|e| format!("bitmap: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::Meta;
    use serde_json::json;

    use super::*;

    fn declared() -> BTreeMap<String, FieldType> {
        BTreeMap::from([
            ("lang".to_owned(), FieldType::Keyword),
            ("year".to_owned(), FieldType::Int),
            ("ok".to_owned(), FieldType::Bool),
        ])
    }

    #[test]
    fn round_trips_and_refuses_damage_or_other_declarations() {
        let mut index = MetaIndex::new(&declared());
        for slot in 0..50usize {
            let lang = ["en", "de"][slot % 2];
            let meta: Meta = json!({"lang": lang, "year": 1990 + slot as i64 % 7, "ok": slot % 3 == 0})
                .as_object()
                .cloned()
                .unwrap();
            index.insert(slot, &meta);
        }
        index.insert(50, &json!({"year": "not a number"}).as_object().cloned().unwrap());
        let mut bytes = Vec::new();
        index.write_to(&mut bytes).unwrap();
        let back = MetaIndex::read_from(&bytes, &declared(), 51).unwrap();
        for filter in [
            rcp_wire::filter::Filter::eq("lang", "de"),
            rcp_wire::filter::Filter::eq("year", 1993),
            rcp_wire::filter::Filter::eq("ok", true),
        ] {
            assert_eq!(back.candidates(&filter), index.candidates(&filter), "{filter:?}");
        }
        assert_eq!(back.live(), index.live());
        assert!(MetaIndex::read_from(&bytes, &declared(), 52).is_err(), "another snapshot size");
        let mut fewer = declared();
        fewer.remove("ok");
        assert!(MetaIndex::read_from(&bytes, &fewer, 51).unwrap_err().contains("declarations"));
        for at in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(MetaIndex::read_from(&bad, &declared(), 51).is_err(), "flip at {at}");
        }
        assert!(MetaIndex::read_from(&bytes[..bytes.len() - 9], &declared(), 51).is_err());
    }
}
