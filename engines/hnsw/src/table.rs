//! The node table: one fixed-size record of 32-bit words per slot, in chunks that are
//! allocated on first use and never move, so readers hold plain references while a writer
//! appends.
//!
//! A record is `[state, count, vector words, link × m0]`: `state` is 0 for an empty slot,
//! [`CLAIMED`] while an insert writes the vector, and `level + 1` once the node is published;
//! `count` and the links are the node's level-0 neighbour list; the vector is `dim` `f32` or
//! `dim` `f16` packed two to a word. Scoring a node reads `state` and then the vector, so the
//! two sit in the same cache lines; the links are read only when the node is expanded. The
//! graph keeps a second table of [`Element::I8`] records without links (`m0` 0), each padded
//! to whole cache lines, for the searches' `i8` walk.
//!
//! Chunks are anonymous memory maps aligned to 2 MiB and, on Linux, advised to use
//! transparent huge pages: a search touches records all over the table, and with 4 KiB pages
//! nearly every record costs a TLB miss and a page walk. Pages are zero until touched and
//! touched only as records fill them, so a small index stays small.
//!
//! Every word is an [`AtomicU32`], so links can be rewritten while other threads read them.
//! The vector words are the exception this module's `unsafe` rests on: they are written once,
//! by the thread that claimed the slot, before the node is published with a release store, and
//! never again; a reader reaches a node only through an acquire load of a link or of the entry
//! point that was stored after that publication. So the vector is never written while a shared
//! slice of it exists, and reading it as plain `f32`/`u16` is sound.

#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// `state` of a slot an insert has claimed but not yet published.
pub(crate) const CLAIMED: u32 = u32::MAX;

const CHUNK_BITS: u32 = 14;
/// Slots per chunk.
const CHUNK: usize = 1 << CHUNK_BITS;
/// Chunks at most: 2^28 slots in all.
const MAX_CHUNKS: usize = 1 << 14;

// `u32` and `AtomicU32` share size, alignment and bit validity, so a zeroed `[u32]` is a
// valid `[AtomicU32]` (checked here for the targets this builds on).
const _: () = assert!(std::mem::align_of::<u32>() == std::mem::align_of::<AtomicU32>());
const _: () = assert!(std::mem::size_of::<u32>() == std::mem::size_of::<AtomicU32>());

/// How a record's vector is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Element {
    /// One `f32` per word.
    F32,
    /// Two `f16` per word.
    F16,
    /// A scale (`f32` bits) in the first word, then four `i8` codes per word: `v ≈ scale ×
    /// codes` ([`kernels::to_i8`](crate::kernels::to_i8)). Records are padded to whole cache
    /// lines, so scoring one reads the fewest lines.
    I8,
}

