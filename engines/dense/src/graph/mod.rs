//! The `graph` capability (§7.9) over the engine's own vectors: a k-nearest-neighbour document
//! graph ([`rcp_graph::DocGraph`], cosine weights) kept beside the index.
//!
//! - [`GraphIndex`]: the graph, loaded from `docgraph.rcpg` in the data directory (checked;
//!   damage is logged and the graph rebuilt from the stored vectors, never served in part),
//!   reconciled with the store on open (a node whose vector changed or whose document went is
//!   relinked or removed), updated by `index/add` and `index/delete`, saved after each write.
//! - [`communities`]: Louvain levels with their key terms, extractive summaries and centroids,
//!   recomputed on the first read after a write.
//! - [`ops`]: the five ops, `impl Graph for DenseEngine`.

mod args;
pub mod communities;
pub(crate) mod file;
pub mod ops;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Instant;

use rcp_graph::{DocGraph, LouvainOptions, PprOptions};

use crate::store::{Store, Table};
pub use args::GraphArgs;
use communities::Communities;
pub use ops::DenseGraph;

/// The graph file's name in the data directory.
pub const FILE: &str = "docgraph.rcpg";

/// Tunables of the document graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphOptions {
    /// Nearest neighbours linked to each new node.
    pub k: usize,
    /// Most edges a node keeps (its own `k` plus the strongest links from later nodes).
    pub max_degree: usize,
    /// Search beam for the neighbour queries.
    pub ef: usize,
    /// Personalised PageRank bounds (`local`, `drift`).
    pub ppr: PprOptions,
    /// Community detection.
    pub louvain: LouvainOptions,
}

impl Default for GraphOptions {
    fn default() -> Self {
        Self { k: 10, max_degree: 24, ef: 64, ppr: PprOptions::default(), louvain: LouvainOptions::default() }
    }
}

/// How the graph was obtained on open, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphSource {
    /// Read from the file and reconciled: nodes relinked, nodes removed.
    Loaded {
        /// Nodes added or relinked because the store had changed since the save.
        relinked: usize,
        /// Nodes dropped because their document is gone.
        removed: usize,
    },
    /// Built from the stored vectors, for this reason.
    Built(String),
}

/// The document graph of one store, with its derived communities.
#[derive(Debug)]
pub struct GraphIndex {
    store: Arc<Store>,
    graph: RwLock<DocGraph>,
    /// Communities of the current graph; `None` after a write until the next read needs them.
    communities: Mutex<Option<Arc<Communities>>>,
    path: Option<PathBuf>,
    options: GraphOptions,
}

/// The content tag of a stored vector: its CRC-32, so a node can tell whether it still
/// describes the document of the same id.
pub(crate) fn vector_tag(v: &[f32]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for x in v {
        h.update(&x.to_le_bytes());
    }
    h.finalize()
}

impl GraphIndex {
    /// Opens the graph of `store`: from `dir/docgraph.rcpg` when it is intact (then
    /// reconciled with the store and saved if that changed anything), else built from the
    /// stored vectors and saved. Without `dir` the graph lives in memory.
    pub fn open(store: Arc<Store>, dir: Option<&Path>, options: GraphOptions) -> std::io::Result<(Self, GraphSource)> {
        let path = dir.map(|d| d.join(FILE));
        let loaded = match &path {
            Some(p) => file::load(p),
            None => Err("no data directory".to_owned()),
        };
        let index = |graph| Self {
            store: Arc::clone(&store),
            graph: RwLock::new(graph),
            communities: Mutex::new(None),
            path: path.clone(),
            options,
        };
        let (this, source) = match loaded {
            Ok(graph) if graph.max_degree() == options.max_degree => {
                let this = index(graph);
                let (relinked, removed) = this.reconcile();
                (this, GraphSource::Loaded { relinked, removed })
            }
            Ok(graph) => {
                let why = format!("saved with {} edges per node, {} wanted", graph.max_degree(), options.max_degree);
                let this = index(DocGraph::new(options.max_degree));
                this.reconcile();
                (this, GraphSource::Built(why))
            }
            Err(why) => {
                let this = index(DocGraph::new(options.max_degree));
                this.reconcile();
                (this, GraphSource::Built(why))
            }
        };
        if !matches!(source, GraphSource::Loaded { relinked: 0, removed: 0 }) {
            this.save()?;
        }
        Ok((this, source))
    }

    /// The options.
    pub fn options(&self) -> &GraphOptions {
        &self.options
    }

