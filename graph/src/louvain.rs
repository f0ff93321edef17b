//! Louvain community detection (Blondel, Guillaume, Lambiotte, Lefebvre, "Fast unfolding of
//! communities in large networks", J. Stat. Mech. 2008) on the weighted document graph.
//!
//! Each level is one pass of the method: nodes move, one at a time in a seeded random order,
//! to the neighbouring community with the largest modularity gain until no move helps (or the
//! pass budget runs out); the communities then become the nodes of the next level's graph.
//! Level 0 is the finest partition (§7.7.2: `level:0` is the most specific layer).

use std::collections::HashMap;

use crate::{DocGraph, NodeId};

/// Bounds and seed of one detection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LouvainOptions {
    /// Seed of the node order (the same seed and graph give the same communities).
    pub seed: u64,
    /// Most levels kept.
    pub max_levels: usize,
    /// Most sweeps over the nodes in one level.
    pub max_passes: usize,
    /// Resolution γ of the modularity (1 is Newman–Girvan; larger gives smaller communities).
    pub resolution: f64,
}

impl Default for LouvainOptions {
    fn default() -> Self {
        Self { seed: 0x5EED, max_levels: 8, max_passes: 32, resolution: 1.0 }
    }
}

/// The communities of every level: for each level, the community of each node index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hierarchy {
    /// `levels[l][node]`: the community of `node` at level `l` (`u32::MAX` for a free index).
    levels: Vec<Vec<u32>>,
    /// Communities per level.
    counts: Vec<u32>,
}

/// Marks a free node index in a level's assignment.
const NONE: u32 = u32::MAX;

impl Hierarchy {
    /// Bytes the assignments hold on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.capacity() * 4).sum::<usize>()
            + self.levels.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.counts.capacity() * 4
    }

    /// Detects the communities of `graph`. A graph without edges has one level of singletons;
    /// an empty graph has no level.
    pub fn detect(graph: &DocGraph, options: &LouvainOptions) -> Self {
        let live: Vec<NodeId> = graph.nodes().collect();
        if live.is_empty() {
            return Self::default();
        }
        let mut local = vec![usize::MAX; graph.capacity()];
        for (i, &n) in live.iter().enumerate() {
            local[n as usize] = i;
        }
        let mut adj: Vec<Vec<(usize, f64)>> = live
            .iter()
            .map(|&n| graph.neighbors(n).iter().map(|e| (local[e.to as usize], f64::from(e.weight))).collect())
            .collect();
        let mut loops = vec![0.0; live.len()];
        // The super node of each live node at the current level.
        let mut assignment: Vec<usize> = (0..live.len()).collect();
        let mut rng = options.seed | 1;
        let mut out = Self::default();
        while out.levels.len() < options.max_levels.max(1) {
            let (community, count, moved) = one_level(&adj, &loops, options, &mut rng);
            if !moved && !out.levels.is_empty() {
                break;
            }
            for a in &mut assignment {
                *a = community[*a];
            }
            let mut level = vec![NONE; graph.capacity()];
            for (i, &n) in live.iter().enumerate() {
                level[n as usize] = assignment[i] as u32;
            }
            out.levels.push(level);
            out.counts.push(count as u32);
            if !moved || count == adj.len() {
                break;
            }
            (adj, loops) = aggregate(&adj, &loops, &community, count);
        }
        out
    }

    /// Levels (0 = finest).
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Communities at `level`.
    pub fn count(&self, level: usize) -> usize {
        self.counts.get(level).map_or(0, |&c| c as usize)
    }

    /// The community of `node` at `level`.
    pub fn community(&self, level: usize, node: NodeId) -> Option<u32> {
        self.levels.get(level)?.get(node as usize).copied().filter(|&c| c != NONE)
    }

    /// The members of each community at `level`, in node order.
    pub fn members(&self, level: usize) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.count(level)];
        if let Some(assign) = self.levels.get(level) {
            for (n, &c) in assign.iter().enumerate() {
                if c != NONE {
                    out[c as usize].push(n as NodeId);
                }
            }
        }
        out
    }

    /// The modularity Q of the partition at `level` on `graph` (resolution 1).
    pub fn modularity(&self, graph: &DocGraph, level: usize) -> f64 {
        let m2: f64 = graph.nodes().map(|n| graph.degree(n)).sum();
        if m2 <= 0.0 {
            return 0.0;
        }
        let mut internal = vec![0.0; self.count(level)];
        let mut total = vec![0.0; self.count(level)];
        for n in graph.nodes() {
            let Some(c) = self.community(level, n) else { continue };
            total[c as usize] += graph.degree(n);
            for e in graph.neighbors(n) {
                if self.community(level, e.to) == Some(c) {
                    internal[c as usize] += f64::from(e.weight);
                }
            }
        }
        internal.iter().zip(&total).map(|(i, t)| i / m2 - (t / m2).powi(2)).sum()
    }
}

