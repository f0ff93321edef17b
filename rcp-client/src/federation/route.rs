//! Which engines of a federation serve a call (§16.4): the routing rules, pure functions of
//! what each engine advertised, shared by [`super::Federation`] and rcp-gateway.
//!
//! Every method is one of three kinds:
//! - **fanned out** ([`fan_out`]): `retrieve`, `graph` (to the engines advertising that op),
//!   `memory/recall`, `catalog/list`; every capable engine is asked and the answers merged;
//! - **routed to one engine** ([`route_one`]): `embed`, `embed/sparse`, `embed/multi`,
//!   `rerank`, `query/transform`, `memory/build`: the engine named in `_meta.engine`, else the
//!   capable engine of highest registry `priority` (registry order on ties), so vectors of two
//!   models are never mixed in one answer;
//! - **routed back to the origin** ([`super::origin`]): `feedback` on a hit goes to the engines
//!   that produced it; `index/add` and `index/delete` keep the gateway's shard routing.

use rcp_wire::RcpError;
use rcp_wire::capabilities::{Capabilities, Capability, EmbedCapability, MultiVectorCapability, SparseEmbedCapability};
use rcp_wire::methods::Method;

/// `_meta` key of a routed call naming the engine (its registry id) that must serve it.
pub const META_ENGINE: &str = "engine";

/// One engine as the routing rules see it.
#[derive(Debug, Clone, Copy)]
pub struct EngineView<'a> {
    /// Its registry id.
    pub id: &'a str,
    /// Its registry `priority` (higher first).
    pub priority: i64,
    /// What it advertised in `initialize`.
    pub caps: &'a Capabilities,
}

/// What a call needs of an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need<'a> {
    /// A method any engine advertising its capability serves (`retrieve`, `embed`, ...).
    Method(Method),
    /// `rerank` with this method (`None`: the engine's default).
    Rerank(Option<&'a str>),
    /// `query/transform` with this method.
    Transform(&'a str),
    /// `graph` with this op.
    Graph(&'a str),
    /// `memory/build` in this scope (`None`: the engine's default).
    MemoryBuild(Option<&'a str>),
}

impl From<Method> for Need<'_> {
    fn from(m: Method) -> Self {
        Need::Method(m)
    }
}

impl std::fmt::Display for Need<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Need::Method(m) => f.write_str(m.name()),
            Need::Rerank(Some(m)) => write!(f, "rerank with method '{m}'"),
            Need::Rerank(None) => f.write_str("rerank"),
            Need::Transform(m) => write!(f, "query/transform with method '{m}'"),
            Need::Graph(op) => write!(f, "graph op '{op}'"),
            Need::MemoryBuild(Some(s)) => write!(f, "memory/build in scope '{s}'"),
            Need::MemoryBuild(None) => f.write_str("memory/build"),
        }
    }
}

impl Need<'_> {
    /// Why an engine with `caps` cannot serve this need, or `None` when it can.
    pub fn unmet(&self, caps: &Capabilities) -> Option<String> {
        let has = |cap: Capability| (!caps.has(cap)).then(|| format!("does not advertise {}", cap.key()));
        let offers = |what: &str, wanted: &str, offered: &[String]| {
            (!offered.iter().any(|x| x == wanted))
                .then(|| format!("does not offer {what} '{wanted}' (offers: {})", offered.join(", ")))
        };
        match *self {
            Need::Method(m) => m.capability().and_then(has),
            Need::Rerank(method) => match (&caps.rerank, method) {
                (None, _) => has(Capability::Rerank),
                (Some(r), Some(m)) => offers("rerank method", m, &r.methods),
                _ => None,
            },
            Need::Transform(method) => match &caps.transform {
                None => has(Capability::Transform),
                Some(t) => offers("transform method", method, &t.methods),
            },
            Need::Graph(op) => match &caps.graph {
                None => has(Capability::Graph),
                Some(g) => offers("graph op", op, &g.ops),
            },
            Need::MemoryBuild(scope) => match (&caps.memory, scope) {
                (None, _) => has(Capability::Memory),
                (Some(m), Some(s)) => offers("memory scope", s, &m.scopes),
                _ => None,
            },
        }
    }

    /// The model descriptor a routed answer depends on: two engines may stand in for each
    /// other (failover) only when these are equal, so an answer never mixes models.
    fn descriptor(&self, caps: &Capabilities) -> Descriptor {
        match self {
            Need::Method(Method::Embed) => Descriptor::Embed(caps.embed.as_ref().map(embed_identity)),
            Need::Method(Method::EmbedSparse) => Descriptor::Sparse(caps.sparse_embed.as_ref().map(sparse_identity)),
            Need::Method(Method::EmbedMulti) => Descriptor::Multi(caps.multi_vector.as_ref().map(multi_identity)),
            _ => Descriptor::Any,
        }
    }
}