/// A published node's vector.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Row<'a> {
    /// `f32` elements.
    F32(&'a [f32]),
    /// `f16` bits.
    F16(&'a [u16]),
    /// `i8` codes and their scale.
    I8(&'a [i8], f32),
}

/// The node table.
pub(crate) struct Table {
    words: usize,
    m0: usize,
    dim: usize,
    element: Element,
    chunks: Box<[OnceLock<Chunk>]>,
}

/// Huge-page size the chunks are aligned to.
const HUGE_PAGE: usize = 2 << 20;

/// What keeps a chunk's memory alive.
#[derive(Debug)]
enum Owner {
    /// An anonymous map (zero pages, faulted in on first touch).
    Map(#[allow(dead_code)] memmap2::MmapMut),
    /// Heap memory, where no map could be made: a boxed slice turned into its raw pointer
    /// (so moving the owner never touches the words' provenance), freed on drop.
    Heap(NonNull<[AtomicU32]>),
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Owner::Heap(words) = self {
            // SAFETY: made by `Box::leak` in `Chunk::on_heap` and freed only here, once;
            // the chunk (and every reference into it) is gone when its owner drops.
            drop(unsafe { Box::from_raw(words.as_ptr()) });
        }
    }
}

/// One chunk of records: `len` words at `words`, inside `owner`'s memory.
#[derive(Debug)]
struct Chunk {
    words: NonNull<AtomicU32>,
    len: usize,
    _owner: Owner,
}

// SAFETY: `words` points into memory `_owner` owns exclusively and never moves (a map's
// address is fixed; the heap block is held by its raw pointer); all access to it goes
// through `&[AtomicU32]`, which is `Send + Sync`.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// `len` zeroed words, from a 2 MiB-aligned anonymous map advised for huge pages, or from
    /// the heap if no map can be made.
    fn zeroed(len: usize) -> Self {
        let bytes = len * 4;
        if let Ok(map) = memmap2::MmapMut::map_anon(bytes + HUGE_PAGE) {
            let base = map.as_ptr();
            let skip = base.align_offset(HUGE_PAGE).min(HUGE_PAGE);
            #[cfg(target_os = "linux")]
            let _ = map.advise_range(memmap2::Advice::HugePage, skip, bytes);
            // SAFETY: `skip + bytes <= map.len()`; the map is page-aligned, so the pointer is
            // aligned for `AtomicU32`, and its pages read as zero, a valid `AtomicU32`.
            let words = unsafe { NonNull::new_unchecked(base.add(skip).cast_mut().cast::<AtomicU32>()) };
            return Self { words, len, _owner: Owner::Map(map) };
        }
        Self::on_heap(len)
    }

    /// `len` zeroed words from the heap.
    fn on_heap(len: usize) -> Self {
        let heap = NonNull::from(Box::leak(zeroed_words(len)));
        Self { words: heap.cast::<AtomicU32>(), len, _owner: Owner::Heap(heap) }
    }

    #[inline]
    fn words(&self) -> &[AtomicU32] {
        // SAFETY: `len` initialised words at `words`, alive as long as `self` (see `Send`).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.len) }
    }
}

/// `n` zeroed atomic words on the heap.
pub(crate) fn zeroed_words(n: usize) -> Box<[AtomicU32]> {
    let words: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    // SAFETY: same size, alignment and bit validity (asserted above); the box's ownership
    // moves to the new pointer.
    unsafe { Box::from_raw(Box::into_raw(words) as *mut [AtomicU32]) }
}

/// Offset of the vector in a record.
const VECTOR: usize = 2;

impl Table {
    /// The highest slot number the table can hold, plus one.
    pub(crate) const CAPACITY: usize = CHUNK * MAX_CHUNKS;

    /// A table for nodes with `m0` level-0 links and `dim`-element vectors.
    pub(crate) fn new(m0: usize, dim: usize, element: Element) -> Self {
        let vector_words = match element {
            Element::F32 => dim,
            Element::F16 => dim.div_ceil(2),
            Element::I8 => 1 + dim.div_ceil(4),
        };
        let words = VECTOR + vector_words + m0;
        // 16 words are one 64-byte line; the chunks start on a line.
        let words = if element == Element::I8 { words.next_multiple_of(16) } else { words };
        Self { words, m0, dim, element, chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect() }
    }

    /// Words per record.
    pub(crate) fn record_words(&self) -> usize {
        self.words
    }

    /// The record of `slot`, if its chunk exists.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&[AtomicU32]> {
        let chunk = self.chunks.get(slot as usize >> CHUNK_BITS)?.get()?.words();
        let at = (slot as usize & (CHUNK - 1)) * self.words;
        chunk.get(at..at + self.words)
    }

    /// The record of `slot`, allocating its chunk; `None` beyond [`Table::CAPACITY`].
    pub(crate) fn ensure(&self, slot: u32) -> Option<&[AtomicU32]> {
        let chunk =
            self.chunks.get(slot as usize >> CHUNK_BITS)?.get_or_init(|| Chunk::zeroed(CHUNK * self.words)).words();
        let at = (slot as usize & (CHUNK - 1)) * self.words;
        chunk.get(at..at + self.words)
    }

    /// Bytes of the chunks allocated so far.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.chunks.iter().filter(|c| c.get().is_some()).count() * CHUNK * self.words * 4
    }

    /// The level-0 neighbour count and link words of a record.
    #[inline]
    pub(crate) fn links<'a>(&self, record: &'a [AtomicU32]) -> (&'a AtomicU32, &'a [AtomicU32]) {
        (&record[1], &record[record.len() - self.m0..])
    }

    /// The vector words of a record (for prefetching; read them through [`Table::row`]).
    #[inline]
    pub(crate) fn vector_words<'a>(&self, record: &'a [AtomicU32]) -> &'a [AtomicU32] {
        &record[VECTOR..record.len() - self.m0]
    }

    /// The vector of a published record (`None` while the slot is empty or being written).
    #[inline]
    pub(crate) fn row<'a>(&self, record: &'a [AtomicU32]) -> Option<Row<'a>> {
        published_level(record)?;
        let words = self.vector_words(record);
        // SAFETY: the acquire load in `published_level` saw the release store that published
        // the node, which the inserting thread made after its last write to these words; they
        // are never written again (module docs). So no write races with this shared slice.
        Some(unsafe {
            match self.element {
                Element::F32 => Row::F32(std::slice::from_raw_parts(words.as_ptr().cast::<f32>(), self.dim)),
                Element::F16 => Row::F16(std::slice::from_raw_parts(words.as_ptr().cast::<u16>(), self.dim)),
                Element::I8 => Row::I8(
                    std::slice::from_raw_parts(words[1..].as_ptr().cast::<i8>(), self.dim),
                    f32::from_bits(words[0].load(Ordering::Relaxed)),
                ),
            }
        })
    }

    /// Writes `v` (already `dim` long) into a record this thread has claimed and not published.
    pub(crate) fn write_vector(&self, record: &[AtomicU32], v: &[f32]) {
        let words = self.vector_words(record);
        match self.element {
            Element::F32 => {
                for (w, x) in words.iter().zip(v) {
                    w.store(x.to_bits(), Ordering::Relaxed);
                }
            }
            Element::F16 => {
                for (w, pair) in words.iter().zip(v.chunks(2)) {
                    let lo = half::f16::from_f32(pair[0]).to_bits().to_ne_bytes();
                    let hi = half::f16::from_f32(pair.get(1).copied().unwrap_or(0.0)).to_bits().to_ne_bytes();
                    w.store(u32::from_ne_bytes([lo[0], lo[1], hi[0], hi[1]]), Ordering::Relaxed);
                }
            }
            Element::I8 => {
                let (codes, scale) = crate::kernels::to_i8(v);
                words[0].store(scale.to_bits(), Ordering::Relaxed);
                for (w, four) in words[1..].iter().zip(codes.chunks(4)) {
                    let b = |i: usize| four.get(i).map_or(0, |&c| c.to_ne_bytes()[0]);
                    w.store(u32::from_ne_bytes([b(0), b(1), b(2), b(3)]), Ordering::Relaxed);
                }
            }
        }
    }
}

