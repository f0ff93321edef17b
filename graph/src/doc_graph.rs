//! The weighted undirected document graph: nodes named by document id, k-nearest-neighbour
//! edges weighted by cosine similarity, at most `max_degree` edges per node.

use std::collections::HashMap;

/// A node's index in the graph (stable until the node is removed; freed indexes are reused).
pub type NodeId = u32;

/// One half of an undirected edge, as stored in a node's adjacency list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    /// The other end.
    pub to: NodeId,
    /// The weight (cosine similarity, > 0).
    pub weight: f32,
}

/// A weighted undirected graph of documents.
///
/// Every edge is stored in both ends' lists. A node keeps at most `max_degree` edges: when a
/// new edge would exceed that at either end, the weakest edge of that end goes (from both
/// ends), so memory stays bounded by `nodes × max_degree`.
#[derive(Debug, Clone, PartialEq)]
pub struct DocGraph {
    ids: Vec<Option<String>>,
    tags: Vec<u32>,
    adj: Vec<Vec<Edge>>,
    index: HashMap<String, NodeId>,
    free: Vec<NodeId>,
    max_degree: usize,
}

impl DocGraph {
    /// An empty graph whose nodes keep at most `max_degree` edges (at least 1).
    pub fn new(max_degree: usize) -> Self {
        Self {
            ids: Vec::new(),
            tags: Vec::new(),
            adj: Vec::new(),
            index: HashMap::new(),
            free: Vec::new(),
            max_degree: max_degree.max(1),
        }
    }

