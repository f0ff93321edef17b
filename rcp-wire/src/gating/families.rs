//! The other method families: `embed` (§7.3, §7.5), `rerank` (§7.6), `index/add` (§7.10),
//! `query/transform` (§7.8), `graph` (§7.9), `memory/build` (§7.17).

use std::fmt::Write as _;

use super::{Finding, Gate, listed, one_of, query_modality};
use crate::capabilities::{Capabilities, RerankCapability, default_modalities};
use crate::content::InputItem;
use crate::embed::EmbedParams;
use crate::graph::GraphParams;
use crate::index::IndexAddParams;
use crate::memory::MemoryBuildParams;
use crate::rerank::RerankParams;
use crate::transform::TransformParams;

/// A vector `encoding` (§7.3.1): `json` always, else one of `advertised`; falls back to json.
pub fn encoding(requested: Option<&str>, advertised: &[String]) -> Option<Finding> {
    let e = requested.filter(|e| *e != "json")?;
    (!listed(e, advertised))
        .then(|| Finding::not_advertised(Gate::EmbedEncoding, e, advertised, Some("using json".into())))
}

/// The modality of input `index` of `field` (§4.8); no fallback.
pub fn input_modality(item: &InputItem, field: &str, index: usize, advertised: &[String]) -> Option<Finding> {
    let m = item.modality();
    (!listed(m, advertised)).then(|| {
        let mut path = String::from(field);
        let _ = write!(path, "[{index}]");
        Finding::not_advertised(Gate::EmbedModality, m, advertised, None).at(path)
    })
}

/// Every finding of `embed` params (§7.3): input modalities and the encoding.
pub fn embed(caps: &Capabilities, p: &EmbedParams) -> Vec<Finding> {
    let ec = caps.embed.clone().unwrap_or_default();
    let field = p.items_field();
    let mut out: Vec<Finding> =
        p.items().iter().enumerate().filter_map(|(i, item)| input_modality(item, field, i, ec.modalities())).collect();
    out.extend(encoding(p.encoding.as_deref(), ec.encodings()));
    out
}

/// The `rerank` method used when none is requested: the first advertised, else `cross-encoder`.
pub fn default_rerank_method(rc: &RerankCapability) -> &str {
    rc.methods.first().map_or("cross-encoder", String::as_str)
}

/// `rerank.method` (§7.6): falls back to the default method.
pub fn rerank_method(caps: &Capabilities, p: &RerankParams) -> Option<Finding> {
    let m = p.method.as_deref()?;
    let rc = caps.rerank.clone().unwrap_or_default();
    let fallback = format!("using '{}'", default_rerank_method(&rc));
    (!listed(m, &rc.methods)).then(|| Finding::not_advertised(Gate::RerankMethod, m, &rc.methods, Some(fallback)))
}

/// Every finding of `rerank` params (§7.6): a text query, and the method.
pub fn rerank(caps: &Capabilities, p: &RerankParams) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(mut f) = query_modality(Gate::RerankQueryModality, &p.query, default_modalities()) {
        f.fallback = None;
        out.push(f);
    }
    out.extend(rerank_method(caps, p));
    out
}

/// `index/add` options (§7.10): `chunk:true` needs `index.chunking`, `contextual:true`
/// needs `index.contextual`; no fallback.
pub fn index_add(caps: &Capabilities, p: &IndexAddParams) -> Vec<Finding> {
    let ic = caps.index.clone().unwrap_or_default();
    let mut out = Vec::new();
    if p.chunk == Some(true) && !ic.offers_chunking() {
        out.push(Finding::not_advertised(Gate::IndexChunk, "true", &[], None));
    }
    if p.contextual == Some(true) && !ic.offers_contextual() {
        out.push(Finding::not_advertised(Gate::IndexContextual, "true", &[], None));
    }
    out
}

/// `query/transform` `method` ⊆ `transform.methods` (§7.8).
pub fn transform(caps: &Capabilities, p: &TransformParams) -> Option<Finding> {
    one_of(Gate::TransformMethod, &p.method, caps.transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or(&[]))
}

/// `graph` `op` ⊆ `graph.ops` (§7.9).
pub fn graph(caps: &Capabilities, p: &GraphParams) -> Option<Finding> {
    one_of(Gate::GraphOp, &p.op, caps.graph.as_ref().map(|g| g.ops.as_slice()).unwrap_or(&[]))
}

/// `memory/build` `scope` ⊆ `memory.scopes` (§7.17).
pub fn memory_build(caps: &Capabilities, p: &MemoryBuildParams) -> Option<Finding> {
    let scope = p.scope.as_deref()?;
    one_of(Gate::MemoryScope, scope, caps.memory.as_ref().map(|m| m.scopes.as_slice()).unwrap_or(&[]))
}
