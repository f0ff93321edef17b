//! Personalised PageRank (§7.9 `local`) by the push algorithm of Andersen, Chung and Lang
//! ("Local graph partitioning using PageRank vectors", FOCS 2006), on the weighted graph, and
//! the strongest paths from the seeds that explain a hit (`provenance`, §7.7.2).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

use crate::{DocGraph, NodeId};

/// Bounds of one personalised PageRank run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PprOptions {
    /// Teleport (restart) probability α.
    pub alpha: f64,
    /// Residual tolerance ε: a node is pushed while its residual is at least ε × its degree.
    pub epsilon: f64,
    /// Most pushes (the work bound; the result is the approximation reached by then).
    pub max_pushes: usize,
}

impl Default for PprOptions {
    fn default() -> Self {
        Self { alpha: 0.15, epsilon: 1e-6, max_pushes: 200_000 }
    }
}

/// The personalised PageRank vector for the restart distribution `seeds` (nodes with
/// non-negative weights, normalised here), as `(node, score)` best first; ties by node.
///
/// Each push moves α of a node's residual into its estimate and spreads the rest over its
/// edges in proportion to their weights; a node without edges keeps its whole residual.
/// The scores sum to at most 1; the gap is the residual left under ε.
pub fn personalized_pagerank(graph: &DocGraph, seeds: &[(NodeId, f64)], options: &PprOptions) -> Vec<(NodeId, f64)> {
    let total: f64 = seeds.iter().map(|&(_, w)| w.max(0.0)).filter(|w| w.is_finite()).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut estimate: HashMap<NodeId, f64> = HashMap::new();
    let mut residual: HashMap<NodeId, f64> = HashMap::new();
    let mut queue = VecDeque::new();
    let mut queued = HashSet::new();
    for &(n, w) in seeds {
        if graph.id(n).is_some() && w.is_finite() && w > 0.0 {
            *residual.entry(n).or_default() += w / total;
            if queued.insert(n) {
                queue.push_back(n);
            }
        }
    }
    let mut pushes = 0;
    while let Some(u) = queue.pop_front() {
        queued.remove(&u);
        let r = residual.remove(&u).unwrap_or(0.0);
        let degree = graph.degree(u);
        if degree <= 0.0 {
            *estimate.entry(u).or_default() += r;
            continue;
        }
        if r < options.epsilon * degree {
            residual.insert(u, r);
            continue;
        }
        pushes += 1;
        *estimate.entry(u).or_default() += options.alpha * r;
        let spread = (1.0 - options.alpha) * r / degree;
        for e in graph.neighbors(u) {
            let rv = residual.entry(e.to).or_default();
            *rv += spread * f64::from(e.weight);
            if *rv >= options.epsilon * graph.degree(e.to) && queued.insert(e.to) {
                queue.push_back(e.to);
            }
        }
        if pushes >= options.max_pushes {
            break;
        }
    }
    let mut out: Vec<(NodeId, f64)> = estimate.into_iter().filter(|&(_, s)| s > 0.0).collect();
    out.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)));
    out
}

/// The strongest paths (largest product of edge weights) from any of `seeds` to each node of
/// `within` (Dijkstra on −ln w, bounded to those nodes): `parent` links back to a seed.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    parent: HashMap<NodeId, Option<NodeId>>,
}

impl Paths {
    /// The path seed → … → `node`, or `None` when `node` is not reachable within the set.
    pub fn path_to(&self, node: NodeId) -> Option<Vec<NodeId>> {
        let mut path = vec![node];
        let mut at = node;
        loop {
            match self.parent.get(&at)? {
                None => break,
                Some(p) => {
                    if path.len() > self.parent.len() {
                        return None;
                    }
                    path.push(*p);
                    at = *p;
                }
            }
        }
        path.reverse();
        Some(path)
    }
}

