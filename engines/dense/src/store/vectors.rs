//! The vector table: one `f32` row per slot. The rows of the snapshot are served in place from
//! its `snapshot-NNNNNN.f32` file, memory-mapped after its length and checksum were checked
//! (so a restart neither copies nor parses them, and only the rows a search touches are paged
//! in); the rows written since live in memory after them.

use rcp_hnsw::Mapped;

use crate::ann::{self, Scored};

/// One `f32` row per slot: a mapped snapshot prefix, then rows in memory.
#[derive(Debug)]
pub struct Vectors {
    dim: usize,
    /// The snapshot's rows, mapped (`None`: every row is in `tail`).
    base: Option<Mapped>,
    /// Rows in `base`.
    base_rows: usize,
    /// The rows after them.
    tail: Vec<f32>,
}

impl Vectors {
    /// An empty table of `dim`-element rows.
    pub(super) fn new(dim: usize) -> Self {
        Self { dim: dim.max(1), base: None, base_rows: 0, tail: Vec::new() }
    }

    /// A table whose first rows are the whole of `map` (a multiple of `dim` floats).
    pub(super) fn mapped(dim: usize, map: Mapped) -> Self {
        let dim = dim.max(1);
        let base_rows = map.f32s().len() / dim;
        Self { dim, base: Some(map), base_rows, tail: Vec::new() }
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.base_rows + self.tail.len() / self.dim
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of rows held in memory (the mapped ones are the page cache's).
    pub fn heap_bytes(&self) -> usize {
        self.tail.capacity() * 4
    }

    /// Bytes of rows served from the mapped snapshot file.
    pub fn mapped_bytes(&self) -> usize {
        self.base.as_ref().map_or(0, |m| m.bytes().len())
    }

    /// The row of `slot`, if the table has it.
    #[inline]
    pub fn get(&self, slot: usize) -> Option<&[f32]> {
        let dim = self.dim;
        match (&self.base, slot.checked_sub(self.base_rows)) {
            (Some(map), None) => map.f32s().get(slot * dim..(slot + 1) * dim),
            (_, Some(t)) => self.tail.get(t * dim..(t + 1) * dim),
            (None, None) => None,
        }
    }

    /// The row of `slot`.
    ///
    /// # Panics
    /// When `slot` is past the table (a slot the store never handed out).
    #[inline]
    pub fn row(&self, slot: usize) -> &[f32] {
        match self.get(slot) {
            Some(row) => row,
            None => panic!("slot {slot} is past the vector table ({} rows)", self.len()),
        }
    }

    /// Appends a row (`dim` long).
    pub(super) fn push(&mut self, row: &[f32]) {
        self.tail.extend_from_slice(row);
    }

    /// Exact top-`want` by cosine over the `slots` (strictly ascending; every row when
    /// `None`) that `keep` accepts, best first.
    pub fn exact(
        &self,
        query: &[f32],
        want: usize,
        slots: Option<&mut dyn Iterator<Item = usize>>,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<Scored> {
        let mut all = 0..self.len();
        let slots: &mut dyn Iterator<Item = usize> = match slots {
            Some(s) => s,
            None => &mut all,
        };
        ann::exact_rows(|s| self.get(s), query, want, slots, keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_rows_then_memory_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.f32");
        let rows = [1.0f32, 0.0, 0.0, 1.0];
        std::fs::write(&path, rows.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let mut v = Vectors::mapped(2, Mapped::open(&path, 16, false).unwrap());
        v.push(&[0.6, 0.8]);
        assert_eq!((v.len(), v.mapped_bytes()), (3, 16));
        assert_eq!(v.row(1), &[0.0, 1.0]);
        assert_eq!(v.row(2), &[0.6, 0.8]);
        assert!(v.get(3).is_none());
        let top = v.exact(&[0.0, 1.0], 2, None, &|_| true);
        assert_eq!(top.iter().map(|s| s.slot).collect::<Vec<_>>(), vec![1, 2]);
        let top = v.exact(&[0.0, 1.0], 2, Some(&mut [0usize, 2].into_iter()), &|s| s != 2);
        assert_eq!(top.iter().map(|s| s.slot).collect::<Vec<_>>(), vec![0]);
    }
}
