//! The `serve` flags of the `graph` capability.

use std::path::Path;
use std::sync::Arc;

use clap::Args;

use super::{GraphIndex, GraphOptions, GraphSource};
use crate::store::Store;

/// `--graph` and its tunables.
#[derive(Debug, Clone, Args)]
pub struct GraphArgs {
    /// Serve the `graph` capability (§7.9) from a k-nearest-neighbour graph of the documents,
    /// saved as docgraph.rcpg in the data directory and kept up to date by index/add and
    /// index/delete; also serves `memory` (§7.17) from the graph's communities (memory.rcpm).
    #[arg(long)]
    pub graph: bool,
    /// Nearest neighbours linked to each document in the graph.
    #[arg(long, value_name = "K", default_value_t = GraphOptions::default().k as u16, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub graph_k: u16,
}

impl GraphArgs {
    /// The graph of `store` when `--graph` was given: loaded from `dir` (reconciled) or built,
    /// with one log line saying which.
    pub fn open(&self, store: &Arc<Store>, dir: Option<&Path>) -> std::io::Result<Option<Arc<GraphIndex>>> {
        if !self.graph {
            return Ok(None);
        }
        let k = usize::from(self.graph_k);
        let options = GraphOptions { k, max_degree: k * 2 + 4, ..GraphOptions::default() };
        let started = std::time::Instant::now();
        let (index, source) = GraphIndex::open(Arc::clone(store), dir, options)?;
        let (nodes, edges) = {
            let g = index.read();
            (g.len(), g.edge_count())
        };
        let ms = started.elapsed().as_millis() as u64;
        match source {
            GraphSource::Loaded { relinked, removed } => {
                tracing::info!(nodes, edges, relinked, removed, ms, "document graph loaded")
            }
            GraphSource::Built(_) if dir.is_none() => {
                tracing::info!(nodes, edges, ms, "document graph built in memory")
            }
            GraphSource::Built(reason) => tracing::warn!(nodes, edges, ms, %reason, "document graph rebuilt"),
        }
        Ok(Some(Arc::new(index)))
    }
}
