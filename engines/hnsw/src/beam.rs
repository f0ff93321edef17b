//! The working state of a beam search: scored candidates and the visited set, reused across
//! searches.

use std::cmp::Ordering as CmpOrdering;

/// A scored candidate: distance `1 - dot` (lower is nearer) and slot; ordered by distance,
/// then slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cand {
    /// `1 - dot` to the query (lower is nearer).
    pub(crate) d: f32,
    /// The node's slot.
    pub(crate) id: u32,
}

impl Eq for Cand {}

impl Ord for Cand {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.d.total_cmp(&o.d).then(self.id.cmp(&o.id))
    }
}

impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}

/// The visited set of one search: a mark per slot, equal to the current epoch when visited.
#[derive(Debug, Default)]
pub(crate) struct Visited {
    marks: Vec<u16>,
    epoch: u16,
}

impl Visited {
    /// Forgets every mark (in O(1) but once per 65,535 searches) and covers `slots` slots.
    pub(crate) fn reset(&mut self, slots: usize) {
        if self.marks.len() < slots {
            self.marks.resize(slots, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; true when it was not marked yet. Slots beyond the array (inserted after
    /// the search began) count as visited.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32) -> bool {
        match self.marks.get_mut(id as usize) {
            Some(m) if *m != self.epoch => {
                *m = self.epoch;
                true
            }
            _ => false,
        }
    }

    /// Bytes its marks hold.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.marks.len() * 2
    }
}