/// The level of a published record, or `None` while the slot is empty or claimed.
#[inline]
pub(crate) fn published_level(record: &[AtomicU32]) -> Option<usize> {
    match record[0].load(Ordering::Acquire) {
        0 | CLAIMED => None,
        s => Some(s as usize - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_chunks_are_zeroed_writable_and_freed() {
        for len in [0, 1, 1000] {
            let c = Chunk::on_heap(len);
            assert_eq!(c.words().len(), len);
            assert!(c.words().iter().all(|w| w.load(Ordering::Relaxed) == 0));
            c.words().iter().for_each(|w| w.store(7, Ordering::Relaxed));
            let moved = c; // the owner moves; the words stay valid
            assert!(moved.words().iter().all(|w| w.load(Ordering::Relaxed) == 7));
        }
    }

    #[test]
    fn records_are_stable_and_vectors_read_back_once_published() {
        for element in [Element::F32, Element::F16, Element::I8] {
            let t = Table::new(4, 5, element);
            assert!(t.get(5).is_none());
            let r = t.ensure(5).unwrap();
            assert_eq!(r.len(), t.record_words());
            let v = [1.5, -2.0, 0.25, 3.0, -0.5];
            t.write_vector(r, &v);
            assert!(t.row(r).is_none(), "unpublished");
            r[0].store(3, Ordering::Release);
            assert_eq!(published_level(r), Some(2));
            let back: Vec<f32> = match t.row(r).unwrap() {
                Row::F32(x) => x.to_vec(),
                Row::F16(x) => x.iter().map(|&b| half::f16::from_bits(b).to_f32()).collect(),
                Row::I8(x, scale) => x.iter().map(|&c| f32::from(c) * scale).collect(),
            };
            if element == Element::I8 {
                // Within half a step of 3.0 / 127; every record starts on a cache line.
                assert!(back.iter().zip(&v).all(|(b, x)| (b - x).abs() <= 0.5 * 3.0 / 127.0 + 1e-6), "{back:?}");
                assert_eq!(t.record_words() % 16, 0);
            } else {
                assert_eq!(back, v, "{element:?}");
            }
            assert!(std::ptr::eq(t.get(5).unwrap(), r));
            assert_eq!(t.allocated_bytes(), CHUNK * t.record_words() * 4);
            assert!(t.ensure(u32::MAX).is_none());
            let (count, links) = t.links(r);
            assert_eq!((count.load(Ordering::Relaxed), links.len()), (0, 4));
        }
    }
}
