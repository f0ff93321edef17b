//! Approximate nearest-neighbour search behind one small trait, [`AnnIndex`], with two HNSW
//! backends over unit vectors (where the dot product is the cosine), plus the exact scan they
//! are measured against ([`exact`]).
//!
//! Nodes are addressed by *slot*, the position of a vector in the engine's flat vector table.
//! Deleted or replaced slots stay in the graph and are excluded by the `keep` predicate during
//! the search (tombstones); the engine compacts when they pile up.
//!
//! Backends (flag `--ann`, stored in the data directory):
//!
//! * [`Backend::RcpHnsw`] (default): the project's own graph (the `rcp-hnsw` crate): contiguous
//!   `u32` neighbour lists beside the vectors they lead to, an epoch-tagged visited array,
//!   prefetching, AVX2/FMA/F16C kernels chosen at run time, parallel inserts under striped
//!   locks; saves and loads its graph, checked link by link.
//! * [`Backend::Usearch`]: the `usearch` library, SIMD kernels chosen at run time,
//!   flat neighbour lists, saves and loads its graph ([`AnnIndex::save`], [`load`]).
//! * [`Backend::HnswRs`]: the `hnsw_rs` crate; cannot save its graph, so it is rebuilt from the
//!   stored vectors on every start.
//!
//! Parameters (flags `--hnsw-m`, `--ef-construction`, `--ef-search`):
//!
//! * `m` (default 16): links per node and layer. More links raise recall and memory.
//! * `ef_construction` (default 100): beam width while inserting. Higher builds a better graph,
//!   more slowly.
//! * `ef_search` (default 64): beam width while searching; the engine uses
//!   `max(ef_search, candidateK)`, so `retrieve.candidateK` widens the search.

use std::cmp::Ordering;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

mod exact;
mod hnsw_rs;
mod rcp_hnsw;
#[cfg(feature = "usearch")]
mod usearch;

pub use exact::{dot, exact, exact_batch, exact_rows, exact_sorted};
pub use hnsw_rs::{HnswRsIndex, UnitDot};
pub use rcp_hnsw::RcpHnswIndex;
#[cfg(feature = "usearch")]
pub use usearch::UsearchIndex;

/// HNSW construction and search parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HnswParams {
    /// Links per node and layer (at most 256).
    pub m: usize,
    /// Beam width while inserting.
    pub ef_construction: usize,
    /// Default beam width while searching.
    pub ef_search: usize,
    /// How the graph's own copy of the vectors is stored (rcp-hnsw, usearch; hnsw_rs keeps `f32`).
    #[serde(default)]
    pub precision: Precision,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self { m: 16, ef_construction: 100, ef_search: 64, precision: Precision::default() }
    }
}

/// The element type of the vectors an index navigates by. The engine keeps the `f32` vectors
/// and rescores every candidate with them, so a narrower type only steers the walk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 32-bit floats: a second full copy of every vector.
    F32,
    /// 16-bit floats: half the memory and bandwidth of `f32`.
    #[default]
    F16,
}

impl Precision {
    /// The name used by `--ann-precision` and in `manifest.json`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
        }
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Precision::F32, Precision::F16]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown precision '{s}'; known: f32, f16"))
    }
}

/// Graphs up to this many nodes are built by sequential insertion, which makes the graph (and
/// so every search result) reproducible across restarts; larger ones are built in parallel.
pub const SEQUENTIAL_BUILD_MAX: usize = 5_000;

/// The library an [`AnnIndex`] is built with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// `rcp-hnsw`: the project's own graph; run-time SIMD dispatch, persistent graph.
    #[default]
    RcpHnsw,
    /// `usearch`: run-time SIMD dispatch, persistent graph. Needs the `usearch` feature: a
    /// build without it refuses the name (`--ann`) and a data directory whose graph uses it
    /// ([`Backend::available`]).
    Usearch,
    /// `hnsw_rs`: pure Rust, rebuilt on every start.
    HnswRs,
}

impl Backend {
    /// Every backend this build has, in the order `--ann` lists them.
    #[cfg(feature = "usearch")]
    pub const ALL: &'static [Backend] = &[Backend::RcpHnsw, Backend::Usearch, Backend::HnswRs];
    /// Every backend this build has, in the order `--ann` lists them.
    #[cfg(not(feature = "usearch"))]
    pub const ALL: &'static [Backend] = &[Backend::RcpHnsw, Backend::HnswRs];

