//! Searching: a greedy descent through the upper levels, then a beam search on level 0 that
//! prefetches each neighbour's record while the ones before it are scored. By default level 0
//! is walked on the `i8` codes of the vectors ([`Hnsw::int8_walk`]) with a beam a tenth wider
//! than `ef`, which is then rescored with the stored vectors and cut back.

use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use crate::beam::{Cand, Visited};
use crate::graph::{Hnsw, Upper, unpack};
use crate::kernels;

/// How many neighbours ahead of the one being scored are prefetched: one ahead is too late
/// for a record in main memory (100k x 384-d, i8 walk: three ahead answered about 1.3x the
/// queries/s of one).
const AHEAD: usize = 3;

/// How much wider than `ef` (in percent) the beam of an `i8` walk is: the codes blur near
/// ties, and the wider beam, rescored with the stored vectors and cut back to `ef`, recalls at
/// least what the walk on the stored vectors does at the same `ef` (100k x 384-d clustered,
/// M 16: from ef 24 to 256, where 0% fell 0.001 short at ef 64).
const WIDEN_PERCENT: usize = 10;

impl Hnsw {
    /// Up to `want` nodes nearest to `query`, best first, as `(slot, dot product)`, from a beam
    /// of `max(ef, want)` (a tenth wider on the `i8` walk, see [`Hnsw::int8_walk`]; the dot
    /// products are always those of the stored vectors). With `keep`, only slots it accepts
    /// are returned (the others still guide the walk). A query of the wrong length finds
    /// nothing.
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
        let coarse = self.int8_walk();
        let mut visited = self.checkout_visited();
        let beam = if coarse { (ef.max(want) * (100 + WIDEN_PERCENT)).div_ceil(100) } else { ef.max(want) };
        let found = self.search_level(query, cur, beam, (0, None), keep, &mut visited, coarse);
        self.checkin_visited(visited);
        let mut found = found.into_vec();
        if coarse {
            // The beam was scored on the codes: score it again on the stored vectors.
            for j in 0..found.len() {
                if let Some(next) = found.get(j + AHEAD) {
                    self.prefetch(next.id);
                }
                found[j].d = 1.0 - self.dot_query(query, found[j].id);
            }
        }
        found.sort_unstable();
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

    /// Starts loading the `i8` codes of `slot` into the cache.
    #[inline]
    fn prefetch_coarse(&self, slot: u32) {
        if let Some(record) = self.coarse.get(slot) {
            kernels::prefetch(record);
        }
    }

    /// Starts loading the level-0 neighbour count and list of `slot` into the cache.
    #[inline]
    fn prefetch_links(&self, slot: u32) {
        if let Some(record) = self.table.get(slot) {
            let (_, links) = self.table.links(record);
            kernels::prefetch(&record[..1]);
            kernels::prefetch(links);
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
    /// accepts, when given; rejected nodes still guide the walk). With `coarse`, nodes are
    /// scored on their `i8` codes (the distances returned are then approximate).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_level(
        &self,
        q: &[f32],
        start: Cand,
        ef: usize,
        (level, upper): (usize, Option<&Upper>),
        keep: Option<&dyn Fn(usize) -> bool>,
        visited: &mut Visited,
        coarse: bool,
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
            // The codes do not hold the links: start loading the list of the node likely to
            // be expanded next while this one's neighbours are scored.
            if coarse && let Some(std::cmp::Reverse(next)) = frontier.peek() {
                self.prefetch_links(next.id);
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
            let fetch = |id: u32| if coarse { self.prefetch_coarse(id) } else { self.prefetch(id) };
            for &id in fresh.iter().take(AHEAD) {
                fetch(id);
            }
            for (j, &id) in fresh.iter().enumerate() {
                if let Some(&next) = fresh.get(j + AHEAD) {
                    fetch(next);
                }
                let d = 1.0 - if coarse { self.dot_coarse(q, id) } else { self.dot_query(q, id) };
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
