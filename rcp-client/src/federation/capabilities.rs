//! What a federation can do (§16.4), computed from its engines' own `initialize`: the union
//! of their capabilities, each descriptor merged field by field by one written rule.
//!
//! | key | rule |
//! |---|---|
//! | `retrieve` | fanned out: `mmr` the federation's own (applied to the fused list); `modes` and `units` united (an engine lacking the requested one is skipped with a note); `confidence` when every engine gives it (a fused hit keeps the highest); `maxK` the largest (fusion can return that many), `modalities`, `deterministic` and `snapshots` intersected (a federation's `indexVersion` names each engine's snapshot: `Snapshot`); `fusion` the federation's own strategies (§16.3); the params every engine honours beyond its flags (`x-rcp-honours`: `recency`, `includeVectors`) intersected; `rerankBuiltin` when any engine has it (those engines rerank their own candidates before fusion, the others' hits are fused as retrieved, with a note) unless the front end reranks the fused list itself |
//! | `filter`, `citations` | intersected: a filtered `retrieve` reaches every engine, so only fields (typed alike) and operators all of them accept; citations only when every engine's hits carry them |
//! | `embed`, `sparseEmbed`, `multiVector` | routed to one engine: the descriptor of the engine a call without `_meta.engine` reaches (highest `priority`), so the advertised `dimension` and `identity` are what such a call returns |
//! | `rerank` | routed by method: `methods` and `models` united (in priority order), `maxCandidates` the smallest, so every engine a method may reach can take that many |
//! | `transform` | routed by method: `methods` united |
//! | `graph` | fanned out per op: `ops` united; an op runs on the engines advertising it |
//! | `memory` | `scopes` united (`memory/build` routed by scope), `clues` when any engine gives them; `memory/recall` fanned out, or routed back to the engine whose memory id it names |
//! | `feedback` | routed back to the engines that produced each hit: advertised when any engine takes feedback |
//!
//! `session`, `pagination`, `tokenBudget`, `streaming`, `log` and `catalog` are the
//! aggregator's own: it applies them to the federated answer, whatever its engines do.
//! [`Provenance`] says which engines each key came from.

use std::collections::BTreeMap;

use rcp_wire::capabilities::{
    Capabilities, Flag, GraphCapability, MemoryCapability, RerankCapability, RetrieveCapability, TransformCapability,
};
use rcp_wire::filter::{FieldType, FilterCapability, FilterFields};
use rcp_wire::methods::Method;

use super::route::{EngineView, Need, route_one};

/// The federated `retrieve` capability and its companions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FederatedRetrieve {
    /// `retrieve` (§6.1).
    pub retrieve: RetrieveCapability,
    /// `filter` (§8): only when every engine filters, over the fields they all share.
    pub filter: Option<FilterCapability>,
    /// `citations`: only when every engine's hits carry them.
    pub citations: bool,
}

/// What a federation can do, and which engines each capability key comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Federated {
    /// The united capabilities (the aggregator adds its own keys).
    pub capabilities: Capabilities,
    /// Capability key → the engines (registry ids) that provide it.
    pub provenance: Provenance,
}

/// Capability key → the engines (registry ids) that provide it, in registry order.
pub type Provenance = BTreeMap<String, Vec<String>>;

