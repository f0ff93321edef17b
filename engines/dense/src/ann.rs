//! Approximate nearest-neighbour search: an HNSW graph (hnsw_rs) over unit vectors, where
//! the dot product is the cosine, plus the exact scan it is measured against.
//!
//! Nodes are addressed by *slot*, the position of a vector in the engine's flat vector table.
//! hnsw_rs cannot delete, so deleted or replaced slots stay in the graph and are excluded by
//! the `keep` predicate during the search (tombstones); the engine compacts when they pile up.
//!
//! Parameters (flags `--hnsw-m`, `--ef-construction`, `--ef-search`):
//!
//! * `m` (default 16): links per node and layer. More links raise recall and memory.
//! * `ef_construction` (default 100): beam width while inserting. Higher builds a better graph,
//!   more slowly.
//! * `ef_search` (default 64): beam width while searching; the engine uses
//!   `max(ef_search, candidateK)`, so `retrieve.candidateK` widens the search.

use std::cmp::Ordering;

use hnsw_rs::prelude::{Distance, Hnsw};

/// HNSW construction and search parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HnswParams {
    /// Links per node and layer (hnsw_rs `max_nb_connection`, at most 256).
    pub m: usize,
    /// Beam width while inserting.
    pub ef_construction: usize,
    /// Default beam width while searching.
    pub ef_search: usize,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self { m: 16, ef_construction: 100, ef_search: 64 }
    }
}

/// Graphs up to this many nodes are built by sequential insertion, which makes the graph (and
/// so every search result) reproducible across restarts; larger ones are built in parallel.
pub const SEQUENTIAL_BUILD_MAX: usize = 5_000;

const MAX_LAYERS: usize = 16;

/// `1 - a·b` for unit vectors: the cosine distance.
///
/// hnsw_rs's own `DistDot` asserts `a·b <= 1`, which rounding breaks for near-duplicate
/// vectors; this one clamps at zero instead.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnitDot;

impl Distance<f32> for UnitDot {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).max(0.0)
    }
}

/// The dot product, over fixed-size blocks with independent partial sums so the compiler
/// vectorises it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        let (x, y): (&[f32; LANES], &[f32; LANES]) = match (x.try_into(), y.try_into()) {
            (Ok(x), Ok(y)) => (x, y),
            _ => unreachable!("chunks_exact yields full blocks"),
        };
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
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

/// The HNSW graph.
pub struct Ann {
    hnsw: Hnsw<'static, f32, UnitDot>,
    params: HnswParams,
}

impl std::fmt::Debug for Ann {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ann").field("params", &self.params).field("nodes", &self.hnsw.get_nb_point()).finish()
    }
}

impl Ann {
    /// An empty graph sized for about `capacity` nodes.
    pub fn new(params: HnswParams, capacity: usize) -> Self {
        let hnsw = Hnsw::new(params.m.clamp(2, 256), capacity.max(1024), MAX_LAYERS, params.ef_construction, UnitDot);
        Self { hnsw, params }
    }

    /// A graph over `vectors` (a flat table of `dim`-sized rows) whose rows `0..n` are
    /// inserted with their row number as slot, skipping rows for which `keep` is false.
    pub fn build(params: HnswParams, vectors: &[f32], dim: usize, keep: impl Fn(usize) -> bool) -> Self {
        let n = vectors.len() / dim.max(1);
        let ann = Self::new(params, n);
        let rows: Vec<(&[f32], usize)> =
            (0..n).filter(|&s| keep(s)).map(|s| (&vectors[s * dim..(s + 1) * dim], s)).collect();
        if rows.len() <= SEQUENTIAL_BUILD_MAX {
            for row in rows {
                ann.hnsw.insert_slice(row);
            }
        } else {
            ann.hnsw.parallel_insert_slice(&rows);
        }
        ann
    }

    /// The parameters.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Nodes in the graph (tombstoned ones included).
    pub fn len(&self) -> usize {
        self.hnsw.get_nb_point()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts one vector under `slot`.
    pub fn insert(&self, vector: &[f32], slot: usize) {
        self.hnsw.insert_slice((vector, slot));
    }

    /// Up to `want` nodes nearest to `query` with a beam of `max(ef, want)`, best first.
    ///
    /// Without `keep` this is the plain HNSW search, which stops as soon as the beam cannot
    /// improve. With `keep`, the predicate is applied during the walk (rejected nodes still
    /// guide the search but never take a place in the result); hnsw_rs then explores until its
    /// candidates run out, which finds matches of a selective predicate at a higher cost.
    pub fn search(&self, query: &[f32], want: usize, ef: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<Scored> {
        if want == 0 || self.is_empty() {
            return Vec::new();
        }
        let found = match keep {
            None => self.hnsw.search(query, want, ef.max(want)),
            Some(keep) => {
                let filter = |id: &usize| keep(*id);
                let mut found = self.hnsw.search_filter(query, want, ef.max(want), Some(&filter));
                found.retain(|n| keep(n.d_id));
                found
            }
        };
        let mut out: Vec<Scored> =
            found.into_iter().map(|n| Scored { slot: n.d_id, score: 1.0 - n.distance }).collect();
        out.sort_by(by_score);
        out
    }
}

/// Exact top-`want` by cosine over the rows of `vectors` that `keep` accepts (`rows` limits
/// the scan to those slots when given), best first.
pub fn exact(
    vectors: &[f32],
    dim: usize,
    query: &[f32],
    want: usize,
    rows: Option<&[usize]>,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Scored> {
    let n = vectors.len() / dim.max(1);
    let score = |s: usize| Scored { slot: s, score: dot(query, &vectors[s * dim..(s + 1) * dim]) };
    let mut all: Vec<Scored> = match rows {
        Some(rows) => rows.iter().copied().filter(|&s| s < n && keep(s)).map(score).collect(),
        None => (0..n).filter(|&s| keep(s)).map(score).collect(),
    };
    if all.len() > want {
        all.select_nth_unstable_by(want, by_score);
        all.truncate(want);
    }
    all.sort_by(by_score);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_unit;

    #[test]
    fn dot_matches_naive() {
        let v = random_unit(2, 37, 7);
        let naive: f32 = v[..37].iter().zip(&v[37..]).map(|(a, b)| a * b).sum();
        assert!((dot(&v[..37], &v[37..]) - naive).abs() < 1e-5);
        assert_eq!(UnitDot.eval(&v[..37], &v[..37]), 0.0);
    }

    #[test]
    fn hnsw_finds_itself_and_respects_keep() {
        let dim = 16;
        let v = random_unit(500, dim, 3);
        let ann = Ann::build(HnswParams::default(), &v, dim, |_| true);
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
    fn exact_is_sorted_and_limited() {
        let dim = 8;
        let v = random_unit(100, dim, 9);
        let q = &v[..dim];
        let top = exact(&v, dim, q, 10, None, &|_| true);
        assert_eq!(top.len(), 10);
        assert_eq!(top[0].slot, 0);
        assert!(top.windows(2).all(|w| w[0].score >= w[1].score));
        let some = exact(&v, dim, q, 10, Some(&[5, 6, 7]), &|s| s != 6);
        assert_eq!(some.len(), 2);
    }
}
