//! Searching: a greedy descent through the upper levels, then a beam search on level 0 that
//! prefetches each neighbour's record while the one before it is scored.

use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use crate::beam::{Cand, Visited};
use crate::graph::{Hnsw, Upper, unpack};
use crate::kernels;

/// How many neighbours ahead of the one being scored are prefetched.
const AHEAD: usize = 1;

impl Hnsw {
    /// Up to `want` nodes nearest to `query`, best first, as `(slot, dot product)`, from a beam
    /// of `max(ef, want)`. With `keep`, only slots it accepts are returned (the others still
    /// guide the walk). A query of the wrong length finds nothing.
    pub fn search(
        &self,
        query: &[f32],
        want: usize,
        ef: usize,
        keep: Option<&dyn Fn(usize) -> bool>,
    ) -> Vec<(usize, f32)> {
        if want == 0 || query.len() != self.dim {
            return Vec::new();
        }
        let Some((entry, top)) = unpack(self.entry.load(Ordering::Acquire)) else { return Vec::new() };
        let mut cur = Cand { d: 1.0 - self.dot_query(query, entry), id: entry };
        if top > 0 {
            let upper = self.upper.read().unwrap_or_else(|p| p.into_inner());
            for l in (1..=top).rev() {
                self.greedy(query, &mut cur, l, &upper);
            }
        }
        let mut visited = self.checkout_visited();
        let found = self.search_level(query, cur, ef.max(want), (0, None), keep, &mut visited);
        self.checkin_visited(visited);
        let mut found = found.into_sorted_vec();
        found.truncate(want);
        found.into_iter().map(|c| (c.id as usize, 1.0 - c.d)).collect()
    }

    /// Starts loading the vector of `slot` into the cache.
    #[inline]
    fn prefetch(&self, slot: u32) {
        if let Some(record) = self.table.get(slot) {
            kernels::prefetch(record);
        }
    }

    /// Greedy descent at one upper level: moves `cur` to a local minimum of the distance.
    pub(crate) fn greedy(&self, q: &[f32], cur: &mut Cand, level: usize, upper: &Upper) {
        loop {
            let Some((count, links)) = self.links(cur.id, level, Some(upper)) else { return };
            let n = (count.load(Ordering::Acquire) as usize).min(links.len());
            let mut moved = false;
            for link in &links[..n] {
                let id = link.load(Ordering::Acquire);
                let d = 1.0 - self.dot_query(q, id);
                if d < cur.d {
                    *cur = Cand { d, id };
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Beam search at one level from `start`: the `ef` nearest nodes found (those `keep`
    /// accepts, when given; rejected nodes still guide the walk).
    pub(crate) fn search_level(
        &self,
        q: &[f32],
        start: Cand,
        ef: usize,
        (level, upper): (usize, Option<&Upper>),
        keep: Option<&dyn Fn(usize) -> bool>,
        visited: &mut Visited,
    ) -> BinaryHeap<Cand> {
        let allowed = |id: u32| keep.is_none_or(|k| k(id as usize));
        let mut frontier = BinaryHeap::with_capacity(ef * 4);
        let mut best = BinaryHeap::with_capacity(ef + 1);
        visited.insert(start.id);
        frontier.push(std::cmp::Reverse(start));
        if allowed(start.id) {
            best.push(start);
        }
        let mut bound = best.peek().map_or(f32::INFINITY, |c: &Cand| c.d);
        while let Some(std::cmp::Reverse(c)) = frontier.pop() {
            if c.d > bound && (best.len() >= ef || keep.is_none()) {
                break;
            }
            let Some((count, links)) = self.links(c.id, level, upper) else { continue };
            let n = (count.load(Ordering::Acquire) as usize).min(links.len());
            // The neighbours not seen yet, marked now; then each one's record is prefetched
            // while the one before it is scored.
            let mut fresh = [0u32; 512];
            let mut k = 0;
            for link in &links[..n] {
                let id = link.load(Ordering::Acquire);
                if visited.insert(id) {
                    fresh[k] = id;
                    k += 1;
                }
            }
            let fresh = &fresh[..k];
            for &id in fresh.iter().take(AHEAD) {
                self.prefetch(id);
            }
            for (j, &id) in fresh.iter().enumerate() {
                if let Some(&next) = fresh.get(j + AHEAD) {
                    self.prefetch(next);
                }
                let d = 1.0 - self.dot_query(q, id);
                if best.len() < ef || d < bound {
                    frontier.push(std::cmp::Reverse(Cand { d, id }));
                    if allowed(id) {
                        best.push(Cand { d, id });
                        if best.len() > ef {
                            best.pop();
                        }
                        if let Some(worst) = best.peek() {
                            bound = worst.d;
                        }
                    }
                }
            }
        }
        best
    }
}