/// The capabilities of a federation of `views` (§16.4), merged by the rules of the module docs.
pub fn federate(views: &[EngineView<'_>]) -> Federated {
    let mut caps = Capabilities::default();
    let mut provenance = Provenance::new();
    for v in views {
        for key in v.caps.keys() {
            provenance.entry(key).or_default().push(v.id.to_owned());
        }
    }
    if let Some(f) = federate_retrieve(&views.iter().map(|v| v.caps).collect::<Vec<_>>()) {
        caps.retrieve = Some(f.retrieve);
        caps.filter = f.filter;
        caps.citations = f.citations.then(Flag::default);
    }
    let routed = |need: Need<'_>| route_one(&need, views, None).ok().and_then(|c| c.first().map(|i| views[*i].caps));
    caps.embed = routed(Need::Method(Method::Embed)).and_then(|c| c.embed.clone());
    caps.sparse_embed = routed(Need::Method(Method::EmbedSparse)).and_then(|c| c.sparse_embed.clone());
    caps.multi_vector = routed(Need::Method(Method::EmbedMulti)).and_then(|c| c.multi_vector.clone());
    let by_priority = by_priority(views);
    caps.rerank = unite_rerank(by_priority.iter().filter_map(|v| v.caps.rerank.as_ref()));
    caps.transform = unite_names(by_priority.iter().filter_map(|v| v.caps.transform.as_ref().map(|t| &t.methods)))
        .map(|methods| TransformCapability { methods, ..Default::default() });
    caps.graph = unite_names(views.iter().filter_map(|v| v.caps.graph.as_ref().map(|g| &g.ops)))
        .map(|ops| GraphCapability { ops, ..Default::default() });
    let memories: Vec<&MemoryCapability> = by_priority.iter().filter_map(|v| v.caps.memory.as_ref()).collect();
    caps.memory = unite_names(memories.iter().map(|m| &m.scopes)).map(|scopes| MemoryCapability {
        scopes,
        clues: memories.iter().any(|m| m.clues == Some(true)).then_some(true),
        ..Default::default()
    });
    caps.feedback = views.iter().any(|v| v.caps.feedback.is_some()).then(Flag::default);
    // Keys the federation does not serve from its engines are not claimed for them.
    provenance.retain(|key, _| caps.keys().contains(key));
    Federated { capabilities: caps, provenance }
}

/// The views by descending `priority`, registry order on ties.
fn by_priority<'a>(views: &[EngineView<'a>]) -> Vec<EngineView<'a>> {
    let mut v = views.to_vec();
    v.sort_by_key(|v| std::cmp::Reverse(v.priority));
    v
}

/// Lists of names united in the order first seen; `None` when there is no list.
fn unite_names<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Option<Vec<String>> {
    let mut out: Option<Vec<String>> = None;
    for list in lists {
        let acc = out.get_or_insert_with(Vec::new);
        for name in list {
            if !acc.contains(name) {
                acc.push(name.clone());
            }
        }
    }
    out
}

/// `rerank` of several engines: methods and models united, the smallest `maxCandidates`.
fn unite_rerank<'a>(caps: impl Iterator<Item = &'a RerankCapability> + Clone) -> Option<RerankCapability> {
    let methods = unite_names(caps.clone().map(|r| &r.methods))?;
    let models: Vec<Vec<String>> = caps.clone().filter_map(|r| r.models.clone()).collect();
    Some(RerankCapability {
        methods,
        max_candidates: caps.filter_map(|r| r.max_candidates).min(),
        models: unite_names(models.iter()),
        ..Default::default()
    })
}

/// The fusion strategies the gateway itself implements (§16.3).
pub const FUSION_METHODS: [&str; 3] = ["rrf", "weighted", "convex"];

