//! The [`hnsw_rs`] backend: a pure-Rust HNSW graph. It cannot delete (tombstones are filtered by
//! the caller's `keep`) and cannot be loaded without leaking its memory, so it is rebuilt from the
//! stored vectors on every start.

use std::path::Path;

use hnsw_rs::prelude::{Distance, Hnsw};

use super::{AnnError, AnnIndex, Backend, HnswParams, SEQUENTIAL_BUILD_MAX, Scored, by_score, dot};

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

/// An HNSW graph built with `hnsw_rs`.
pub struct HnswRsIndex {
    hnsw: Hnsw<'static, f32, UnitDot>,
    params: HnswParams,
}

impl std::fmt::Debug for HnswRsIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswRsIndex").field("params", &self.params).field("nodes", &self.hnsw.get_nb_point()).finish()
    }
}

impl HnswRsIndex {
    /// An empty graph sized for about `capacity` nodes.
    pub fn new(params: HnswParams, capacity: usize) -> Self {
        let hnsw = Hnsw::new(params.m.clamp(2, 256), capacity.max(1024), MAX_LAYERS, params.ef_construction, UnitDot);
        Self { hnsw, params }
    }
}

impl AnnIndex for HnswRsIndex {
    fn backend(&self) -> Backend {
        Backend::HnswRs
    }

    fn params(&self) -> HnswParams {
        self.params
    }

    fn len(&self) -> usize {
        self.hnsw.get_nb_point()
    }

    fn insert(&self, vector: &[f32], slot: usize) -> Result<(), AnnError> {
        self.hnsw.insert_slice((vector, slot));
        Ok(())
    }

    fn insert_many(&self, rows: &[(&[f32], usize)]) -> Result<(), AnnError> {
        if rows.len() <= SEQUENTIAL_BUILD_MAX {
            for &(v, slot) in rows {
                self.hnsw.insert_slice((v, slot));
            }
        } else {
            self.hnsw.parallel_insert_slice(&rows.to_vec());
        }
        Ok(())
    }

    /// Without `keep` this is the plain HNSW search, which stops as soon as the beam cannot
    /// improve; with `keep`, hnsw_rs explores until its candidates run out.
    fn search(&self, query: &[f32], want: usize, ef: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<Scored> {
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

    fn save(&self, _path: &Path) -> Result<(), AnnError> {
        Err(AnnError::Unsupported(Backend::HnswRs))
    }

    fn memory_bytes(&self) -> usize {
        0
    }
}
