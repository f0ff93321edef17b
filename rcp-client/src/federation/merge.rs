//! One answer from several engines' answers to a fanned-out call (§16.4), each rule written
//! once here for [`super::Federation`] and rcp-gateway (memory's own rules are in
//! [`super::memory`]):
//!
//! - hits (`graph` `local`/`drift`, memory recall) are fused with RRF like `retrieve`'s
//!   (§16.3: dedup by id, richest body, `meta.engine` naming the body's engine);
//! - `neighbors` nodes are united by id, keeping the highest score; edges are united by their
//!   ends, keeping the highest weight;
//! - communities keep their engine: their ids are engine-local, so they are always returned as
//!   `<engine>:<id>`, ordered by score (ties in engine order);
//! - `global` summaries are kept per engine, each prefixed with its engine's name when more than
//!   one engine answered; `drift` follow-ups are united in engine order;
//!
//! Ids go through [`Namespaces`] first, so with distinct corpora nothing of two engines
//! collapses. Every merged answer says in `_meta.engines` which engines contributed.

use std::collections::BTreeMap;

use rcp_wire::fusion::{self, EngineList, FusionMethod};
use rcp_wire::graph::{Community, GraphEdge, GraphNode, GraphResult};
use rcp_wire::{Hit, Meta, RcpError, RequestId};
use serde_json::{Value, json};

use super::origin::{NAMESPACE_SEPARATOR, Namespaces};

/// One engine's answer, named and numbered as the federation knows it.
#[derive(Debug, Clone)]
pub struct Answer<R> {
    /// The engine's name (registry id, or gateway collection).
    pub name: String,
    /// Its position in the federation (what [`Namespaces`] and the origin ledger use).
    pub index: usize,
    /// What it answered.
    pub result: R,
}

/// The hits of several engines fused with RRF (§16.3), at most `k`, ids namespaced first.
pub fn fuse_hits(lists: Vec<(String, usize, Vec<Hit>)>, ns: &Namespaces, k: usize) -> Result<Vec<Hit>, RcpError> {
    let lists: Vec<EngineList> = lists
        .into_iter()
        .map(|(name, index, hits)| EngineList::new(name, hits.into_iter().map(|h| qualify_hit(h, index, ns)).collect()))
        .collect();
    if lists.len() == 1 {
        // One list: its own order and scores, only truncated (fusion would rescore it), each
        // hit naming its engine as a fused hit does.
        let Some(list) = lists.into_iter().next() else { return Ok(Vec::new()) };
        let mut hits = list.hits;
        hits.truncate(k);
        for h in &mut hits {
            h.meta.get_or_insert_with(Meta::new).entry("engine").or_insert_with(|| json!(list.engine));
        }
        return Ok(hits);
    }
    fusion::fuse(&lists, &FusionMethod::rrf(), k).map_err(RcpError::from)
}

fn qualify_hit(mut hit: Hit, index: usize, ns: &Namespaces) -> Hit {
    hit.id = qualify_id(hit.id, index, ns);
    hit
}

/// An id's text: the string itself, or the number's digits.
fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::String(s) => s.clone(),
        RequestId::Number(n) => n.to_string(),
    }
}

fn qualify_id(id: RequestId, index: usize, ns: &Namespaces) -> RequestId {
    if ns.enabled() { RequestId::String(ns.qualify(index, &id_text(&id))) } else { id }
}

fn qualify_value(v: Value, index: usize, ns: &Namespaces) -> Value {
    match v {
        Value::String(s) if ns.enabled() => Value::String(ns.qualify(index, &s)),
        Value::Number(n) if ns.enabled() => Value::String(ns.qualify(index, &n.to_string())),
        other => other,
    }
}

/// The engines that contributed, for `_meta.engines`.
pub(super) fn engines_meta<R>(answers: &[Answer<R>]) -> Meta {
    let mut meta = Meta::new();
    meta.insert("engines".into(), json!(answers.iter().map(|a| a.name.as_str()).collect::<Vec<_>>()));
    meta
}

