//! A concurrent HNSW graph (Malkov & Yashunin) over unit vectors, scored by the dot product,
//! built for the RCP dense engine's search path.
//!
//! What makes it fast is the memory layout, not cleverness in the algorithm:
//!
//! * each node is one record in a flat table: its level-0 neighbour list (plain `u32` slots)
//!   and its vector side by side, so expanding a node touches one region, and the next
//!   neighbour's record is prefetched while the current one is scored;
//! * vectors are stored once, as `f32` or as `f16` ([`Precision`]), and scored in place by
//!   AVX2/FMA/F16C kernels chosen at run time ([`kernels::Simd`]);
//! * the visited set is an epoch-tagged array reused across searches, not a hash set;
//! * inserts run in parallel: a neighbour list is rewritten under a striped lock, never a
//!   global one, while searches read every list without locking.
//!
//! Nodes are addressed by the caller's *slot* (a `u32`-sized index); slots may have gaps. The
//! graph saves to and loads from one file ([`Hnsw::save`], [`Hnsw::load`]) that is checked
//! link by link on load, so a damaged file is refused rather than searched.
//!
//! ```
//! use rcp_hnsw::{Hnsw, Params};
//! let g = Hnsw::new(3, Params::default());
//! g.insert(&[1.0, 0.0, 0.0], 7).unwrap();
//! g.insert(&[0.0, 1.0, 0.0], 9).unwrap();
//! let hits = g.search(&[0.9, 0.1, 0.0], 1, 16, None);
//! assert_eq!(hits[0].0, 7);
//! ```

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

pub mod kernels;
mod persist;
mod table;

use kernels::Simd;
use table::{CLAIMED, Element, Row, Table};

/// The highest level a node can be drawn at.
pub const MAX_LEVEL: usize = 15;

/// How many neighbours ahead of the one being scored are prefetched.
const AHEAD: usize = 1;

/// Stripes of the neighbour-list write locks.
const LOCK_STRIPES: usize = 1024;

/// How vectors are stored in the graph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// 32-bit floats, exact scores.
    F32,
    /// 16-bit floats: half the memory and bandwidth; scores within about 1e-3.
    #[default]
    F16,
}

/// Construction parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Links per node on the upper levels; level 0 keeps twice as many.
    pub m: usize,
    /// Beam width while inserting.
    pub ef_construction: usize,
    /// How vectors are stored.
    pub precision: Precision,
}

impl Default for Params {
    fn default() -> Self {
        Self { m: 16, ef_construction: 100, precision: Precision::F16 }
    }
}

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A vector of the wrong length.
    #[error("vector has {got} dimensions; the graph holds {want}")]
    Dimension {
        /// Length given.
        got: usize,
        /// The graph's dimension.
        want: usize,
    },
    /// The slot already holds a node.
    #[error("slot {0} is already in the graph")]
    Duplicate(usize),
    /// The slot is beyond what the graph can address.
    #[error("slot {0} is beyond the graph's capacity")]
    Capacity(usize),
    /// A graph file that is damaged or not a graph file.
    #[error("graph file is damaged: {0}")]
    Corrupt(String),
    /// A sound graph file for other parameters.
    #[error("graph file does not match: {0}")]
    Mismatch(String),
    /// Reading or writing the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A scored candidate: distance `1 - dot` (lower is nearer) and slot; ordered by distance,
/// then slot.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cand {
    d: f32,
    id: u32,
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
struct Visited {
    marks: Vec<u16>,
    epoch: u16,
}

