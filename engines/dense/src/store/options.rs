//! The tunables of the store, given on the command line.

use crate::ann::{Backend, HnswParams, Precision};

use super::plan::PlannerOptions;

/// Tunables of the store.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreOptions {
    /// HNSW parameters to change; the others keep their value in the manifest (or the default).
    pub hnsw: HnswOverride,
    /// The ANN backend to switch to; `None` keeps the stored one (or the default).
    pub ann: Option<Backend>,
    /// The filter planner's tunables (and the size below which every search is exact).
    pub planner: PlannerOptions,
    /// Compact when tombstones reach this fraction of the slots (and at least 64 of them).
    pub compact_ratio: f64,
    /// Snapshot when the log grows past this many bytes.
    pub wal_limit: u64,
    /// Build no graph (bulk loading with `rcp-dense index`: the server builds it on start).
    pub defer_graph: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            hnsw: HnswOverride::default(),
            ann: None,
            planner: PlannerOptions::default(),
            compact_ratio: 0.25,
            wal_limit: 256 << 20,
            defer_graph: false,
        }
    }
}

/// HNSW parameters given on the command line; `None` keeps the stored (or default) value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HnswOverride {
    /// Links per node and layer.
    pub m: Option<usize>,
    /// Beam width while building.
    pub ef_construction: Option<usize>,
    /// Beam width while searching.
    pub ef_search: Option<usize>,
    /// Element type of the graph's vectors.
    pub precision: Option<Precision>,
}

impl HnswOverride {
    /// `base` with the given values replaced.
    pub fn apply(&self, base: HnswParams) -> HnswParams {
        HnswParams {
            m: self.m.unwrap_or(base.m),
            ef_construction: self.ef_construction.unwrap_or(base.ef_construction),
            ef_search: self.ef_search.unwrap_or(base.ef_search),
            precision: self.precision.unwrap_or(base.precision),
        }
    }
}