    /// Bytes the graph holds on the heap, counted from capacities: node ids, content tags,
    /// edge lists, the id index (a hash table's slots estimated as its capacity) and freed
    /// indexes.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let ids = self.ids.capacity() * size_of::<Option<String>>()
            + self.ids.iter().flatten().map(String::capacity).sum::<usize>();
        let adj = self.adj.capacity() * size_of::<Vec<Edge>>()
            + self.adj.iter().map(|a| a.capacity() * size_of::<Edge>()).sum::<usize>();
        let index = self.index.capacity() * (size_of::<String>() + size_of::<NodeId>() + 1)
            + self.index.keys().map(String::capacity).sum::<usize>();
        ids + adj + index + (self.tags.capacity() + self.free.capacity()) * size_of::<u32>()
    }

    /// The cap on edges per node.
    pub fn max_degree(&self) -> usize {
        self.max_degree
    }

    /// Live nodes.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// One past the largest node index (the size of per-node arrays).
    pub fn capacity(&self) -> usize {
        self.ids.len()
    }

    /// Undirected edges.
    pub fn edge_count(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// The node of a document id.
    pub fn node(&self, id: &str) -> Option<NodeId> {
        self.index.get(id).copied()
    }

    /// The document id of a live node.
    pub fn id(&self, node: NodeId) -> Option<&str> {
        self.ids.get(node as usize).and_then(|s| s.as_deref())
    }

    /// The caller's content tag of a live node (for example a checksum of its vector), used to
    /// tell whether the node still describes the stored document.
    pub fn tag(&self, node: NodeId) -> u32 {
        self.tags.get(node as usize).copied().unwrap_or(0)
    }

    /// The edges of a node (empty for a free index).
    pub fn neighbors(&self, node: NodeId) -> &[Edge] {
        self.adj.get(node as usize).map_or(&[], Vec::as_slice)
    }

    /// The sum of a node's edge weights.
    pub fn degree(&self, node: NodeId) -> f64 {
        self.neighbors(node).iter().map(|e| f64::from(e.weight)).sum()
    }

    /// The live nodes, in index order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.ids.iter().enumerate().filter(|(_, id)| id.is_some()).map(|(i, _)| i as NodeId)
    }

    /// The weight of the edge between `a` and `b`, if any.
    pub fn weight(&self, a: NodeId, b: NodeId) -> Option<f32> {
        self.neighbors(a).iter().find(|e| e.to == b).map(|e| e.weight)
    }

    /// Adds the node `id` (or replaces its edges and tag if present) and links it to
    /// `neighbours` (document ids with cosine weights; unknown ids, itself, non-positive or
    /// non-finite weights are skipped). Returns the node.
    pub fn upsert(&mut self, id: &str, tag: u32, neighbours: &[(&str, f32)]) -> NodeId {
        let node = match self.node(id) {
            Some(n) => {
                self.unlink_all(n);
                n
            }
            None => self.allocate(id),
        };
        self.tags[node as usize] = tag;
        for &(other, w) in neighbours {
            if let Some(o) = self.node(other)
                && o != node
                && w.is_finite()
                && w > 0.0
            {
                self.link(node, o, w);
            }
        }
        node
    }

    /// Removes the node `id` and its edges; returns the nodes that lost an edge.
    pub fn remove(&mut self, id: &str) -> Vec<NodeId> {
        let Some(node) = self.index.remove(id) else {
            return Vec::new();
        };
        let touched: Vec<NodeId> = self.adj[node as usize].iter().map(|e| e.to).collect();
        self.unlink_all(node);
        self.ids[node as usize] = None;
        self.tags[node as usize] = 0;
        self.free.push(node);
        touched
    }

    /// Adds the edge `a`–`b` (or raises its weight), evicting the weakest edge of an end that
    /// would exceed `max_degree` — unless the new edge is itself the weakest there.
    pub fn link(&mut self, a: NodeId, b: NodeId, weight: f32) {
        if a == b || !(weight.is_finite() && weight > 0.0) {
            return;
        }
        if let Some(e) = self.adj[a as usize].iter_mut().find(|e| e.to == b) {
            e.weight = e.weight.max(weight);
            if let Some(r) = self.adj[b as usize].iter_mut().find(|e| e.to == a) {
                r.weight = r.weight.max(weight);
            }
            return;
        }
        for end in [a, b] {
            if self.adj[end as usize].len() >= self.max_degree {
                let weakest = weakest(&self.adj[end as usize]);
                if weakest.weight >= weight {
                    return;
                }
                self.unlink(end, weakest.to);
            }
        }
        self.adj[a as usize].push(Edge { to: b, weight });
        self.adj[b as usize].push(Edge { to: a, weight });
    }

    fn unlink(&mut self, a: NodeId, b: NodeId) {
        self.adj[a as usize].retain(|e| e.to != b);
        self.adj[b as usize].retain(|e| e.to != a);
    }

    fn unlink_all(&mut self, node: NodeId) {
        let edges = std::mem::take(&mut self.adj[node as usize]);
        for e in edges {
            self.adj[e.to as usize].retain(|r| r.to != node);
        }
    }

    fn allocate(&mut self, id: &str) -> NodeId {
        let node = match self.free.pop() {
            Some(n) => {
                self.ids[n as usize] = Some(id.to_owned());
                n
            }
            None => {
                self.ids.push(Some(id.to_owned()));
                self.tags.push(0);
                self.adj.push(Vec::new());
                (self.ids.len() - 1) as NodeId
            }
        };
        self.index.insert(id.to_owned(), node);
        node
    }

    /// Rebuilds the graph from its parts (the file format's decoder): ids by node (`None` for
    /// a free index), tags and adjacency lists, which must be symmetric and in range.
    pub(crate) fn from_parts(
        max_degree: usize,
        ids: Vec<Option<String>>,
        tags: Vec<u32>,
        adj: Vec<Vec<Edge>>,
    ) -> Result<Self, String> {
        let n = ids.len();
        if tags.len() != n || adj.len() != n {
            return Err("node arrays of different lengths".into());
        }
        let mut index = HashMap::with_capacity(n);
        let mut free = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            match id {
                Some(id) => {
                    if index.insert(id.clone(), i as NodeId).is_some() {
                        return Err(format!("document id {id:?} names two nodes"));
                    }
                }
                None => free.push(i as NodeId),
            }
        }
        for (i, edges) in adj.iter().enumerate() {
            if edges.len() > max_degree.max(1) {
                return Err(format!("node {i} has {} edges, more than {max_degree}", edges.len()));
            }
            for e in edges {
                let to = e.to as usize;
                if to >= n || ids[to].is_none() || ids[i].is_none() || to == i {
                    return Err(format!("edge {i}-{to} names a missing node"));
                }
                if !(e.weight.is_finite() && e.weight > 0.0) {
                    return Err(format!("edge {i}-{to} has weight {}", e.weight));
                }
                if !adj[to].iter().any(|r| r.to as usize == i) {
                    return Err(format!("edge {i}-{to} has no reverse"));
                }
            }
        }
        free.reverse();
        Ok(Self { ids, tags, adj, index, free, max_degree: max_degree.max(1) })
    }

    /// The parts the file format writes.
    pub(crate) fn parts(&self) -> Parts<'_> {
        Parts { max_degree: self.max_degree, ids: &self.ids, tags: &self.tags, adj: &self.adj }
    }
}

