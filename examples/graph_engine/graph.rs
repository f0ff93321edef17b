//! The five `graph` ops (§7.9) over the fixed document graph of [`crate::corpus`]:
//! `neighbors` (breadth-first expansion), `local` (personalized PageRank from the seeds),
//! `communities` (label propagation, Raghavan et al. 2007, at level 0; the connected components
//! of the community graph at level 1), `global` (communities ranked against the query) and
//! `drift` (local hits plus follow-up queries from the hits' communities).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use rcp_server::{Graph, HandlerResult, RequestContext};
use rcp_wire::capabilities::GraphCapability;
use rcp_wire::graph::{Community, GraphEdge, GraphNode, GraphParams, GraphResult};
use rcp_wire::retrieve::{Provenance, ProvenanceEdge};
use rcp_wire::{Hit, RcpError};
use serde_json::json;

use crate::corpus::{self, DOCS, LINKS, Scorer};

/// The ops this engine serves: all five.
pub(crate) const OPS: [&str; 5] = ["neighbors", "local", "global", "drift", "communities"];
/// Deepest `hops` served; larger values are clamped.
const MAX_HOPS: u32 = 3;
/// Restart probability of personalized PageRank.
const RESTART: f64 = 0.15;

/// The graph: adjacency by node index, communities computed once.
pub(crate) struct DocGraph {
    ids: Vec<&'static str>,
    adj: Vec<Vec<(usize, f64)>>,
    scorer: Scorer,
    /// `(level, members)` of every community; ids are `c{level}-{n}`.
    communities: Vec<(u32, Vec<usize>)>,
}

impl DocGraph {
    /// Builds the graph of [`corpus::LINKS`] and its communities.
    pub(crate) fn new() -> Self {
        let ids: Vec<&'static str> = DOCS.iter().map(|(id, _)| *id).collect();
        let index = |id: &str| ids.iter().position(|x| *x == id);
        let mut adj = vec![Vec::new(); ids.len()];
        for (a, b, w) in LINKS {
            if let (Some(a), Some(b)) = (index(a), index(b)) {
                adj[a].push((b, *w));
                adj[b].push((a, *w));
            }
        }
        let mut g = Self { ids, adj, scorer: corpus::corpus_scorer(), communities: Vec::new() };
        let level0 = g.label_propagation();
        let level1 = g.components_of(&level0);
        g.communities = level0.into_iter().map(|m| (0, m)).chain(level1.into_iter().map(|m| (1, m))).collect();
        g
    }