    /// Whether this build has the backend (`usearch` needs its feature).
    pub fn available(self) -> bool {
        Backend::ALL.contains(&self)
    }

    /// The name used by `--ann` and in `manifest.json`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::RcpHnsw => "rcp-hnsw",
            Backend::Usearch => "usearch",
            Backend::HnswRs => "hnsw-rs",
        }
    }

    /// Whether the backend can save its graph and load it back.
    pub fn persists(self) -> bool {
        matches!(self, Backend::RcpHnsw | Backend::Usearch)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == Backend::Usearch.name() && !Backend::Usearch.available() {
            return Err("this build of rcp-dense has no usearch backend (rcp-dense's `usearch` feature)".into());
        }
        Backend::ALL.iter().copied().find(|b| b.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
            format!("unknown ANN backend '{s}'; known: {}", names.join(", "))
        })
    }
}

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnnError {
    /// The backend library reported an error.
    #[error("{backend}: {source}")]
    Backend {
        /// The backend.
        backend: Backend,
        /// The library's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The backend cannot save or load its graph.
    #[error("{0}: the graph cannot be saved or loaded; it is rebuilt from the vectors")]
    Unsupported(Backend),
    /// A loaded graph does not fit the store (dimension or node count).
    #[error("graph file does not match the store: {0}")]
    Mismatch(String),
}

/// A scored slot: the cosine of the query and the slot's vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The slot.
    pub slot: usize,
    /// Cosine similarity.
    pub score: f32,
}

/// Best first; ties by lower slot, so orderings are total and deterministic.
pub fn by_score(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score).then(a.slot.cmp(&b.slot))
}

/// An approximate nearest-neighbour index over unit vectors, addressed by slot.
///
/// All methods take `&self`: one writer may insert while readers search (the store serialises
/// writers); nodes inserted under slots the caller's `keep` rejects stay invisible.
pub trait AnnIndex: Send + Sync + fmt::Debug {
    /// The library behind the index.
    fn backend(&self) -> Backend;

    /// The parameters it was built with.
    fn params(&self) -> HnswParams;

    /// Nodes in the graph (tombstoned ones included).
    fn len(&self) -> usize;

    /// Whether the graph has no node.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts one vector under `slot`.
    fn insert(&self, vector: &[f32], slot: usize) -> Result<(), AnnError>;

    /// Inserts many rows, in parallel when there are more than [`SEQUENTIAL_BUILD_MAX`].
    fn insert_many(&self, rows: &[(&[f32], usize)]) -> Result<(), AnnError>;

    /// Up to `want` nodes nearest to `query` with a beam of `max(ef, want)`, best first, each
    /// scored by the backend's (possibly approximate) cosine.
    ///
    /// With `keep`, the predicate is applied during the walk: rejected nodes still guide the
    /// search but never take a place in the result, which finds the matches of a selective
    /// predicate at a higher cost.
    fn search(&self, query: &[f32], want: usize, ef: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<Scored>;

    /// Writes the graph to `path` (not atomically: the caller writes a temporary file and
    /// renames it), or [`AnnError::Unsupported`].
    fn save(&self, path: &Path) -> Result<(), AnnError>;

    /// Bytes of memory the index holds, as far as the backend reports it (0 when it does not).
    fn memory_bytes(&self) -> usize;
}

/// An empty index of `backend` for `dim`-dimensional vectors, sized for about `capacity` nodes.
pub fn new_index(backend: Backend, params: HnswParams, dim: usize, capacity: usize) -> Box<dyn AnnIndex> {
    match backend {
        Backend::HnswRs => Box::new(HnswRsIndex::new(params, capacity)),
        #[cfg(feature = "usearch")]
        Backend::Usearch => Box::new(UsearchIndex::new(params, dim, capacity)),
        // Not reachable from the command line or a data directory, which refuse it
        // (`Backend::available`); a program that names it anyway gets the default graph.
        #[cfg(not(feature = "usearch"))]
        Backend::Usearch => Box::new(RcpHnswIndex::new(params, dim)),
        Backend::RcpHnsw => Box::new(RcpHnswIndex::new(params, dim)),
    }
}

/// An index over `vectors` (a flat table of `dim`-sized rows) whose rows are inserted with
/// their row number as slot, skipping rows for which `keep` is false.
pub fn build(
    backend: Backend,
    params: HnswParams,
    vectors: &[f32],
    dim: usize,
    keep: impl Fn(usize) -> bool,
) -> Result<Box<dyn AnnIndex>, AnnError> {
    let n = vectors.len() / dim.max(1);
    let index = new_index(backend, params, dim, n);
    let rows: Vec<(&[f32], usize)> =
        (0..n).filter(|&s| keep(s)).map(|s| (&vectors[s * dim..(s + 1) * dim], s)).collect();
    index.insert_many(&rows)?;
    Ok(index)
}

/// Loads a graph saved by [`AnnIndex::save`]; `nodes` and `dim` are what the store expects it
/// to hold.
pub fn load(
    backend: Backend,
    params: HnswParams,
    dim: usize,
    nodes: usize,
    path: &Path,
) -> Result<Box<dyn AnnIndex>, AnnError> {
    let index: Box<dyn AnnIndex> = match backend {
        Backend::HnswRs => return Err(AnnError::Unsupported(backend)),
        #[cfg(feature = "usearch")]
        Backend::Usearch => Box::new(UsearchIndex::load(params, dim, path)?),
        #[cfg(not(feature = "usearch"))]
        Backend::Usearch => return Err(AnnError::Unsupported(backend)),
        Backend::RcpHnsw => Box::new(RcpHnswIndex::load(params, dim, path)?),
    };
    if index.len() != nodes {
        return Err(AnnError::Mismatch(format!("{} nodes, expected {nodes}", index.len())));
    }
    Ok(index)
}

/// How many threads a parallel build uses: every core.
pub(crate) fn build_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_unit;