#[derive(Debug, PartialEq)]
enum Descriptor {
    Any,
    Embed(Option<(u32, String)>),
    Sparse(Option<String>),
    Multi(Option<(u32, String)>),
}

fn embed_identity(e: &EmbedCapability) -> (u32, String) {
    (e.dimension, e.identity.clone())
}

fn sparse_identity(e: &SparseEmbedCapability) -> String {
    e.identity.clone()
}

fn multi_identity(e: &MultiVectorCapability) -> (u32, String) {
    (e.dimension, e.identity.clone())
}

/// The engines (indices into `views`) that may serve a routed call, best first: with
/// `chosen` (`_meta.engine`), that engine alone; otherwise every capable engine by descending
/// `priority`, registry order on ties. The first is the route; the others are its failover,
/// kept only when they serve the same model as the first (same `embed` dimension and
/// identity, ...), so a failover never changes what the answer means.
///
/// Errors (`-32602` on `_meta.engine`): the chosen engine is unknown, cannot serve the call,
/// or (for the encodings) serves another model than the default route's, which is the one the
/// federation advertises. With no capable engine at all, an empty list: the caller answers as the method's
/// gate says (capability missing) or as a degraded federation does (backend unavailable).
pub fn route_one(need: &Need<'_>, views: &[EngineView<'_>], chosen: Option<&str>) -> Result<Vec<usize>, RcpError> {
    let mut capable: Vec<usize> = (0..views.len()).filter(|i| need.unmet(views[*i].caps).is_none()).collect();
    // Stable: registry order among equal priorities.
    capable.sort_by_key(|i| std::cmp::Reverse(views[*i].priority));
    let model = capable.first().map(|first| need.descriptor(views[*first].caps));
    if let Some(id) = chosen {
        let field = || format!("_meta.{META_ENGINE}");
        let Some(index) = views.iter().position(|v| v.id == id) else {
            let known: Vec<&str> = views.iter().map(|v| v.id).collect();
            return Err(RcpError::invalid_params(
                field(),
                format!("no engine '{id}' is connected; connected: {}", known.join(", ")),
            ));
        };
        if let Some(why) = need.unmet(views[index].caps) {
            return Err(RcpError::invalid_params(field(), format!("engine '{id}' {why}")));
        }
        // The federation advertises one model per encoding (the default route's): an engine
        // of another model would answer vectors the advertised descriptor does not describe.
        if model.as_ref().is_some_and(|m| *m != need.descriptor(views[index].caps)) {
            let default = capable.first().map_or("", |i| views[*i].id);
            return Err(RcpError::invalid_params(
                field(),
                format!(
                    "engine '{id}' serves another model than the one this federation advertises for {need} (that of '{default}'); \
                     ask '{id}' directly for its vectors"
                ),
            ));
        }
        return Ok(vec![index]);
    }
    if let Some(model) = model {
        capable.retain(|i| need.descriptor(views[*i].caps) == model);
    }
    Ok(capable)
}

/// Whether each engine is asked by a fanned-out call: `Ok(())`, or the reason it is skipped
/// (reported in `usage.notes` and `_meta.degraded`, §16.2). One entry per view, in order.
pub fn fan_out(need: &Need<'_>, views: &[EngineView<'_>]) -> Vec<Result<(), String>> {
    views.iter().map(|v| need.unmet(v.caps).map_or(Ok(()), Err)).collect()
}