    fn index(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|x| *x == id)
    }

    /// Weighted label propagation, nodes visited in index order, ties to the smallest label,
    /// until no label changes (at most 50 rounds): deterministic.
    fn label_propagation(&self) -> Vec<Vec<usize>> {
        let mut label: Vec<usize> = (0..self.ids.len()).collect();
        for _ in 0..50 {
            let mut changed = false;
            for v in 0..self.ids.len() {
                let mut weight: BTreeMap<usize, f64> = BTreeMap::new();
                for (u, w) in &self.adj[v] {
                    *weight.entry(label[*u]).or_default() += w;
                }
                let best = weight.iter().fold(None::<(usize, f64)>, |best, (l, w)| match best {
                    Some((_, bw)) if bw >= *w => best,
                    _ => Some((*l, *w)),
                });
                if let Some((l, _)) = best
                    && l != label[v]
                {
                    label[v] = l;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (v, l) in label.iter().enumerate() {
            groups.entry(*l).or_default().push(v);
        }
        groups.into_values().collect()
    }

    /// The connected components of the graph whose nodes are `communities` (one level up).
    fn components_of(&self, communities: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let of: HashMap<usize, usize> =
            communities.iter().enumerate().flat_map(|(c, m)| m.iter().map(move |v| (*v, c))).collect();
        let mut seen = vec![false; communities.len()];
        let mut out = Vec::new();
        for start in 0..communities.len() {
            if seen[start] {
                continue;
            }
            seen[start] = true;
            let (mut members, mut queue) = (Vec::new(), VecDeque::from([start]));
            while let Some(c) = queue.pop_front() {
                members.extend(&communities[c]);
                for v in &communities[c] {
                    for (u, _) in &self.adj[*v] {
                        let cu = of[u];
                        if !seen[cu] {
                            seen[cu] = true;
                            queue.push_back(cu);
                        }
                    }
                }
            }
            members.sort_unstable();
            out.push(members);
        }
        out
    }

    fn community_id(&self, i: usize) -> String {
        let (level, _) = &self.communities[i];
        let n = self.communities[..i].iter().filter(|(l, _)| l == level).count();
        format!("c{level}-{n}")
    }

    /// An extractive summary: the members' key terms and their ids (no invented text).
    fn summary(&self, members: &[usize]) -> String {
        let terms = self.scorer.key_terms(members.iter().filter_map(|v| corpus::text(self.ids[*v])), 4);
        let ids: Vec<&str> = members.iter().map(|v| self.ids[*v]).collect();
        format!("{} ({})", terms.join(", "), ids.join(", "))
    }

    /// The seeds: `seedIds` (each must name a node), else the best two query matches.
    fn seeds(&self, p: &GraphParams) -> Result<Vec<usize>, RcpError> {
        if let Some(ids) = p.seed_ids.as_ref().filter(|s| !s.is_empty()) {
            let unknown: Vec<&str> = ids.iter().filter(|id| self.index(id).is_none()).map(String::as_str).collect();
            if !unknown.is_empty() {
                return Err(RcpError::invalid_params("seedIds", format!("no node with id {}", unknown.join(", "))));
            }
            return Ok(ids.iter().filter_map(|id| self.index(id)).collect());
        }
        let query = p.query.as_deref().unwrap_or_default();
        let found: Vec<usize> =
            corpus::matches(&self.scorer, query).iter().take(2).filter_map(|(id, _)| self.index(id)).collect();
        if found.is_empty() && query.trim().is_empty() {
            return Err(RcpError::invalid_params("query", format!("op '{}' needs a query or seedIds", p.op)));
        }
        Ok(found)
    }

    /// Breadth-first from the seeds up to `hops`: each node's best path score (the product of
    /// the edge weights) and its parent on that path.
    fn expand(&self, seeds: &[usize], hops: u32) -> BTreeMap<usize, (f64, Option<usize>)> {
        let mut best: BTreeMap<usize, (f64, Option<usize>)> = seeds.iter().map(|s| (*s, (1.0, None))).collect();
        let mut frontier: Vec<usize> = seeds.to_vec();
        for _ in 0..hops {
            let mut next = Vec::new();
            for v in frontier {
                let sv = best[&v].0;
                for (u, w) in &self.adj[v] {
                    let s = sv * w;
                    if best.get(u).is_none_or(|(old, _)| s > *old) {
                        best.insert(*u, (s, Some(v)));
                        next.push(*u);
                    }
                }
            }
            frontier = next;
        }
        best
    }

    /// Personalized PageRank restarting at the seeds: power iteration until the L1 change is
    /// below 1e-9 or 100 rounds.
    fn pagerank(&self, seeds: &[usize]) -> Vec<f64> {
        let n = self.ids.len();
        let mut restart = vec![0.0; n];
        for s in seeds {
            restart[*s] += 1.0 / seeds.len() as f64;
        }
        let strength: Vec<f64> = self.adj.iter().map(|e| e.iter().map(|(_, w)| w).sum()).collect();
        let mut rank = restart.clone();
        for _ in 0..100 {
            let mut next: Vec<f64> = restart.iter().map(|r| RESTART * r).collect();
            for v in 0..n {
                if strength[v] == 0.0 {
                    next[v] += (1.0 - RESTART) * rank[v];
                    continue;
                }
                for (u, w) in &self.adj[v] {
                    next[*u] += (1.0 - RESTART) * rank[v] * w / strength[v];
                }
            }
            let delta: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
            rank = next;
            if delta < 1e-9 {
                break;
            }
        }
        rank
    }

    /// `neighbors`: the seeds and every node within `hops`, best first, cut to `k` (seeds kept),
    /// and the links among the returned nodes.
    fn neighbors(&self, p: &GraphParams) -> Result<GraphResult, RcpError> {
        let seeds = self.seeds(p)?;
        let reached = self.expand(&seeds, p.hops.unwrap_or(1).min(MAX_HOPS));
        let mut ranked: Vec<(usize, f64)> = reached.iter().map(|(v, (s, _))| (*v, *s)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let k = usize::try_from(p.k.unwrap_or(10)).unwrap_or(usize::MAX).max(seeds.len());
        ranked.truncate(k);
        let kept: BTreeSet<usize> = ranked.iter().map(|(v, _)| *v).collect();
        let edges = LINKS
            .iter()
            .filter(|(a, b, _)| {
                self.index(a).is_some_and(|a| kept.contains(&a)) && self.index(b).is_some_and(|b| kept.contains(&b))
            })
            .map(|(a, b, w)| GraphEdge { src: json!(a), dst: json!(b), weight: Some(*w) })
            .collect();
        let nodes = ranked.iter().map(|(v, s)| GraphNode { id: self.ids[*v].into(), score: Some(*s) }).collect();
        Ok(GraphResult { nodes: Some(nodes), edges: Some(edges), ..Default::default() })
    }

    /// `local`: the top `k` nodes by personalized PageRank as hits, each with the path from its
    /// nearest seed as provenance.
    fn local_hits(&self, p: &GraphParams) -> Result<Vec<Hit>, RcpError> {
        let seeds = self.seeds(p)?;
        let rank = self.pagerank(&seeds);
        let paths = self.expand(&seeds, self.ids.len() as u32);
        let mut order: Vec<usize> = (0..self.ids.len()).filter(|v| rank[*v] > 0.0).collect();
        order.sort_by(|a, b| rank[*b].total_cmp(&rank[*a]).then_with(|| a.cmp(b)));
        order.truncate(usize::try_from(p.k.unwrap_or(10)).unwrap_or(usize::MAX));
        Ok(order
            .into_iter()
            .map(|v| {
                let (mut path, mut at) = (vec![v], v);
                // Parents score strictly higher than their children (weights are below 1): the
                // walk ends at a seed; the bound only guards against a malformed fixture.
                while let Some((_, Some(parent))) = paths.get(&at) {
                    if path.len() > self.ids.len() {
                        break;
                    }
                    path.push(*parent);
                    at = *parent;
                }
                path.reverse();
                let nodes: Vec<String> = path.iter().map(|x| self.ids[*x].to_owned()).collect();
                let edges = nodes.windows(2).map(|w| ProvenanceEdge { src: w[0].clone(), dst: w[1].clone() }).collect();
                let mut hit = Hit::new(self.ids[v], rank[v]);
                hit.text = corpus::text(self.ids[v]).map(str::to_owned);
                hit.unit = Some("node".into());
                hit.provenance = Some(Provenance { nodes: Some(nodes), edges: Some(edges), ..Default::default() });
                hit
            })
            .collect())
    }

    fn community(&self, i: usize, score: Option<f64>) -> Community {
        let (level, members) = &self.communities[i];
        Community { id: self.community_id(i).into(), summary: Some(self.summary(members)), score, level: Some(*level) }
    }

    /// `communities`: every community (of `level`, when given).
    fn communities(&self, p: &GraphParams) -> GraphResult {
        let list = (0..self.communities.len())
            .filter(|i| p.level.is_none_or(|l| self.communities[*i].0 == l))
            .map(|i| self.community(i, None))
            .collect();
        GraphResult { communities: Some(list), ..Default::default() }
    }

    /// The level-0 communities scored against the query (TF-IDF of their members' text), best first.
    fn ranked_communities(&self, query: &str) -> Vec<(usize, f64)> {
        let mut out: Vec<(usize, f64)> = (0..self.communities.len())
            .filter(|i| self.communities[*i].0 == 0)
            .map(|i| {
                let s = self.communities[i]
                    .1
                    .iter()
                    .filter_map(|v| corpus::text(self.ids[*v]))
                    .map(|t| self.scorer.score(query, t))
                    .sum();
                (i, s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// `global`: the communities matching the query and a summary made of theirs.
    fn global(&self, p: &GraphParams) -> Result<GraphResult, RcpError> {
        let query = p
            .query
            .as_deref()
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| RcpError::invalid_params("query", "op 'global' needs a query"))?;
        let mut ranked = self.ranked_communities(query);
        ranked.truncate(usize::try_from(p.k.unwrap_or(10)).unwrap_or(usize::MAX));
        let list: Vec<Community> = ranked.iter().map(|(i, s)| self.community(*i, Some(*s))).collect();
        let summary = if list.is_empty() {
            format!("no community matches '{query}'")
        } else {
            list.iter().filter_map(|c| c.summary.clone()).collect::<Vec<_>>().join("; ")
        };
        Ok(GraphResult { summary: Some(summary), communities: Some(list), ..Default::default() })
    }

    /// `drift`: the local hits, and for each level-0 community they touch, a follow-up query of
    /// its key terms that the query does not already contain.
    fn drift(&self, p: &GraphParams) -> Result<GraphResult, RcpError> {
        let hits = self.local_hits(p)?;
        let asked: Vec<String> = corpus::words(p.query.as_deref().unwrap_or_default()).collect();
        let mut followups: Vec<String> = Vec::new();
        for hit in &hits {
            let Some(v) = self.index(&hit.key()) else { continue };
            let Some((_, members)) = self.communities.iter().find(|(l, m)| *l == 0 && m.contains(&v)) else { continue };
            let terms: Vec<String> = self
                .scorer
                .key_terms(members.iter().filter_map(|x| corpus::text(self.ids[*x])), 6)
                .into_iter()
                .filter(|t| !asked.contains(t))
                .take(3)
                .collect();
            let q = terms.join(" ");
            if !q.is_empty() && !followups.contains(&q) {
                followups.push(q);
            }
        }
        Ok(GraphResult { hits: Some(hits), followups: Some(followups), ..Default::default() })
    }
}

impl Graph for DocGraph {
    fn capability(&self) -> GraphCapability {
        GraphCapability { ops: OPS.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    async fn graph(&self, params: GraphParams, _ctx: RequestContext) -> HandlerResult<GraphResult> {
        match params.op.as_str() {
            "neighbors" => self.neighbors(&params),
            "local" => Ok(GraphResult { hits: Some(self.local_hits(&params)?), ..Default::default() }),
            "global" => self.global(&params),
            "drift" => self.drift(&params),
            "communities" => Ok(self.communities(&params)),
            other => Err(RcpError::option_unsupported("op", other, &OPS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_propagation_separates_the_lexical_dense_and_graph_topics() {
        let g = DocGraph::new();
        let level0: Vec<Vec<&str>> =
            g.communities.iter().filter(|(l, _)| *l == 0).map(|(_, m)| m.iter().map(|v| g.ids[*v]).collect()).collect();
        let of = |id: &str| level0.iter().position(|m| m.contains(&id));
        assert_eq!(of("bm25"), of("tfidf"));
        assert_eq!(of("dense"), of("embeddings"));
        assert_ne!(of("bm25"), of("dense"));
        assert_eq!(of("pagerank"), of("communities"));
    }

    #[test]
    fn pagerank_concentrates_near_the_seed() {
        let g = DocGraph::new();
        let rank = g.pagerank(&[g.index("bm25").unwrap()]);
        let total: f64 = rank.iter().sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        assert!(rank[g.index("tfidf").unwrap()] > rank[g.index("embeddings").unwrap()]);
    }
}