/// Merges the `graph` answers of several engines to one op (see the module docs). `k` bounds
/// hits, nodes and communities (the request's `k`; without it nothing is cut).
pub fn merge_graph(
    answers: Vec<Answer<GraphResult>>,
    ns: &Namespaces,
    k: Option<usize>,
) -> Result<GraphResult, RcpError> {
    let mut out = GraphResult { meta: Some(engines_meta(&answers)), ..GraphResult::default() };
    // Without `k`, nothing is cut: every engine already bounded its own answer.
    let k = k.unwrap_or(usize::MAX);
    let several = answers.len() > 1;

    let hit_lists: Vec<(String, usize, Vec<Hit>)> =
        answers.iter().filter_map(|a| a.result.hits.clone().map(|h| (a.name.clone(), a.index, h))).collect();
    if !hit_lists.is_empty() {
        out.hits = Some(fuse_hits(hit_lists, ns, k)?);
    }

    let mut followups: Vec<String> = Vec::new();
    let mut summaries: Vec<String> = Vec::new();
    let mut communities: Vec<(usize, Community)> = Vec::new();
    let mut nodes: BTreeMap<String, GraphNode> = BTreeMap::new();
    let mut edges: BTreeMap<(String, String), GraphEdge> = BTreeMap::new();
    for (position, a) in answers.into_iter().enumerate() {
        let r = a.result;
        for f in r.followups.into_iter().flatten() {
            if !followups.contains(&f) {
                followups.push(f);
            }
        }
        if let Some(s) = r.summary.filter(|s| !s.is_empty()) {
            summaries.push(if several { format!("[{}] {s}", a.name) } else { s });
        }
        for mut c in r.communities.into_iter().flatten() {
            c.id = RequestId::String(format!("{}{NAMESPACE_SEPARATOR}{}", a.name, id_text(&c.id)));
            communities.push((position, c));
        }
        for mut n in r.nodes.into_iter().flatten() {
            n.id = qualify_id(n.id, a.index, ns);
            let key = id_text(&n.id);
            match nodes.get_mut(&key) {
                Some(seen) if seen.score.unwrap_or(f64::NEG_INFINITY) >= n.score.unwrap_or(f64::NEG_INFINITY) => {}
                _ => {
                    nodes.insert(key, n);
                }
            }
        }
        for mut e in r.edges.into_iter().flatten() {
            e.src = qualify_value(e.src, a.index, ns);
            e.dst = qualify_value(e.dst, a.index, ns);
            let key = (e.src.to_string(), e.dst.to_string());
            match edges.get_mut(&key) {
                Some(seen) if seen.weight.unwrap_or(f64::NEG_INFINITY) >= e.weight.unwrap_or(f64::NEG_INFINITY) => {}
                _ => {
                    edges.insert(key, e);
                }
            }
        }
    }
    if !followups.is_empty() {
        out.followups = Some(followups);
    }
    if !summaries.is_empty() {
        out.summary = Some(summaries.join("\n\n"));
    }
    if !communities.is_empty() {
        communities.sort_by(|(pa, a), (pb, b)| {
            b.score.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.score.unwrap_or(f64::NEG_INFINITY)).then(pa.cmp(pb))
        });
        out.communities = Some(communities.into_iter().map(|(_, c)| c).take(k.max(1)).collect());
    }
    if !nodes.is_empty() {
        let mut nodes: Vec<GraphNode> = nodes.into_values().collect();
        // Highest score first; the map's id order breaks ties.
        nodes.sort_by(|a, b| b.score.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.score.unwrap_or(f64::NEG_INFINITY)));
        // Edges to a node cut by `k` go with it; edges to nodes no engine listed (seeds) stay.
        let cut: std::collections::HashSet<String> = nodes.iter().skip(k.max(1)).map(|n| id_text(&n.id)).collect();
        nodes.truncate(k.max(1));
        let end = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        out.nodes = Some(nodes);
        out.edges =
            Some(edges.into_values().filter(|e| !cut.contains(&end(&e.src)) && !cut.contains(&end(&e.dst))).collect());
    } else if !edges.is_empty() {
        out.edges = Some(edges.into_values().collect());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Corpora;

    fn answer(name: &str, index: usize, v: Value) -> Answer<GraphResult> {
        Answer { name: name.into(), index, result: serde_json::from_value(v).unwrap() }
    }

    #[test]
    fn neighbors_unite_nodes_and_edges_and_keep_communities_apart() {
        let shared = Namespaces::default();
        let a = answer(
            "d1",
            0,
            json!({"nodes": [{"id": "x", "score": 0.9}, {"id": "y", "score": 0.5}], "edges": [{"src": "x", "dst": "y", "weight": 0.5}],
                   "communities": [{"id": 0, "score": 0.2}]}),
        );
        let b = answer(
            "d2",
            1,
            json!({"nodes": [{"id": "y", "score": 0.7}], "edges": [{"src": "x", "dst": "y", "weight": 0.8}],
                   "communities": [{"id": 0, "score": 0.4}]}),
        );
        let m = merge_graph(vec![a.clone(), b.clone()], &shared, None).unwrap();
        let nodes: Vec<(String, Option<f64>)> =
            m.nodes.unwrap().into_iter().map(|n| (id_text(&n.id), n.score)).collect();
        assert_eq!(nodes, [("x".into(), Some(0.9)), ("y".into(), Some(0.7))]);
        assert_eq!(m.edges.unwrap()[0].weight, Some(0.8));
        let ids: Vec<String> = m.communities.unwrap().into_iter().map(|c| id_text(&c.id)).collect();
        assert_eq!(ids, ["d2:0", "d1:0"], "community ids are engine-local: never merged");
        assert_eq!(m.meta.unwrap()["engines"], json!(["d1", "d2"]));

        // With distinct corpora, the same node id of two engines is two nodes.
        let distinct = Namespaces::new(Corpora::Distinct, ["d1".to_owned(), "d2".to_owned()]);
        let m = merge_graph(vec![a, b], &distinct, None).unwrap();
        let ids: Vec<String> = m.nodes.unwrap().into_iter().map(|n| id_text(&n.id)).collect();
        assert_eq!(ids, ["d1:x", "d2:y", "d1:y"]);
        assert_eq!(m.edges.unwrap().len(), 2);
    }

    #[test]
    fn local_hits_fuse_and_summaries_name_their_engine() {
        let a =
            answer("a", 0, json!({"hits": [{"id": "1", "score": 3.0}, {"id": "2", "score": 1.0}], "summary": "wings"}));
        let b = answer("b", 1, json!({"hits": [{"id": "2", "score": 0.9}], "summary": "heat"}));
        let m = merge_graph(vec![a.clone(), b], &Namespaces::default(), Some(5)).unwrap();
        let hits = m.hits.unwrap();
        assert_eq!(hits[0].key(), "2", "found by both engines");
        assert_eq!(m.summary.as_deref(), Some("[a] wings\n\n[b] heat"));
        let one = merge_graph(vec![a], &Namespaces::default(), Some(1)).unwrap();
        assert_eq!(one.summary.as_deref(), Some("wings"));
        let hits = one.hits.unwrap();
        assert_eq!((hits.len(), hits[0].meta.as_ref().map(|m| m["engine"].clone())), (1, Some(json!("a"))));
    }
}
