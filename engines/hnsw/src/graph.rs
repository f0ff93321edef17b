//! The graph itself: the node table (level-0 lists and vectors), the upper-level lists, the
//! entry point and the pool of visited sets; what reading a node costs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use crate::beam::Visited;
use crate::kernels::Simd;
use crate::params::{Params, Precision};
use crate::table::{Element, Row, Table};

/// The highest level a node can be drawn at.
pub const MAX_LEVEL: usize = 15;

/// Stripes of the neighbour-list write locks.
pub(crate) const LOCK_STRIPES: usize = 1024;

/// Upper-level neighbour lists of one node: for each level `1..=L`, `[count, link × m]`.
pub(crate) type Upper = HashMap<u32, Box<[AtomicU32]>>;

/// The graph. Every method takes `&self`: inserts may run in parallel with each other and with
/// searches.
pub struct Hnsw {
    /// The vectors' dimension.
    pub(crate) dim: usize,
    /// The construction parameters, clamped.
    pub(crate) params: Params,
    /// Links per node on level 0 (`2m`).
    pub(crate) m0: usize,
    /// `1 / ln m`: scales a node's drawn level.
    pub(crate) level_mult: f64,
    /// The kernels in use.
    pub(crate) simd: Simd,
    /// One record per slot: state, level-0 list and vector.
    pub(crate) table: Table,
    /// Each node's vector again as `i8` codes and a scale, one cache-line-aligned record per
    /// slot (no links): what the level-0 beam scores while it walks, when `int8_walk` is on.
    pub(crate) coarse: Table,
    /// Whether searches walk level 0 on the `i8` codes and rescore the beam from `table`.
    pub(crate) int8_walk: AtomicBool,
    /// The lists above level 0, for the nodes drawn there.
    pub(crate) upper: RwLock<Upper>,
    /// `(level + 1) << 32 | slot` of the entry point; 0 while empty.
    pub(crate) entry: AtomicU64,
    /// Nodes published.
    pub(crate) len: AtomicUsize,
    /// One past the highest slot inserted.
    pub(crate) extent: AtomicUsize,
    /// The striped neighbour-list write locks.
    pub(crate) locks: Box<[Mutex<()>]>,
    /// Visited sets returned by finished walks, for the next ones.
    pub(crate) pool: Mutex<Vec<Visited>>,
    /// Held by an insert whose node is drawn above the current top level, for its whole
    /// linking (as hnswlib does): two such inserts at once would each link only up to the top
    /// they saw, leaving the new levels unconnected.
    pub(crate) grow: Mutex<()>,
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

/// The entry-point word of `slot` drawn at `level`.
pub(crate) fn pack(slot: u32, level: usize) -> u64 {
    ((level as u64 + 1) << 32) | slot as u64
}

/// The slot and level an entry-point word names; `None` while the graph is empty.
pub(crate) fn unpack(entry: u64) -> Option<(u32, usize)> {
    let level = (entry >> 32) as usize;
    (level > 0).then(|| (entry as u32, level - 1))
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
            coarse: Table::new(0, dim, Element::I8),
            int8_walk: AtomicBool::new(true),
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
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).iter().map(Visited::memory_bytes).sum();
        self.table.allocated_bytes() + self.coarse.allocated_bytes() + upper + visited
    }

    /// Whether searches walk level 0 on `i8` codes of the vectors (the default): the beam is
    /// scored on the codes, a quarter of an `f32` row and half of an `f16` one, so a walk
    /// reads fewer cache lines; the beam it ends with is then rescored with the stored
    /// vectors, so the scores returned are those of the graph's precision either way. Inserts
    /// always score the stored vectors, so the graph is the same whichever is set.
    pub fn int8_walk(&self) -> bool {
        self.int8_walk.load(Ordering::Relaxed)
    }

    /// Turns the `i8` walk of [`Hnsw::int8_walk`] on or off for the searches that start
    /// after (off: every step scores the stored vectors, as before the codes existed).
    pub fn set_int8_walk(&self, on: bool) {
        self.int8_walk.store(on, Ordering::Relaxed);
    }

    /// Writes the `i8` codes of `v` for `slot` and publishes them.
    pub(crate) fn write_coarse(&self, slot: u32, v: &[f32]) {
        if let Some(record) = self.coarse.ensure(slot) {
            self.coarse.write_vector(record, v);
            record[0].store(1, Ordering::Release);
        }
    }

    /// `q · v(slot)` from the `i8` codes; from the stored vector where a slot has no codes.
    #[inline]
    pub(crate) fn dot_coarse(&self, q: &[f32], slot: u32) -> f32 {
        match self.coarse.get(slot).and_then(|r| self.coarse.row(r)) {
            Some(Row::I8(codes, scale)) => self.simd.dot_f32_i8(q, codes) * scale,
            _ => self.dot_query(q, slot),
        }
    }

    /// `q · v(slot)` for an `f32` query; `-inf` for a slot that holds no published node.
    #[inline]
    pub(crate) fn dot_query(&self, q: &[f32], slot: u32) -> f32 {
        match self.table.get(slot).and_then(|r| self.table.row(r)) {
            Some(Row::F32(v)) => self.simd.dot_f32(q, v),
            Some(Row::F16(v)) => self.simd.dot_f32_f16(q, v),
            Some(Row::I8(v, scale)) => self.simd.dot_f32_i8(q, v) * scale,
            None => f32::NEG_INFINITY,
        }
    }

    /// The neighbour count and link words of `slot` at `level` (`upper` for levels above 0).
    #[inline]
    pub(crate) fn links<'a>(
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

    /// A visited set from the pool (or a new one), reset for the current extent.
    pub(crate) fn checkout_visited(&self) -> Visited {
        let mut v = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default();
        v.reset(self.extent.load(Ordering::Acquire));
        v
    }

    /// Returns a visited set to the pool.
    pub(crate) fn checkin_visited(&self, v: Visited) {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }
}