    fn finds_itself_and_respects_keep(backend: Backend) {
        let dim = 16;
        let v = random_unit(500, dim, 3);
        let ann = build(backend, HnswParams::default(), &v, dim, |_| true).unwrap();
        assert_eq!(ann.backend(), backend);
        assert_eq!(ann.len(), 500);
        let q = &v[42 * dim..43 * dim];
        let hits = ann.search(q, 5, 64, None);
        assert_eq!(hits[0].slot, 42);
        assert!((hits[0].score - 1.0).abs() < 1e-5);
        let hits = ann.search(q, 5, 64, Some(&|s| s != 42 && s % 2 == 0));
        assert_eq!(hits.len(), 5);
        assert!(hits.iter().all(|h| h.slot != 42 && h.slot % 2 == 0));
        let exact_top = exact(&v, dim, q, 5, None, &|s| s != 42 && s % 2 == 0);
        assert_eq!(
            hits.iter().map(|h| h.slot).collect::<Vec<_>>(),
            exact_top.iter().map(|h| h.slot).collect::<Vec<_>>()
        );
    }

    #[test]
    fn hnsw_finds_itself_and_respects_keep() {
        finds_itself_and_respects_keep(Backend::HnswRs);
    }

    #[cfg(feature = "usearch")]
    #[test]
    fn usearch_finds_itself_and_respects_keep() {
        finds_itself_and_respects_keep(Backend::Usearch);
    }

    #[test]
    fn rcp_hnsw_finds_itself_and_respects_keep() {
        finds_itself_and_respects_keep(Backend::RcpHnsw);
    }

    #[test]
    fn backends_parse_and_print() {
        for &b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
            assert_eq!(serde_json::to_value(b).unwrap(), b.name());
        }
        let known = if cfg!(feature = "usearch") { "rcp-hnsw, usearch, hnsw-rs" } else { "rcp-hnsw, hnsw-rs" };
        assert!("faiss".parse::<Backend>().unwrap_err().contains(known));
    }

    #[test]
    fn parallel_build_reaches_high_recall() {
        let dim = 32;
        let n = SEQUENTIAL_BUILD_MAX + 1000;
        let v = random_unit(n, dim, 11);
        let queries = random_unit(50, dim, 12);
        let params = HnswParams { m: 12, ef_construction: 40, ..HnswParams::default() };
        for &backend in Backend::ALL {
            let ann = build(backend, params, &v, dim, |_| true).unwrap();
            assert_eq!(ann.len(), n);
            let mut hit = 0;
            for q in queries.chunks_exact(dim) {
                let truth = exact(&v, dim, q, 10, None, &|_| true);
                let found = ann.search(q, 10, 128, None);
                hit += found.iter().filter(|f| truth.iter().any(|t| t.slot == f.slot)).count();
            }
            let recall = hit as f64 / 500.0;
            assert!(recall >= 0.9, "{backend}: recall@10 {recall}");
        }
    }
}
