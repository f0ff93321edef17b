//! The [`rcp_hnsw`] backend: the project's own HNSW graph (flat neighbour lists, vectors in
//! place as `f16` or `f32`, SIMD kernels chosen at run time, parallel inserts, a checked
//! graph file).

use std::path::Path;

use rcp_hnsw::Hnsw;

use super::{AnnError, AnnIndex, Backend, HnswParams, Precision, SEQUENTIAL_BUILD_MAX, Scored, build_threads};

/// An HNSW graph built with `rcp-hnsw`.
#[derive(Debug)]
pub struct RcpHnswIndex {
    graph: Hnsw,
    params: HnswParams,
}

fn graph_params(p: HnswParams) -> rcp_hnsw::Params {
    rcp_hnsw::Params {
        m: p.m,
        ef_construction: p.ef_construction,
        precision: match p.precision {
            Precision::F32 => rcp_hnsw::Precision::F32,
            Precision::F16 => rcp_hnsw::Precision::F16,
        },
    }
}

fn error(e: rcp_hnsw::Error) -> AnnError {
    match e {
        rcp_hnsw::Error::Mismatch(why) => AnnError::Mismatch(why),
        e => AnnError::Backend { backend: Backend::RcpHnsw, source: Box::new(e) },
    }
}

impl RcpHnswIndex {
    /// An empty graph for `dim`-dimensional vectors.
    pub fn new(params: HnswParams, dim: usize) -> Self {
        Self { graph: Hnsw::new(dim, graph_params(params)), params }
    }

    /// Loads a graph saved by [`AnnIndex::save`].
    pub fn load(params: HnswParams, dim: usize, path: &Path) -> Result<Self, AnnError> {
        Ok(Self { graph: Hnsw::load(path, dim, graph_params(params)).map_err(error)?, params })
    }

    /// Loads a graph from the bytes of a file saved by [`AnnIndex::save`].
    pub fn from_bytes(params: HnswParams, dim: usize, bytes: &[u8]) -> Result<Self, AnnError> {
        Ok(Self { graph: Hnsw::from_bytes(bytes, dim, graph_params(params)).map_err(error)?, params })
    }
}

impl AnnIndex for RcpHnswIndex {
    fn backend(&self) -> Backend {
        Backend::RcpHnsw
    }

    fn params(&self) -> HnswParams {
        self.params
    }

    fn len(&self) -> usize {
        self.graph.len()
    }

    fn insert(&self, vector: &[f32], slot: usize) -> Result<(), AnnError> {
        self.graph.insert(vector, slot).map_err(error)
    }

    fn insert_many(&self, rows: &[(&[f32], usize)]) -> Result<(), AnnError> {
        let threads = if rows.len() <= SEQUENTIAL_BUILD_MAX { 1 } else { build_threads() };
        self.graph.insert_many(rows, threads).map_err(error)
    }

    fn search(&self, query: &[f32], want: usize, ef: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<Scored> {
        self.graph.search(query, want, ef, keep).into_iter().map(|(slot, score)| Scored { slot, score }).collect()
    }

    fn save(&self, path: &Path) -> Result<(), AnnError> {
        self.graph.save(path).map_err(error)
    }

    fn memory_bytes(&self) -> usize {
        self.graph.memory_bytes()
    }
}