/// One level: local moving to convergence. Returns each node's community (renumbered
/// 0..count by first appearance), the count, and whether any node moved.
fn one_level(
    adj: &[Vec<(usize, f64)>],
    loops: &[f64],
    options: &LouvainOptions,
    rng: &mut u64,
) -> (Vec<usize>, usize, bool) {
    let n = adj.len();
    let k: Vec<f64> = (0..n).map(|i| loops[i] + adj[i].iter().map(|&(_, w)| w).sum::<f64>()).collect();
    let m2: f64 = k.iter().sum();
    let mut community: Vec<usize> = (0..n).collect();
    let mut moved_any = false;
    if m2 > 0.0 {
        let mut tot = k.clone();
        let mut order: Vec<usize> = (0..n).collect();
        shuffle(&mut order, rng);
        let mut weight_to = vec![0.0; n];
        let mut touched = Vec::new();
        for _ in 0..options.max_passes.max(1) {
            let mut moved = 0usize;
            for &i in &order {
                let from = community[i];
                for &(j, w) in &adj[i] {
                    if j == i {
                        continue;
                    }
                    let c = community[j];
                    if weight_to[c] == 0.0 {
                        touched.push(c);
                    }
                    weight_to[c] += w;
                }
                tot[from] -= k[i];
                let gain = |c: usize, w: f64| w - options.resolution * tot[c] * k[i] / m2;
                let mut best = from;
                let mut best_gain = gain(from, weight_to[from]);
                for &c in &touched {
                    let g = gain(c, weight_to[c]);
                    if g > best_gain + 1e-12 {
                        best = c;
                        best_gain = g;
                    }
                }
                tot[best] += k[i];
                if best != from {
                    community[i] = best;
                    moved += 1;
                }
                for c in touched.drain(..) {
                    weight_to[c] = 0.0;
                }
            }
            if moved == 0 {
                break;
            }
            moved_any = true;
        }
    }
    let mut renumber = HashMap::new();
    for c in &mut community {
        let next = renumber.len();
        *c = *renumber.entry(*c).or_insert(next);
    }
    (community, renumber.len(), moved_any)
}

/// The graph of communities: cross-community weights summed, internal ones into self-loops.
fn aggregate(
    adj: &[Vec<(usize, f64)>],
    loops: &[f64],
    community: &[usize],
    count: usize,
) -> (Vec<Vec<(usize, f64)>>, Vec<f64>) {
    let mut rows: Vec<HashMap<usize, f64>> = vec![HashMap::new(); count];
    let mut new_loops = vec![0.0; count];
    for (i, edges) in adj.iter().enumerate() {
        let ci = community[i];
        new_loops[ci] += loops[i];
        for &(j, w) in edges {
            let cj = community[j];
            if ci == cj {
                new_loops[ci] += w;
            } else {
                *rows[ci].entry(cj).or_default() += w;
            }
        }
    }
    let adj = rows
        .into_iter()
        .map(|row| {
            let mut row: Vec<(usize, f64)> = row.into_iter().collect();
            row.sort_by_key(|&(j, _)| j);
            row
        })
        .collect();
    (adj, new_loops)
}

