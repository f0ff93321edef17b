//! The `graph` ops (§7.9) over the document graph: `neighbors`, `local`, `communities`,
//! `global` and `drift`.
//!
//! Entry nodes come from `seedIds` (each must name a stored document: an unknown id is
//! `-32602` on `seedIds[i]`, since a walk from a node that does not exist has no meaning) or,
//! without them, from the query's nearest documents. `sessionId` is a hint this engine does
//! not use (§7.7.3).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use rcp_graph::terms::followup;
use rcp_graph::{NodeId, personalized_pagerank, strongest_paths};
use rcp_server::{Graph, HandlerResult, Lane, RequestContext};
use rcp_wire::capabilities::GraphCapability;
use rcp_wire::graph::{Community as WireCommunity, GraphEdge, GraphNode, GraphParams, GraphResult};
use rcp_wire::retrieve::{Citation, Provenance, ProvenanceEdge, Usage};
use rcp_wire::{Hit, RcpError};

use super::GraphIndex;
use super::communities::Communities;
use crate::DenseEngine;

/// The ops this engine implements, as advertised.
pub const OPS: [&str; 5] = ["local", "global", "drift", "communities", "neighbors"];
/// `k` when the request has none.
pub const DEFAULT_K: usize = 10;
/// Entry nodes taken from the query's nearest documents.
pub const QUERY_SEEDS: usize = 10;
/// Softmax temperature turning the query seeds' cosines into restart weights.
pub const SEED_TEMPERATURE: f64 = 0.05;
/// Most hops a `neighbors` walk takes (deeper requests are clamped).
pub const MAX_HOPS: u32 = 3;
/// Most nodes a `neighbors` walk visits.
pub const MAX_VISITED: usize = 50_000;
/// Follow-up queries `drift` proposes, and key terms in each.
pub const FOLLOWUPS: usize = 3;
const FOLLOWUP_TERMS: usize = 4;

/// The `graph` capability of the dense engine: its document graph plus the engine (for the
/// query encoder, the store and the hit fields).
#[derive(Debug, Clone)]
pub struct DenseGraph {
    engine: Arc<DenseEngine>,
    index: Arc<GraphIndex>,
}

impl DenseGraph {
    /// The capability over `index`, embedding queries with `engine`.
    pub fn new(engine: Arc<DenseEngine>, index: Arc<GraphIndex>) -> Self {
        Self { engine, index }
    }
}

/// An entry node with its restart weight.
#[derive(Debug, Clone, Copy)]
struct Seed {
    node: NodeId,
    weight: f64,
}

impl Graph for DenseGraph {
    fn capability(&self) -> GraphCapability {
        GraphCapability { ops: OPS.iter().map(|s| (*s).to_owned()).collect(), ..Default::default() }
    }

    async fn graph(&self, params: GraphParams, ctx: RequestContext) -> HandlerResult<GraphResult> {
        let started = Instant::now();
        if params.cursor.is_some() {
            return Err(RcpError::invalid_params("cursor", "graph results are not paginated; no cursor was issued"));
        }
        let k = params.k.map_or(DEFAULT_K, |k| usize::try_from(k).unwrap_or(usize::MAX)).min(self.engine.max_k());
        let needs_query = params.op == "global";
        let has_seeds = params.seed_ids.as_ref().is_some_and(|s| !s.is_empty());
        let query_vector = match params.query.as_deref() {
            Some(q) if needs_query || !has_seeds || params.op == "drift" => {
                Some(self.engine.embed_query(q, &ctx).await?)
            }
            _ => None,
        };
        let wants_entry = matches!(params.op.as_str(), "local" | "drift" | "neighbors");
        if (needs_query || (wants_entry && !has_seeds)) && query_vector.is_none() {
            return Err(RcpError::invalid_params(
                "query",
                format!("op '{}' needs a query{}", params.op, if needs_query { "" } else { " or seedIds" }),
            ));
        }
        let index = Arc::clone(&self.index);
        let (ef, source) = (self.engine.ef_search(), self.engine.source().to_owned());
        let mut result = ctx
            .run_cpu(Lane::Read, move || {
                Op { index: &index, params: &params, k, query: query_vector.as_deref(), ef, source: &source }.run()
            })
            .await??;
        result.usage = Some(Usage {
            latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
            ..Default::default()
        });
        Ok(result)
    }
}

/// One op with its inputs resolved: what the handler runs on the CPU executor (and what the
/// benchmarks call directly).
#[derive(Debug)]
pub struct Op<'a> {
    /// The graph.
    pub index: &'a GraphIndex,
    /// The request.
    pub params: &'a GraphParams,
    /// Result count.
    pub k: usize,
    /// The query's unit vector, when the request has a query.
    pub query: Option<&'a [f32]>,
    /// Search beam for the query's nearest documents.
    pub ef: usize,
    /// `citation.source` of the hits.
    pub source: &'a str,
}