impl Visited {
    fn reset(&mut self, slots: usize) {
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
    fn insert(&mut self, id: u32) -> bool {
        match self.marks.get_mut(id as usize) {
            Some(m) if *m != self.epoch => {
                *m = self.epoch;
                true
            }
            _ => false,
        }
    }
}

/// Upper-level neighbour lists of one node: for each level `1..=L`, `[count, link × m]`.
type Upper = HashMap<u32, Box<[AtomicU32]>>;

/// The graph. Every method takes `&self`: inserts may run in parallel with each other and with
/// searches.
pub struct Hnsw {
    dim: usize,
    params: Params,
    m0: usize,
    level_mult: f64,
    simd: Simd,
    table: Table,
    upper: RwLock<Upper>,
    /// `(level + 1) << 32 | slot` of the entry point; 0 while empty.
    entry: AtomicU64,
    len: AtomicUsize,
    /// One past the highest slot inserted.
    extent: AtomicUsize,
    locks: Box<[Mutex<()>]>,
    pool: Mutex<Vec<Visited>>,
    /// Held by an insert whose node is drawn above the current top level, for its whole
    /// linking (as hnswlib does): two such inserts at once would each link only up to the top
    /// they saw, leaving the new levels unconnected.
    grow: Mutex<()>,
}

impl std::fmt::Debug for Hnsw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hnsw")
            .field("dim", &self.dim)
            .field("params", &self.params)
            .field("nodes", &self.len())
            .field("simd", &self.simd)
            .finish()
    }
}

fn pack(slot: u32, level: usize) -> u64 {
    ((level as u64 + 1) << 32) | slot as u64
}

