//! The graph file: a header, every record of the node table verbatim, then the upper-level
//! lists. All integers little-endian.
//!
//! ```text
//! magic "RCPHNSW1" | dim u32 | precision u32 (0 f32, 1 f16) | m u32 | words per record u32
//! slots u64 | entry u64 | nodes u64
//! slots × record ([state, count, vector words, link × 2m] as u32)
//! upper lists u64 | per list: slot u32, level u32, level × (m + 1) u32
//! ```
//!
//! Loading checks everything a search relies on: the header against the caller's parameters
//! ([`Error::Mismatch`]), and every count, level and link against the nodes actually present
//! ([`Error::Corrupt`]), so a damaged file is refused, never walked.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::error::Error;
use crate::graph::{Hnsw, MAX_LEVEL, pack, unpack};
use crate::mapped::Mapped;
use crate::params::{Params, Precision};
use crate::table::{CLAIMED, Table, published_level};

const MAGIC: &[u8; 8] = b"RCPHNSW1";

fn corrupt(why: impl Into<String>) -> Error {
    Error::Corrupt(why.into())
}

/// A cursor over the file's bytes.
struct Words<'a> {
    bytes: &'a [u8],
}

impl<'a> Words<'a> {
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.bytes.len() < n {
            return Err(corrupt("the file ends early"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// `n` words into `out` (cleared first).
    fn words(&mut self, n: usize, out: &mut Vec<u32>) -> Result<(), Error> {
        let bytes = self.take(n * 4)?;
        out.clear();
        out.extend(bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        Ok(())
    }
}

impl Hnsw {
    /// Writes the graph to `path` (not atomically: write a temporary file and rename it).
    ///
    /// No insert may run meanwhile (the caller's writer lock ensures it in the dense engine):
    /// a node linked during the save could be named by a saved list without being saved
    /// itself, which [`Hnsw::load`] refuses, or be saved before the links to it were, which
    /// loads fine but leaves it unreachable.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let slots = self.extent.load(Ordering::Acquire);
        let words = self.table.record_words();
        w.write_all(MAGIC)?;
        let precision = match self.params.precision {
            Precision::F32 => 0u32,
            Precision::F16 => 1,
        };
        for v in [self.dim as u32, precision, self.params.m as u32, words as u32] {
            w.write_all(&v.to_le_bytes())?;
        }
        // Only published nodes are written (a claimed slot is written as empty), and the
        // entry point and count are those of the nodes written.
        let mut nodes = 0u64;
        let mut top: Option<(u32, usize)> = None;
        let mut levels = Vec::new();
        for slot in 0..slots as u32 {
            if let Some(level) = self.table.get(slot).and_then(published_level) {
                nodes += 1;
                levels.push((slot, level));
                if top.is_none_or(|(_, t)| level > t) {
                    top = Some((slot, level));
                }
            }
        }
        let entry = match (unpack(self.entry.load(Ordering::Acquire)), top) {
            // The live entry point when it is among the nodes written at the top level.
            (Some((e, l)), Some((_, t))) if l == t && levels.binary_search_by_key(&e, |&(s, _)| s).is_ok() => {
                pack(e, l)
            }
            (_, Some((s, t))) => pack(s, t),
            (_, None) => 0,
        };
        w.write_all(&(slots as u64).to_le_bytes())?;
        w.write_all(&entry.to_le_bytes())?;
        w.write_all(&nodes.to_le_bytes())?;
        let empty = vec![0u8; words * 4];
        let mut bytes = Vec::with_capacity(words * 4);
        let mut levels_iter = levels.iter().peekable();
        for slot in 0..slots as u32 {
            match (levels_iter.peek(), self.table.get(slot)) {
                (Some(&&(s, _)), Some(record)) if s == slot => {
                    levels_iter.next();
                    bytes.clear();
                    for word in record {
                        bytes.extend_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
                    }
                    w.write_all(&bytes)?;
                }
                _ => w.write_all(&empty)?,
            }
        }
        let upper = self.upper.read().unwrap_or_else(|p| p.into_inner());
        let lists: Vec<(u32, usize)> = levels.iter().copied().filter(|&(_, l)| l > 0).collect();
        w.write_all(&(lists.len() as u64).to_le_bytes())?;
        for (slot, level) in lists {
            w.write_all(&slot.to_le_bytes())?;
            w.write_all(&(level as u32).to_le_bytes())?;
            let list = upper.get(&slot).ok_or_else(|| corrupt(format!("node {slot} has no upper lists")))?;
            bytes.clear();
            for word in list.iter() {
                bytes.extend_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
            }
            w.write_all(&bytes)?;
        }
        w.flush()?;
        Ok(())
    }

    /// Loads a graph written by [`Hnsw::save`] for `dim`-dimensional vectors with `params`
    /// (`m` and precision must match the file; `ef_construction` applies to later inserts).
    pub fn load(path: &Path, dim: usize, params: Params) -> Result<Self, Error> {
        let len = std::fs::metadata(path)?.len();
        Self::from_bytes(Mapped::open(path, len, true)?.bytes(), dim, params)
    }

    /// Loads a graph from the bytes of a file written by [`Hnsw::save`] (as [`Hnsw::load`]
    /// does; a caller that checks a checksum over the bytes first maps the file once, with
    /// [`Mapped`], for both).
    pub fn from_bytes(bytes: &[u8], dim: usize, params: Params) -> Result<Self, Error> {
        let g = Hnsw::new(dim, params);
        let mut r = Words { bytes };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(corrupt("not an rcp-hnsw graph file"));
        }
        let (file_dim, precision, m, words) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let file_precision = match precision {
            0 => Precision::F32,
            1 => Precision::F16,
            p => return Err(corrupt(format!("unknown precision {p}"))),
        };
        if file_dim as usize != dim || file_precision != g.params.precision || m as usize != g.params.m {
            return Err(Error::Mismatch(format!(
                "{file_dim} dimensions, {file_precision:?}, m {m}; expected {dim}, {:?}, m {}",
                g.params.precision, g.params.m
            )));
        }
        if words as usize != g.table.record_words() {
            return Err(corrupt(format!("{words} words per record, expected {}", g.table.record_words())));
        }
        let (slots, entry, nodes) = (r.u64()?, r.u64()?, r.u64()?);
        if slots > Table::CAPACITY as u64 || nodes > slots {
            return Err(corrupt(format!("{nodes} nodes in {slots} slots")));
        }
        let slots = slots as usize;
        let mut rec = Vec::new();
        // Each slot's state (0 empty, else level + 1), one byte per slot: the link checks
        // below look every link's target up here, in a table that stays in cache, instead of
        // in the target's record somewhere in the node table.
        let mut states = vec![0u8; slots];
        let mut present = Vec::new();
        let word = |b: &[u8], i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        for (slot, state) in states.iter_mut().enumerate() {
            let slot = slot as u32;
            let bytes = r.take(words as usize * 4)?;
            match word(bytes, 0) {
                0 => continue,
                CLAIMED => return Err(corrupt(format!("slot {slot}: unpublished node"))),
                s if s as usize - 1 > MAX_LEVEL => return Err(corrupt(format!("slot {slot}: level {}", s - 1))),
                s => *state = s as u8,
            }
            let count = word(bytes, 1);
            if count as usize > g.m0 {
                return Err(corrupt(format!("slot {slot}: {count} links, at most {}", g.m0)));
            }
            let record = g.table.ensure(slot).ok_or(Error::Capacity(slot as usize))?;
            for (w, b) in record.iter().zip(bytes.chunks_exact(4)) {
                w.store(u32::from_le_bytes([b[0], b[1], b[2], b[3]]), Ordering::Relaxed);
            }
            present.push(slot);
        }
        if present.len() as u64 != nodes {
            return Err(corrupt(format!("{} nodes present, the header says {nodes}", present.len())));
        }
        // The `i8` codes are not in the file: they are made again from the stored vectors.
        for &slot in &present {
            if let Some(v) = g.vector_f32(slot) {
                g.write_coarse(slot, &v);
            }
        }
        let level = |s: u32| states.get(s as usize).and_then(|&st| st.checked_sub(1)).map(usize::from);
        let link_ok = |s: u32, at: usize| level(s).is_some_and(|l| l >= at);
        for &slot in &present {
            let Some((count, links)) = g.table.get(slot).map(|r| g.table.links(r)) else { continue };
            let n = count.load(Ordering::Relaxed) as usize;
            if let Some(bad) = links[..n].iter().map(|l| l.load(Ordering::Relaxed)).find(|&l| !link_ok(l, 0)) {
                return Err(corrupt(format!("slot {slot}: link to {bad}, which holds no node")));
            }
        }
        let lists = r.u64()?;
        let expected = present.iter().filter(|&&s| level(s).unwrap_or(0) > 0).count() as u64;
        if lists != expected {
            return Err(corrupt(format!("{lists} upper lists for {expected} upper nodes")));
        }
        let per_level = g.params.m + 1;
        let mut upper = g.upper.write().unwrap_or_else(|p| p.into_inner());
        for _ in 0..lists {
            let (slot, at) = (r.u32()?, r.u32()? as usize);
            if level(slot) != Some(at) || at == 0 || upper.contains_key(&slot) {
                return Err(corrupt(format!("upper lists of slot {slot} at level {at}")));
            }
            r.words(at * per_level, &mut rec)?;
            for (l, list) in rec.chunks_exact(per_level).enumerate() {
                let n = list[0] as usize;
                if n > g.params.m {
                    return Err(corrupt(format!("slot {slot} level {}: {n} links", l + 1)));
                }
                if let Some(&bad) = list[1..=n].iter().find(|&&s| !link_ok(s, l + 1)) {
                    return Err(corrupt(format!("slot {slot} level {}: link to {bad}", l + 1)));
                }
            }
            upper.insert(slot, rec.iter().map(|&w| std::sync::atomic::AtomicU32::new(w)).collect());
        }
        drop(upper);
        if !r.bytes.is_empty() {
            return Err(corrupt("bytes after the last list"));
        }
        let top = present.iter().filter_map(|&s| level(s)).max();
        match (unpack(entry), top) {
            (None, None) => {}
            (Some((e, l)), Some(t)) if l == t && level(e) == Some(l) => {}
            _ => return Err(corrupt(format!("entry point {entry:#x} is not a node at the top level"))),
        }
        g.entry.store(entry, Ordering::Release);
        g.len.store(present.len(), Ordering::Release);
        g.extent.store(present.last().map_or(0, |&s| s as usize + 1), Ordering::Release);
        Ok(g)
    }
}