#[derive(PartialEq)]
struct Reach(f64, NodeId);
impl Eq for Reach {}
impl PartialOrd for Reach {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Reach {
    fn cmp(&self, other: &Self) -> Ordering {
        // A min-heap on cost, then on node for determinism.
        other.0.partial_cmp(&self.0).unwrap_or(Ordering::Equal).then(other.1.cmp(&self.1))
    }
}

/// Strongest paths from `seeds` to the nodes of `within` (the seeds are always inside).
pub fn strongest_paths(graph: &DocGraph, seeds: &[NodeId], within: &HashSet<NodeId>) -> Paths {
    let mut cost: HashMap<NodeId, f64> = HashMap::new();
    let mut paths = Paths::default();
    let mut heap = BinaryHeap::new();
    for &s in seeds {
        if graph.id(s).is_some() {
            cost.insert(s, 0.0);
            paths.parent.insert(s, None);
            heap.push(Reach(0.0, s));
        }
    }
    let mut done = HashSet::new();
    while let Some(Reach(c, u)) = heap.pop() {
        if !done.insert(u) {
            continue;
        }
        for e in graph.neighbors(u) {
            if !within.contains(&e.to) || done.contains(&e.to) {
                continue;
            }
            let next = c - f64::from(e.weight).ln();
            if cost.get(&e.to).is_none_or(|&old| next < old) {
                cost.insert(e.to, next);
                paths.parent.insert(e.to, Some(u));
                heap.push(Reach(next, e.to));
            }
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path a-b-c-d-e with equal weights.
    fn chain() -> DocGraph {
        let mut g = DocGraph::new(4);
        g.upsert("a", 0, &[]);
        for (x, prev) in [("b", "a"), ("c", "b"), ("d", "c"), ("e", "d")] {
            g.upsert(x, 0, &[(prev, 1.0)]);
        }
        g
    }

    #[test]
    fn mass_concentrates_near_the_seed() {
        let g = chain();
        let n = |id: &str| g.node(id).unwrap();
        let ppr = personalized_pagerank(&g, &[(n("a"), 1.0)], &PprOptions::default());
        let score: HashMap<NodeId, f64> = ppr.iter().copied().collect();
        // The seed and its neighbour hold most of the mass (b, of degree 2, may pass a).
        assert!(score[&n("a")] + score[&n("b")] > 0.5);
        assert!(score[&n("a")] > score[&n("c")]);
        assert!(score[&n("b")] > score[&n("c")]);
        assert!(score[&n("c")] > score[&n("d")]);
        assert!(score[&n("d")] > score[&n("e")]);
        let sum: f64 = score.values().sum();
        assert!(sum <= 1.0 + 1e-9 && sum > 0.99, "mass {sum}");
    }

    #[test]
    fn matches_power_iteration() {
        // A small weighted graph, checked against the closed form of PPR by power iteration.
        let mut g = DocGraph::new(8);
        g.upsert("a", 0, &[]);
        g.upsert("b", 0, &[("a", 0.9)]);
        g.upsert("c", 0, &[("a", 0.3), ("b", 0.6)]);
        g.upsert("d", 0, &[("c", 0.5)]);
        let opts = PprOptions { epsilon: 1e-12, ..Default::default() };
        let a = g.node("a").unwrap();
        let push: HashMap<NodeId, f64> = personalized_pagerank(&g, &[(a, 1.0)], &opts).into_iter().collect();
        let n = g.capacity();
        let mut p = vec![0.0; n];
        for _ in 0..500 {
            let mut next = vec![0.0; n];
            next[a as usize] += opts.alpha;
            for u in g.nodes() {
                let d = g.degree(u);
                for e in g.neighbors(u) {
                    next[e.to as usize] += (1.0 - opts.alpha) * p[u as usize] * f64::from(e.weight) / d;
                }
            }
            p = next;
        }
        for u in g.nodes() {
            let got = push.get(&u).copied().unwrap_or(0.0);
            assert!((got - p[u as usize]).abs() < 1e-6, "node {u}: push {got} power {}", p[u as usize]);
        }
    }

    #[test]
    fn bad_seeds_give_nothing() {
        let g = chain();
        assert!(personalized_pagerank(&g, &[], &PprOptions::default()).is_empty());
        assert!(personalized_pagerank(&g, &[(0, f64::NAN)], &PprOptions::default()).is_empty());
        assert!(personalized_pagerank(&g, &[(99, 1.0)], &PprOptions::default()).is_empty());
    }

    #[test]
    fn strongest_path_prefers_heavy_edges() {
        let mut g = DocGraph::new(4);
        g.upsert("s", 0, &[]);
        g.upsert("x", 0, &[("s", 0.9)]);
        g.upsert("y", 0, &[("s", 0.2)]);
        g.upsert("t", 0, &[("x", 0.9), ("y", 0.9)]);
        let n = |id: &str| g.node(id).unwrap();
        let all: HashSet<NodeId> = g.nodes().collect();
        let paths = strongest_paths(&g, &[n("s")], &all);
        assert_eq!(paths.path_to(n("t")), Some(vec![n("s"), n("x"), n("t")]));
        let only: HashSet<NodeId> = [n("s"), n("y"), n("t")].into();
        let paths = strongest_paths(&g, &[n("s")], &only);
        assert_eq!(paths.path_to(n("t")), Some(vec![n("s"), n("y"), n("t")]));
        assert_eq!(paths.path_to(n("x")), None);
    }
}