fn unpack(entry: u64) -> Option<(u32, usize)> {
    let level = (entry >> 32) as usize;
    (level > 0).then(|| (entry as u32, level - 1))
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hnsw {
    /// An empty graph for `dim`-dimensional vectors.
    pub fn new(dim: usize, params: Params) -> Self {
        let params = Params { m: params.m.clamp(2, 256), ef_construction: params.ef_construction.max(1), ..params };
        let m0 = params.m * 2;
        let element = match params.precision {
            Precision::F32 => Element::F32,
            Precision::F16 => Element::F16,
        };
        Self {
            dim,
            params,
            m0,
            level_mult: 1.0 / (params.m as f64).ln(),
            simd: Simd::detect(),
            table: Table::new(m0, dim, element),
            upper: RwLock::new(HashMap::new()),
            entry: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            extent: AtomicUsize::new(0),
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            pool: Mutex::new(Vec::new()),
            grow: Mutex::new(()),
        }
    }

    /// The vectors' dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The construction parameters (after clamping `m` to 2..=256).
    pub fn params(&self) -> Params {
        self.params
    }

    /// The kernels in use.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// Nodes in the graph.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory the graph holds (node table, upper lists, visited sets).
    pub fn memory_bytes(&self) -> usize {
        let upper: usize =
            self.upper.read().unwrap_or_else(|p| p.into_inner()).values().map(|b| b.len() * 4 + 48).sum();
        let visited: usize =
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|v| v.marks.len() * 2).sum();
        self.table.allocated_bytes() + upper + visited
    }

    /// The level a slot's node is drawn at: a hash of the slot, so the same slots always give
    /// the same levels, whatever order (or threads) they are inserted in.
    fn level_of(&self, slot: u32) -> usize {
        let mut x = (slot as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        let u = ((x >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * self.level_mult) as usize).min(MAX_LEVEL)
    }

    fn stripe(&self, slot: u32) -> &Mutex<()> {
        &self.locks[slot as usize % LOCK_STRIPES]
    }

    /// `q · v(slot)` for an `f32` query; `-inf` for a slot that holds no published node.
    #[inline]
    fn dot_query(&self, q: &[f32], slot: u32) -> f32 {
        match self.table.get(slot).and_then(|r| self.table.row(r)) {
            Some(Row::F32(v)) => self.simd.dot_f32(q, v),
            Some(Row::F16(v)) => self.simd.dot_f32_f16(q, v),
            None => f32::NEG_INFINITY,
        }
    }

    /// Starts loading the vector of `slot` into the cache.
    #[inline]
    fn prefetch(&self, slot: u32) {
        if let Some(record) = self.table.get(slot) {
            kernels::prefetch(record);
        }
    }

    /// `v(a) · v(b)` between two nodes; `-inf` if either holds no published node.
    fn dot_nodes(&self, a: u32, b: u32) -> f32 {
        let row = |s: u32| self.table.get(s).and_then(|r| self.table.row(r));
        match (row(a), row(b)) {
            (Some(Row::F32(x)), Some(Row::F32(y))) => self.simd.dot_f32(x, y),
            (Some(Row::F16(x)), Some(Row::F16(y))) => self.simd.dot_f16(x, y),
            _ => f32::NEG_INFINITY,
        }
    }

    /// The neighbour count and link words of `slot` at `level` (`upper` for levels above 0).
    #[inline]
    fn links<'a>(
        &'a self,
        slot: u32,
        level: usize,
        upper: Option<&'a Upper>,
    ) -> Option<(&'a AtomicU32, &'a [AtomicU32])> {
        if level == 0 {
            return self.table.get(slot).map(|r| self.table.links(r));
        }
        let lists = upper?.get(&slot)?;
        let at = (level - 1) * (self.params.m + 1);
        let list = lists.get(at..at + self.params.m + 1)?;
        Some((&list[0], &list[1..]))
    }

    fn checkout_visited(&self) -> Visited {
        let mut v = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default();
        v.reset(self.extent.load(Ordering::Acquire));
        v
    }

    fn checkin_visited(&self, v: Visited) {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }

    /// Greedy descent at one upper level: moves `cur` to a local minimum of the distance.
    fn greedy(&self, q: &[f32], cur: &mut Cand, level: usize, upper: &Upper) {
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
    fn search_level(
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

    /// The heuristic of the HNSW paper (and hnswlib): from candidates sorted nearest first, keep
    /// one only if it is nearer to the base than to every candidate already kept, up to `m`.
    fn select(&self, sorted: &[Cand], m: usize) -> Vec<Cand> {
        let mut kept: Vec<Cand> = Vec::with_capacity(m);
        for &c in sorted {
            if kept.len() >= m {
                break;
            }
            if kept.iter().all(|k| 1.0 - self.dot_nodes(c.id, k.id) >= c.d) {
                kept.push(c);
            }
        }
        kept
    }

    /// Adds `new` to the list of `slot` at `level`; a full list is re-pruned by [`Hnsw::select`].
    fn connect(&self, slot: u32, new: u32, level: usize, upper: Option<&Upper>) {
        let _g = lock(self.stripe(slot));
        let Some((count, links)) = self.links(slot, level, upper) else { return };
        let n = (count.load(Ordering::Acquire) as usize).min(links.len());
        if links[..n].iter().any(|l| l.load(Ordering::Relaxed) == new) {
            return;
        }
        if n < links.len() {
            links[n].store(new, Ordering::Release);
            count.store(n as u32 + 1, Ordering::Release);
            return;
        }
        let mut cands: Vec<Cand> = links
            .iter()
            .map(|l| l.load(Ordering::Acquire))
            .chain([new])
            .map(|id| Cand { d: 1.0 - self.dot_nodes(slot, id), id })
            .collect();
        cands.sort_unstable();
        let kept = self.select(&cands, links.len());
        for (link, k) in links.iter().zip(&kept) {
            link.store(k.id, Ordering::Release);
        }
        count.store(kept.len() as u32, Ordering::Release);
    }

    /// Inserts `vector` (unit length, `dim` long) as the node of `slot`.
    pub fn insert(&self, vector: &[f32], slot: usize) -> Result<(), Error> {
        if vector.len() != self.dim {
            return Err(Error::Dimension { got: vector.len(), want: self.dim });
        }
        if slot >= Table::CAPACITY {
            return Err(Error::Capacity(slot));
        }
        let id = slot as u32;
        let record = self.table.ensure(id).ok_or(Error::Capacity(slot))?;
        if record[0].compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Error::Duplicate(slot));
        }
        let level = self.level_of(id);
        self.table.write_vector(record, vector);
        if level > 0 {
            let lists = table::zeroed_words(level * (self.params.m + 1));
            self.upper.write().unwrap_or_else(|p| p.into_inner()).insert(id, lists);
        }
        record[0].store(level as u32 + 1, Ordering::Release);
        self.extent.fetch_max(slot + 1, Ordering::AcqRel);
        self.len.fetch_add(1, Ordering::AcqRel);
        self.link(vector, id, level);
        Ok(())
    }

    /// Links a published node into the graph.
    fn link(&self, q: &[f32], id: u32, level: usize) {
        let mut growing = None;
        let (entry, top) = loop {
            let packed = self.entry.load(Ordering::Acquire);
            match unpack(packed) {
                // Above the top: take the lock, then read the entry point again.
                Some((_, top)) if level > top && growing.is_none() => growing = Some(lock(&self.grow)),
                Some(e) => break e,
                None => {
                    if self.entry.compare_exchange(0, pack(id, level), Ordering::AcqRel, Ordering::Acquire).is_ok() {
                        return;
                    }
                }
            }
        };
        let mut cur = Cand { d: 1.0 - self.dot_query(q, entry), id: entry };
        if top > level {
            let upper = self.upper.read().unwrap_or_else(|p| p.into_inner());
            for l in (level + 1..=top).rev() {
                self.greedy(q, &mut cur, l, &upper);
            }
        }
        // First the node's own lists at every level, while nothing links to it yet; only then
        // the links to it. Another insert can reach the node only through those, so it never
        // walks a node whose lists are still being written (it would find no neighbours there,
        // link to that node alone, and lose that one link when the node's list is pruned).
        let mut visited = self.checkout_visited();
        let mut chosen: Vec<(usize, Vec<Cand>)> = Vec::with_capacity(level.min(top) + 1);
        for l in (0..=level.min(top)).rev() {
            let guard = (l > 0).then(|| self.upper.read().unwrap_or_else(|p| p.into_inner()));
            let upper = guard.as_deref();
            visited.reset(self.extent.load(Ordering::Acquire));
            let mut found = self
                .search_level(q, cur, self.params.ef_construction, (l, upper), None, &mut visited)
                .into_sorted_vec();
            found.retain(|c| c.id != id);
            let kept = self.select(&found, self.params.m);
            if let Some((count, links)) = self.links(id, l, upper) {
                let _g = lock(self.stripe(id));
                for (link, k) in links.iter().zip(&kept) {
                    link.store(k.id, Ordering::Release);
                }
                count.store(kept.len().min(links.len()) as u32, Ordering::Release);
            }
            if let Some(&nearest) = found.first() {
                cur = nearest;
            }
            chosen.push((l, kept));
        }
        for (l, kept) in chosen {
            let guard = (l > 0).then(|| self.upper.read().unwrap_or_else(|p| p.into_inner()));
            for k in &kept {
                self.connect(k.id, id, l, guard.as_deref());
            }
        }
        self.checkin_visited(visited);
        // `growing` is held until the entry point names this node.
        if level > top {
            let mut packed = self.entry.load(Ordering::Acquire);
            while unpack(packed).is_some_and(|(_, t)| t < level) {
                match self.entry.compare_exchange(packed, pack(id, level), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => packed = now,
                }
            }
        }
    }

    /// Inserts many `(vector, slot)` rows on `threads` threads (each takes the next row when it
    /// is free, so the work stays balanced). Stops at the first error.
    pub fn insert_many(&self, rows: &[(&[f32], usize)], threads: usize) -> Result<(), Error> {
        if threads <= 1 || rows.len() < 2 * threads {
            return rows.iter().try_for_each(|&(v, slot)| self.insert(v, slot));
        }
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(v, slot)) = rows.get(i) else { return Ok(()) };
                            if let Err(e) = self.insert(v, slot) {
                                next.store(rows.len(), Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    }

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
}

#[cfg(test)]
mod tests;