/// The engine a routed call names in `_meta.engine`, if any: a string, or `-32602`.
pub fn chosen_engine(meta: Option<&rcp_wire::Meta>) -> Result<Option<&str>, RcpError> {
    match meta.and_then(|m| m.get(META_ENGINE)) {
        None => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(RcpError::invalid_params(
            format!("_meta.{META_ENGINE}"),
            format!("expected an engine id (a string), got {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(v: serde_json::Value) -> Capabilities {
        serde_json::from_value(v).unwrap()
    }

    fn views<'a>(c: &'a [(&'a str, i64, Capabilities)]) -> Vec<EngineView<'a>> {
        c.iter().map(|(id, priority, caps)| EngineView { id, priority: *priority, caps }).collect()
    }

    #[test]
    fn routed_calls_go_to_the_capable_engine_of_highest_priority() {
        let engines = [
            ("bm25", 0, caps(json!({"retrieve": {}, "transform": {"methods": ["multi-query"]}}))),
            ("dense", 1, caps(json!({"retrieve": {}, "embed": {"dimension": 384, "identity": "minilm"}}))),
            ("rerank", 5, caps(json!({"rerank": {"methods": ["cross-encoder", "colbert"]}}))),
            ("dense2", 1, caps(json!({"embed": {"dimension": 384, "identity": "minilm"}}))),
        ];
        let v = views(&engines);
        assert_eq!(route_one(&Need::Method(Method::Embed), &v, None).unwrap(), [1, 3], "priority tie: registry order");
        assert_eq!(route_one(&Need::Rerank(Some("colbert")), &v, None).unwrap(), [2]);
        assert_eq!(route_one(&Need::Transform("multi-query"), &v, None).unwrap(), [0]);
        assert!(route_one(&Need::Transform("hyde"), &v, None).unwrap().is_empty());
        assert!(route_one(&Need::Method(Method::EmbedMulti), &v, None).unwrap().is_empty());
    }

    #[test]
    fn an_explicit_engine_is_obeyed_or_refused_with_the_reason() {
        let engines = [
            ("a", 0, caps(json!({"embed": {"dimension": 384, "identity": "minilm"}}))),
            ("b", 9, caps(json!({"embed": {"dimension": 768, "identity": "bge"}}))),
            ("c", 0, caps(json!({"retrieve": {}}))),
        ];
        let v = views(&engines);
        assert_eq!(route_one(&Need::Method(Method::Embed), &v, Some("b")).unwrap(), [1]);
        let e = route_one(&Need::Method(Method::Embed), &v, Some("a")).unwrap_err();
        assert!(e.message.contains("another model") && e.message.contains("that of 'b'"), "{e}");
        let e = route_one(&Need::Method(Method::Embed), &v, Some("c")).unwrap_err();
        assert_eq!(e.code, rcp_wire::ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("engine 'c' does not advertise embed"), "{e}");
        let e = route_one(&Need::Method(Method::Embed), &v, Some("zz")).unwrap_err();
        assert!(e.message.contains("no engine 'zz'") && e.message.contains("a, b, c"), "{e}");
    }

    #[test]
    fn failover_never_changes_the_model() {
        // Two embedders that conflict: the route is the higher priority one, and the other
        // is not its failover (different dimension), so no answer can mix them.
        let engines = [
            ("small", 0, caps(json!({"embed": {"dimension": 384, "identity": "minilm"}}))),
            ("large", 3, caps(json!({"embed": {"dimension": 768, "identity": "bge"}}))),
            ("large2", 3, caps(json!({"embed": {"dimension": 768, "identity": "bge"}}))),
        ];
        assert_eq!(route_one(&Need::Method(Method::Embed), &views(&engines), None).unwrap(), [1, 2]);
        // Rerank has no model descriptor to compare: any engine offering the method stands in.
        let engines = [
            ("r1", 0, caps(json!({"rerank": {"methods": ["cross-encoder"]}}))),
            ("r2", 0, caps(json!({"rerank": {"methods": ["cross-encoder"]}}))),
        ];
        assert_eq!(route_one(&Need::Rerank(Some("cross-encoder")), &views(&engines), None).unwrap(), [0, 1]);
    }

    #[test]
    fn graph_fans_out_to_the_engines_with_that_op() {
        let engines = [
            ("d1", 0, caps(json!({"graph": {"ops": ["neighbors", "local"]}}))),
            ("d2", 0, caps(json!({"graph": {"ops": ["global"]}}))),
            ("b", 0, caps(json!({"retrieve": {}}))),
        ];
        let plan = fan_out(&Need::Graph("neighbors"), &views(&engines));
        assert_eq!(plan[0], Ok(()));
        assert!(plan[1].as_ref().unwrap_err().contains("does not offer graph op 'neighbors' (offers: global)"));
        assert_eq!(plan[2], Err("does not advertise graph".into()));
    }

    #[test]
    fn meta_engine_must_be_a_string() {
        let mut m = rcp_wire::Meta::new();
        assert_eq!(chosen_engine(Some(&m)).unwrap(), None);
        m.insert(META_ENGINE.into(), json!("x"));
        assert_eq!(chosen_engine(Some(&m)).unwrap(), Some("x"));
        m.insert(META_ENGINE.into(), json!(3));
        assert_eq!(chosen_engine(Some(&m)).unwrap_err().code, rcp_wire::ErrorCode::INVALID_PARAMS);
    }
}