/// Federates the capabilities of the engines that advertise `retrieve`; `None` if none does.
pub fn federate_retrieve(engines: &[&Capabilities]) -> Option<FederatedRetrieve> {
    let retrievers: Vec<&Capabilities> = engines.iter().copied().filter(|c| c.retrieve.is_some()).collect();
    let first = retrievers.first()?;
    let rcs: Vec<&RetrieveCapability> = retrievers.iter().filter_map(|c| c.retrieve.as_ref()).collect();
    let max_k = rcs.iter().map(|r| r.max_k).try_fold(0u64, |acc, m| m.map(|m| acc.max(m)));
    let mut modes: Vec<rcp_wire::Mode> = Vec::new();
    for m in rcs.iter().filter_map(|r| r.modes.as_ref()).flatten() {
        if !modes.contains(m) {
            modes.push(m.clone());
        }
    }
    let modalities = intersect_lists(rcs.iter().map(|r| r.modalities.clone()));
    // A unit goes to the engines that offer it (`unsuited`), as a mode does.
    let mut units: Vec<String> = Vec::new();
    for u in rcs.iter().flat_map(|r| r.units()) {
        if !units.contains(u) {
            units.push(u.clone());
        }
    }
    let deterministic = rcs.iter().all(|r| r.deterministic == Some(true)).then_some(true);
    let rerank_builtin = rcs.iter().any(|r| r.rerank_builtin == Some(true)).then_some(true);
    let mut honours: Vec<&str> = rcs[0].honours();
    honours.retain(|p| rcs.iter().all(|r| r.honours().contains(p)));
    let mut extra = rcp_wire::Meta::new();
    if !honours.is_empty() {
        extra.insert(RetrieveCapability::HONOURS_KEY.into(), serde_json::json!(honours));
    }
    let retrieve = RetrieveCapability {
        max_k,
        rerank_builtin,
        modes: (!modes.is_empty()).then_some(modes),
        modalities,
        fusion: Some(FUSION_METHODS.map(String::from).to_vec()),
        // The federation diversifies the fused list itself (`diversify_fused`).
        mmr: Some(true),
        units: Some(units),
        // Fused hits keep the highest confidence an engine gave them (`fusion::fuse`).
        confidence: rcs.iter().all(|r| r.confidence == Some(true)).then_some(true),
        deterministic,
        // One token names every engine's snapshot (`Snapshot`).
        snapshots: rcs.iter().all(|r| r.snapshots == Some(true)).then_some(true),
        extra,
        ..RetrieveCapability::default()
    };
    let filter = first
        .filter
        .clone()
        .and_then(|f0| retrievers.iter().try_fold(f0, |acc, c| intersect_filter(&acc, c.filter.as_ref()?)))
        .filter(|f| !f.fields.names().is_empty());
    let citations = retrievers.iter().all(|c| c.citations.is_some());
    Some(FederatedRetrieve { retrieve, filter, citations })
}

/// The filter every engine accepts: fields present in both (typed when both agree on the
/// type, untyped when either is untyped, dropped when the types conflict) and operators both
/// allow.
fn intersect_filter(a: &FilterCapability, b: &FilterCapability) -> Option<FilterCapability> {
    let mut typed: BTreeMap<String, FieldType> = BTreeMap::new();
    let mut untyped: Vec<String> = Vec::new();
    for name in a.fields.names() {
        match (a.fields.get(name), b.fields.get(name)) {
            (Some(Some(ta)), Some(Some(tb))) if ta == tb => {
                typed.insert(name.to_owned(), ta.clone());
            }
            (Some(Some(_)), Some(Some(_))) | (_, None) | (None, _) => {}
            (Some(_), Some(_)) => untyped.push(name.to_owned()),
        }
    }
    let fields = if untyped.is_empty() {
        FilterFields::Typed(typed)
    } else {
        untyped.extend(typed.into_keys());
        untyped.sort();
        FilterFields::Names(untyped)
    };
    let operators = match (&a.operators, &b.operators) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (Some(x), Some(y)) => Some(x.iter().filter(|o| y.contains(o)).cloned().collect()),
    };
    Some(FilterCapability { fields, operators, extra: Default::default() })
}