impl Op<'_> {
    /// Runs the op (`params.op` must be one of [`OPS`]).
    pub fn run(&self) -> Result<GraphResult, RcpError> {
        match self.params.op.as_str() {
            "neighbors" => self.neighbors(),
            "local" => self.local().map(|hits| GraphResult { hits: Some(hits), ..Default::default() }),
            "drift" => self.drift(),
            "communities" => self.communities(),
            "global" => self.global(),
            other => Err(RcpError::option_unsupported("op", other, &OPS)),
        }
    }

    /// The entry nodes: `seedIds` (all must exist) or the query's nearest documents, with
    /// softmax weights over their cosines.
    fn seeds(&self) -> Result<Vec<Seed>, RcpError> {
        let graph = self.index.read();
        if let Some(ids) = self.params.seed_ids.as_ref().filter(|s| !s.is_empty()) {
            let mut seeds = Vec::with_capacity(ids.len());
            for (i, id) in ids.iter().enumerate() {
                let node = graph.node(id).ok_or_else(|| {
                    RcpError::invalid_params(format!("seedIds[{i}]"), format!("no document with id {id:?}"))
                })?;
                seeds.push(Seed { node, weight: 1.0 });
            }
            return Ok(seeds);
        }
        let Some(q) = self.query else { return Ok(Vec::new()) };
        let table = self.index.store().read();
        let planner = self.index.store().options().planner;
        let want = QUERY_SEEDS.min(self.k.max(1));
        let (found, _) = table.search(q, want, self.ef.max(want), None, &planner);
        let top = found.first().map_or(0.0, |s| f64::from(s.score));
        Ok(found
            .iter()
            .filter_map(|s| {
                let node = graph.node(&table.doc(s.slot)?.id)?;
                Some(Seed { node, weight: ((f64::from(s.score) - top) / SEED_TEMPERATURE).exp() })
            })
            .collect())
    }

    /// `neighbors`: the nodes within `hops` of the seeds, scored by the strongest path
    /// (product of edge weights) from a seed, best `k`, with the edges among them.
    fn neighbors(&self) -> Result<GraphResult, RcpError> {
        let seeds = self.seeds()?;
        let hops = self.params.hops.unwrap_or(1).min(MAX_HOPS);
        let graph = self.index.read();
        let mut best: HashMap<NodeId, f64> = seeds.iter().map(|s| (s.node, 1.0)).collect();
        let mut frontier: Vec<NodeId> = seeds.iter().map(|s| s.node).collect();
        for _ in 0..hops {
            let mut next = Vec::new();
            for &u in &frontier {
                let su = best[&u];
                for e in graph.neighbors(u) {
                    let s = su * f64::from(e.weight);
                    let entry = best.entry(e.to).or_insert(0.0);
                    if s > *entry {
                        *entry = s;
                        next.push(e.to);
                    }
                }
                if best.len() >= MAX_VISITED {
                    break;
                }
            }
            next.sort_unstable();
            next.dedup();
            frontier = next;
        }
        let mut ranked: Vec<(NodeId, f64)> = best.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(self.k.max(seeds.len()));
        let kept: HashSet<NodeId> = ranked.iter().map(|&(n, _)| n).collect();
        let mut edges = Vec::new();
        for &(n, _) in &ranked {
            for e in graph.neighbors(n) {
                if n < e.to && kept.contains(&e.to) {
                    edges.push(GraphEdge {
                        src: graph.id(n).unwrap_or_default().into(),
                        dst: graph.id(e.to).unwrap_or_default().into(),
                        weight: Some(f64::from(e.weight)),
                    });
                }
            }
        }
        let nodes =
            ranked.iter().filter_map(|&(n, s)| Some(GraphNode { id: graph.id(n)?.into(), score: Some(s) })).collect();
        Ok(GraphResult { nodes: Some(nodes), edges: Some(edges), ..Default::default() })
    }

    /// `local`: personalised PageRank from the seeds; the best `k` nodes as hits, each with
    /// the strongest path from a seed as its provenance.
    fn local(&self) -> Result<Vec<Hit>, RcpError> {
        let seeds = self.seeds()?;
        let graph = self.index.read();
        let restart: Vec<(NodeId, f64)> = seeds.iter().map(|s| (s.node, s.weight)).collect();
        let ranked = personalized_pagerank(&graph, &restart, &self.index.options().ppr);
        let top: Vec<(NodeId, f64)> = ranked.into_iter().take(self.k).collect();
        let within: HashSet<NodeId> = top.iter().map(|&(n, _)| n).chain(seeds.iter().map(|s| s.node)).collect();
        let entry: Vec<NodeId> = seeds.iter().map(|s| s.node).collect();
        let paths = strongest_paths(&graph, &entry, &within);
        let table = self.index.store().read();
        Ok(top
            .into_iter()
            .filter_map(|(n, score)| {
                let id = graph.id(n)?;
                let doc = table.get(id)?;
                let mut hit = Hit::new(id, score);
                hit.unit = Some("node".into());
                hit.text = Some(doc.text.clone());
                if !doc.meta.is_empty() {
                    hit.meta = Some(doc.meta.clone());
                }
                hit.scores = Some(BTreeMap::from([("ppr".to_owned(), score)]));
                let title = doc.meta.get("title").and_then(|t| t.as_str()).map(str::to_owned);
                hit.citation = Some(Citation { source: Some(self.source.to_owned()), title, ..Default::default() });
                let path: Vec<String> = paths
                    .path_to(n)
                    .unwrap_or_else(|| vec![n])
                    .into_iter()
                    .filter_map(|p| graph.id(p).map(str::to_owned))
                    .collect();
                let edges = path.windows(2).map(|w| ProvenanceEdge { src: w[0].clone(), dst: w[1].clone() }).collect();
                hit.provenance = Some(Provenance { nodes: Some(path), edges: Some(edges), ..Default::default() });
                Some(hit)
            })
            .collect())
    }

    /// `drift`: the `local` hits, and follow-up queries made of the key terms of the level-0
    /// communities the hits fall in (terms the query already has left out).
    fn drift(&self) -> Result<GraphResult, RcpError> {
        let hits = self.local()?;
        let communities = self.index.communities();
        let graph = self.index.read();
        let query = self.params.query.as_deref().unwrap_or_default();
        let mut seen = HashSet::new();
        let mut followups = Vec::new();
        for hit in &hits {
            let node = match &hit.id {
                rcp_wire::message::RequestId::String(id) => graph.node(id),
                rcp_wire::message::RequestId::Number(_) => None,
            };
            let Some(node) = node else { continue };
            let Some(c) = communities.of(0, node) else { continue };
            if seen.insert(c.id.clone())
                && let Some(f) = followup(query, &c.terms, FOLLOWUP_TERMS)
                && !followups.contains(&f)
            {
                followups.push(f);
            }
            if followups.len() == FOLLOWUPS {
                break;
            }
        }
        Ok(GraphResult { hits: Some(hits), followups: Some(followups), ..Default::default() })
    }

    /// The level asked for (default `default`), which must exist.
    fn level(&self, communities: &Communities, default: usize) -> Result<usize, RcpError> {
        let levels = communities.levels.len();
        match self.params.level {
            None => Ok(default),
            Some(l) if (l as usize) < levels.max(1) => Ok(l as usize),
            Some(l) => Err(RcpError::invalid_params(
                "level",
                format!("level {l} does not exist; the graph has {levels} levels (0 = finest)"),
            )),
        }
    }

    /// `communities`: the `k` largest communities of `level` (default 0, the finest).
    fn communities(&self) -> Result<GraphResult, RcpError> {
        let communities = self.index.communities();
        let level = self.level(&communities, 0)?;
        let mut list: Vec<_> = communities.levels.get(level).map(|l| l.iter().collect()).unwrap_or_default();
        list.sort_by(|a: &&super::communities::Community, b| {
            b.members.len().cmp(&a.members.len()).then(a.id.cmp(&b.id))
        });
        let out = list
            .into_iter()
            .take(self.k)
            .map(|c| WireCommunity {
                id: c.id.clone().into(),
                summary: Some(c.summary.clone()),
                score: None,
                level: Some(c.level),
            })
            .collect();
        Ok(GraphResult { communities: Some(out), ..Default::default() })
    }

    /// `global`: the communities of `level` (default the coarsest) ranked by the cosine of
    /// their centroid to the query; `summary` joins the best three communities' summaries.
    fn global(&self) -> Result<GraphResult, RcpError> {
        let q = self.query.ok_or_else(|| RcpError::invalid_params("query", "op 'global' needs a query"))?;
        let communities = self.index.communities();
        let level = self.level(&communities, communities.levels.len().saturating_sub(1))?;
        let mut ranked: Vec<(&super::communities::Community, f64)> = communities
            .levels
            .get(level)
            .map(|l| {
                l.iter().map(|c| (c, c.centroid.iter().zip(q).map(|(a, b)| f64::from(a * b)).sum::<f64>())).collect()
            })
            .unwrap_or_default();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.id.cmp(&b.0.id)));
        ranked.truncate(self.k);
        let summary = ranked.iter().take(3).map(|(c, _)| format!("{}: {}", c.id, c.summary)).collect::<Vec<_>>();
        let out = ranked
            .iter()
            .map(|(c, s)| WireCommunity {
                id: c.id.clone().into(),
                summary: Some(c.summary.clone()),
                score: Some(*s),
                level: Some(c.level),
            })
            .collect();
        Ok(GraphResult { summary: Some(summary.join("\n")), communities: Some(out), ..Default::default() })
    }
}