/// Fisher–Yates with xorshift64.
fn shuffle(items: &mut [usize], rng: &mut u64) {
    for i in (1..items.len()).rev() {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let j = (*rng % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cliques` cliques of `size` nodes (weight 1) in a ring, each joined to the next by one
    /// edge of weight `bridge`.
    fn ring_of_cliques(cliques: usize, size: usize, bridge: f32) -> DocGraph {
        let mut g = DocGraph::new(size + 2);
        let name = |c: usize, i: usize| format!("c{c}n{i}");
        for c in 0..cliques {
            for i in 0..size {
                let prev: Vec<String> = (0..i).map(|j| name(c, j)).collect();
                let links: Vec<(&str, f32)> = prev.iter().map(|p| (p.as_str(), 1.0)).collect();
                g.upsert(&name(c, i), 0, &links);
            }
        }
        for c in 0..cliques.saturating_sub(1) {
            let (a, b) = (g.node(&name(c, 0)).unwrap(), g.node(&name(c + 1, 1)).unwrap());
            g.link(a, b, bridge);
        }
        g
    }

    fn same_partition(h: &Hierarchy, g: &DocGraph, level: usize, size: usize) {
        for n in g.nodes() {
            for m in g.nodes() {
                let same_clique = g.id(n).unwrap().split('n').next() == g.id(m).unwrap().split('n').next();
                assert_eq!(h.community(level, n) == h.community(level, m), same_clique, "{n} {m} (size {size})");
            }
        }
    }

    #[test]
    fn two_cliques_joined_by_an_edge_are_two_communities() {
        let g = ring_of_cliques(2, 5, 1.0);
        let h = Hierarchy::detect(&g, &LouvainOptions::default());
        let top = h.levels() - 1;
        assert_eq!(h.count(top), 2);
        same_partition(&h, &g, top, 5);
        assert!(h.modularity(&g, top) > 0.4, "Q = {}", h.modularity(&g, top));
    }

    #[test]
    fn levels_coarsen_and_level_zero_is_finest() {
        let g = ring_of_cliques(12, 4, 0.5);
        let h = Hierarchy::detect(&g, &LouvainOptions::default());
        assert!(h.levels() >= 1);
        for l in 1..h.levels() {
            assert!(h.count(l) < h.count(l - 1), "level {l} is coarser");
            // Nesting: nodes together at level l-1 stay together at level l.
            for n in g.nodes() {
                for e in g.neighbors(n) {
                    if h.community(l - 1, n) == h.community(l - 1, e.to) {
                        assert_eq!(h.community(l, n), h.community(l, e.to));
                    }
                }
            }
        }
        let members: usize = h.members(0).iter().map(Vec::len).sum();
        assert_eq!(members, g.len());
        // The cliques are never split.
        for n in g.nodes() {
            for e in g.neighbors(n) {
                if e.weight == 1.0 {
                    assert_eq!(h.community(0, n), h.community(0, e.to));
                }
            }
        }
    }

    #[test]
    fn deterministic_with_a_seed() {
        let g = ring_of_cliques(9, 5, 0.8);
        let opts = LouvainOptions { seed: 42, ..Default::default() };
        assert_eq!(Hierarchy::detect(&g, &opts), Hierarchy::detect(&g, &opts));
    }

    #[test]
    fn edgeless_and_empty_graphs() {
        let mut g = DocGraph::new(4);
        assert_eq!(Hierarchy::detect(&g, &LouvainOptions::default()).levels(), 0);
        g.upsert("a", 0, &[]);
        g.upsert("b", 0, &[]);
        let h = Hierarchy::detect(&g, &LouvainOptions::default());
        assert_eq!((h.levels(), h.count(0)), (1, 2));
        g.remove("a");
        let h = Hierarchy::detect(&g, &LouvainOptions::default());
        assert_eq!(h.community(0, 0), None, "a free index has no community");
        assert_eq!(h.members(0), vec![vec![1]]);
    }
}