/// The intersection of optional lists, where `None` means "the default" and is neutral only
/// when every list is `None`.
fn intersect_lists(lists: impl Iterator<Item = Option<Vec<String>>>) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    let mut any_default = false;
    for l in lists {
        match l {
            None => any_default = true,
            Some(l) => acc = Some(acc.map_or(l.clone(), |a| a.into_iter().filter(|x| l.contains(x)).collect())),
        }
    }
    // An engine on the default (text only) limits everyone to text.
    match (acc, any_default) {
        (Some(a), true) => Some(a.into_iter().filter(|m| m == "text").collect()),
        (a, _) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_union_merges_descriptors_by_their_rules_and_names_the_engines() {
        let bm25 = caps(json!({"retrieve": {"maxK": 100}, "filter": {"fields": {"year": "int"}}, "citations": {},
                               "transform": {"methods": ["multi-query"]}, "session": {}, "pagination": {}}));
        let dense = caps(json!({"retrieve": {"maxK": 50}, "filter": {"fields": {"year": "int"}}, "citations": {},
                                "embed": {"dimension": 384, "identity": "minilm"}, "graph": {"ops": ["neighbors", "local"]},
                                "memory": {"scopes": ["global"], "clues": true}}));
        let rerank = caps(json!({"rerank": {"methods": ["cross-encoder"], "maxCandidates": 200},
                                 "sparseEmbed": {"identity": "splade"}, "multiVector": {"dimension": 128, "identity": "colbert"}}));
        let rerank2 = caps(json!({"rerank": {"methods": ["colbert"], "maxCandidates": 64},
                                  "embed": {"dimension": 768, "identity": "bge"}, "feedback": {}}));
        let views = [
            EngineView { id: "bm25", priority: 0, caps: &bm25 },
            EngineView { id: "dense", priority: 1, caps: &dense },
            EngineView { id: "rerank", priority: 0, caps: &rerank },
            EngineView { id: "rerank2", priority: 0, caps: &rerank2 },
        ];
        let f = federate(&views);
        let c = &f.capabilities;
        assert_eq!(c.retrieve.as_ref().unwrap().max_k, Some(100));
        assert_eq!(c.filter.as_ref().unwrap().fields.names(), ["year"]);
        assert!(c.citations.is_some());
        // Two embedders conflict: the one a plain call reaches (priority) is advertised.
        assert_eq!(c.embed.as_ref().map(|e| (e.dimension, e.identity.as_str())), Some((384, "minilm")));
        assert_eq!(c.rerank.as_ref().unwrap().methods, ["cross-encoder", "colbert"]);
        assert_eq!(c.rerank.as_ref().unwrap().max_candidates, Some(64));
        assert_eq!(c.graph.as_ref().unwrap().ops, ["neighbors", "local"]);
        assert_eq!(c.memory.as_ref().unwrap().clues, Some(true));
        assert!(c.feedback.is_some() && c.sparse_embed.is_some() && c.multi_vector.is_some());
        assert!(c.session.is_none() && c.pagination.is_none(), "the aggregator's own keys are not claimed for engines");
        assert_eq!(f.provenance["embed"], ["dense", "rerank2"]);
        assert_eq!(f.provenance["retrieve"], ["bm25", "dense"]);
        assert!(!f.provenance.contains_key("session"));
    }

    fn caps(v: serde_json::Value) -> Capabilities {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn filter_fields_intersect_and_modes_unite() {
        let a = caps(json!({
            "retrieve": {"maxK": 100, "modes": ["sparse"]},
            "filter": {"fields": {"year": "int", "topic": "keyword", "lang": "keyword"}},
            "citations": {}
        }));
        let b = caps(json!({
            "retrieve": {"maxK": 500, "modes": ["dense"]},
            "filter": {"fields": {"year": "int", "topic": "text"}, "operators": ["eq", "gte"]}
        }));
        let embed_only = caps(json!({"embed": {"dimension": 2, "identity": "x"}}));
        let f = federate_retrieve(&[&a, &b, &embed_only]).unwrap();
        assert_eq!(f.retrieve.max_k, Some(500));
        assert_eq!(f.retrieve.modes, Some(vec![rcp_wire::Mode::Sparse, rcp_wire::Mode::Dense]));
        let filter = f.filter.unwrap();
        assert_eq!(filter.fields.names(), ["year"], "conflicting types and missing fields are dropped");
        assert_eq!(filter.operators, Some(vec!["eq".into(), "gte".into()]));
        assert!(!f.citations, "b has no citations");
    }

    #[test]
    fn one_engine_without_filter_means_no_filter_and_no_retriever_means_none() {
        let a = caps(json!({"retrieve": {}, "filter": {"fields": ["x"]}}));
        let b = caps(json!({"retrieve": {}}));
        let f = federate_retrieve(&[&a, &b]).unwrap();
        assert_eq!((f.filter, f.retrieve.max_k), (None, None));
        assert_eq!(federate_retrieve(&[&b]).map(|f| f.filter), Some(None), "no filter still retrieves");
        assert_eq!(federate_retrieve(&[&caps(json!({}))]), None);
    }
}