    /// The store the graph describes.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Reads the graph.
    pub fn read(&self) -> RwLockReadGuard<'_, DocGraph> {
        self.graph.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes the graph and its communities (when detected) hold on the heap; the vectors
    /// stay in the store and are not counted.
    pub fn heap_bytes(&self) -> (usize, usize) {
        let communities =
            self.communities.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, |c| c.heap_bytes());
        (self.read().heap_bytes(), communities)
    }

    /// Brings the graph in line with the store: drops nodes whose document is gone, relinks
    /// nodes whose vector changed and links documents the graph lacks. Returns (relinked,
    /// removed).
    fn reconcile(&self) -> (usize, usize) {
        let started = Instant::now();
        let (relinked, removed) = {
            let table = self.store.read();
            let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
            let stale: Vec<String> = graph
                .nodes()
                .filter_map(|n| {
                    let id = graph.id(n)?;
                    let fresh = table.slot(id).is_some_and(|s| vector_tag(table.vector(s)) == graph.tag(n));
                    (!fresh).then(|| id.to_owned())
                })
                .collect();
            let mut removed = 0;
            for id in &stale {
                if table.slot(id).is_none() {
                    removed += 1;
                }
                graph.remove(id);
            }
            let missing: Vec<String> = (0..table.vectors().len())
                .filter_map(|s| table.doc(s).map(|d| d.id.clone()))
                .filter(|id| graph.node(id).is_none())
                .collect();
            self.link(&table, &mut graph, &missing);
            (missing.len(), removed)
        };
        if relinked > 0 {
            tracing::debug!(nodes = relinked, ms = started.elapsed().as_millis() as u64, "graph nodes linked");
        }
        self.invalidate();
        (relinked, removed)
    }

    /// Links each of `ids` (live in `table`) to its `k` nearest live neighbours.
    fn link(&self, table: &Table, graph: &mut DocGraph, ids: &[String]) {
        let planner = self.store.options().planner;
        // Nodes first, so links between the new documents land whichever comes first.
        for id in ids {
            if let Some(slot) = table.slot(id) {
                graph.upsert(id, vector_tag(table.vector(slot)), &[]);
            }
        }
        for id in ids {
            let Some(slot) = table.slot(id) else { continue };
            let v = table.vector(slot);
            let (found, _) =
                table.search(v, self.options.k + 1, self.options.ef.max(self.options.k + 1), None, &planner);
            let neighbours: Vec<(&str, f32)> = found
                .iter()
                .filter(|s| s.slot != slot)
                .filter_map(|s| table.doc(s.slot).map(|d| (d.id.as_str(), s.score)))
                .take(self.options.k)
                .collect();
            let node = graph.upsert(id, vector_tag(v), &[]);
            for (other, w) in neighbours {
                if let Some(o) = graph.node(other) {
                    graph.link(node, o, w);
                }
            }
        }
    }

    /// After `index/add`: (re)links the written documents and saves the graph.
    pub fn upserted(&self, ids: &[String]) -> std::io::Result<()> {
        {
            let table = self.store.read();
            let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
            // A replaced document loses its old edges before it is linked again.
            for id in ids {
                graph.remove(id);
            }
            self.link(&table, &mut graph, ids);
        }
        self.invalidate();
        self.save()
    }

    /// After `index/delete`: removes the documents, relinks neighbours left with fewer than
    /// half their `k` edges (bounded: only nodes that lost an edge) and saves the graph.
    pub fn deleted(&self, ids: &[String]) -> std::io::Result<()> {
        {
            let table = self.store.read();
            let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
            let mut touched = Vec::new();
            for id in ids {
                touched.extend(graph.remove(id));
            }
            touched.sort_unstable();
            touched.dedup();
            let thin: Vec<String> = touched
                .into_iter()
                .filter(|&n| graph.neighbors(n).len() < self.options.k.div_ceil(2))
                .filter_map(|n| graph.id(n).map(str::to_owned))
                .collect();
            for id in &thin {
                graph.remove(id);
            }
            self.link(&table, &mut graph, &thin);
        }
        self.invalidate();
        self.save()
    }

    fn invalidate(&self) {
        *self.communities.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The communities of the current graph, computed now if a write made them stale.
    pub fn communities(&self) -> Arc<Communities> {
        let mut slot = self.communities.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = slot.as_ref() {
            return Arc::clone(c);
        }
        let table = self.store.read();
        let graph = self.read();
        let c = Arc::new(Communities::detect(&graph, &table, &self.options.louvain));
        *slot = Some(Arc::clone(&c));
        c
    }

    /// Saves the graph (temporary file, fsync, rename) when it has a data directory.
    fn save(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let bytes = rcp_graph::persist::encode(&self.read(), self.store.write_position().0);
        file::save(path, &bytes)
    }
}