/// A graph's fields, borrowed for encoding.
pub(crate) struct Parts<'a> {
    pub(crate) max_degree: usize,
    pub(crate) ids: &'a [Option<String>],
    pub(crate) tags: &'a [u32],
    pub(crate) adj: &'a [Vec<Edge>],
}

/// The weakest of a non-empty list of edges.
fn weakest(edges: &[Edge]) -> Edge {
    edges.iter().copied().fold(edges[0], |w, e| if e.weight < w.weight { e } else { w })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_symmetric_and_capped() {
        let mut g = DocGraph::new(2);
        g.upsert("a", 0, &[]);
        g.upsert("b", 0, &[("a", 0.9)]);
        g.upsert("c", 0, &[("a", 0.8)]);
        g.upsert("d", 0, &[("a", 0.95)]);
        let a = g.node("a").unwrap();
        assert_eq!(g.neighbors(a).len(), 2, "a keeps its two strongest edges");
        assert!(g.weight(a, g.node("d").unwrap()).is_some());
        assert!(g.weight(a, g.node("c").unwrap()).is_none(), "the weakest edge was evicted");
        assert!(g.neighbors(g.node("c").unwrap()).is_empty(), "from both ends");
        for n in g.nodes() {
            for e in g.neighbors(n) {
                assert_eq!(g.weight(e.to, n), Some(e.weight));
            }
        }
    }

    #[test]
    fn heap_bytes_count_ids_and_both_halves_of_every_edge() {
        let mut g = DocGraph::new(4);
        let empty = g.heap_bytes();
        for i in 0..100 {
            let prev = format!("n{}", i.max(1) - 1);
            g.upsert(&format!("n{i}"), 0, &[(prev.as_str(), 0.5)]);
        }
        assert_eq!(g.edge_count(), 99);
        let floor = 99 * 2 * std::mem::size_of::<Edge>() + 100 * (2 + std::mem::size_of::<Option<String>>());
        assert!(g.heap_bytes() >= empty + floor, "{} < {empty} + {floor}", g.heap_bytes());
    }

    #[test]
    fn remove_frees_and_reuses() {
        let mut g = DocGraph::new(4);
        g.upsert("a", 0, &[]);
        g.upsert("b", 0, &[("a", 0.5)]);
        let touched = g.remove("a");
        assert_eq!(touched, vec![g.node("b").unwrap()]);
        assert_eq!(g.len(), 1);
        assert_eq!(g.edge_count(), 0);
        let c = g.upsert("c", 7, &[("b", 0.3), ("zz", 0.9), ("c", 1.0), ("b", f32::NAN)]);
        assert_eq!(c, 0, "the freed index is reused");
        assert_eq!(g.tag(c), 7);
        assert_eq!(g.edge_count(), 1, "unknown ids, self and NaN are skipped");
    }

    #[test]
    fn upsert_replaces_edges() {
        let mut g = DocGraph::new(4);
        g.upsert("a", 0, &[]);
        g.upsert("b", 0, &[]);
        g.upsert("c", 0, &[("a", 0.5)]);
        g.upsert("c", 1, &[("b", 0.5)]);
        let (a, c) = (g.node("a").unwrap(), g.node("c").unwrap());
        assert!(g.neighbors(a).is_empty());
        assert_eq!(g.neighbors(c).len(), 1);
    }
}
