//! What each engine of a fan-out is asked, and which fusion answers the caller (§16.2, §16.3):
//! the rules [`super::Federation`] and rcp-gateway's aggregator share.

use rcp_wire::RetrieveParams;
use rcp_wire::capabilities::{Capabilities, RetrieveCapability};
use rcp_wire::fusion::FusionMethod;

/// Why an engine is not asked a federated `retrieve` (`None`: it is): it does not advertise
/// `retrieve`, cannot apply the request's filter, or does not offer its `unit` (the federation
/// advertises the units of all its engines united, so a unit goes to those that offer it, as a
/// mode does). The rule [`super::Federation`] and rcp-gateway share; the reason becomes the
/// note of a skipped engine.
pub fn unsuited(caps: &Capabilities, params: &RetrieveParams) -> Option<String> {
    let Some(rc) = caps.retrieve.as_ref() else {
        return Some("does not advertise retrieve".into());
    };
    if params.filter.is_some() && caps.filter.is_none() {
        return Some("cannot apply the filter".into());
    }
    if let Some(unit) = params.unit.as_deref()
        && !rc.units().iter().any(|u| u == unit)
    {
        return Some(format!("does not offer unit '{unit}'"));
    }
    None
}

/// The params one engine of a fan-out receives, for [`super::Federation`] and for aggregators
/// such as rcp-gateway alike: `k` raised by `multiplier` for fusion headroom (never above the
/// engine's `maxK`, never below `k` within it), `candidateK` kept at or above it, no `cursor`,
/// `fusion` or `mmr` (all three belong to the fused answer: with `mmr`, an engine that honours
/// `includeVectors` is asked for its hits' vectors, for [`super::diversify_fused`]), and only
/// the options the engine advertises (`mode`, built-in `rerank`), keeping the funnel
/// `candidateK >= topN >= k` intact. `_meta` is the caller's to set.
pub fn engine_params(params: &RetrieveParams, rc: &RetrieveCapability, k: u64, multiplier: u64) -> RetrieveParams {
    let max_k = rc.max_k.unwrap_or(u64::MAX);
    let mut p = params.clone();
    p.k = k.saturating_mul(multiplier.max(1)).min(max_k).max(k.min(max_k));
    p.candidate_k = p.candidate_k.map(|c| c.max(p.k).min(max_k));
    p.fusion = None;
    p.cursor = None;
    if p.mode.as_ref().is_some_and(|m| !rc.modes.as_ref().is_some_and(|ms| ms.contains(m))) {
        p.mode = None;
    }
    if p.mmr.take().is_some() && rc.honours().contains(&"includeVectors") {
        p.include_vectors = Some(true);
    }
    if p.rerank.is_some() && rc.rerank_builtin != Some(true) {
        p.rerank = None;
    }
    if let Some(rcp_wire::retrieve::RerankOption::Stage(stage)) = p.rerank.as_mut() {
        stage.top_n = stage.top_n.map(|n| n.max(p.k));
    }
    p
}

/// The fusion of a federation whose caller names none (§16.3): `convex` (α 0.5), which the spec
/// says to prefer when every fused engine advertises `scoreFloor`; [`fusion::fuse_or_fallback`]
/// falls back to RRF, with a note, as soon as one does not (the MUST of §16.3).
///
/// [`fusion::fuse_or_fallback`]: rcp_wire::fusion::fuse_or_fallback
pub fn preferred_fusion() -> FusionMethod {
    FusionMethod::convex(rcp_wire::fusion::DEFAULT_ALPHA)
}

/// The fusion a request asks for (§16.3): its `fusion.method` (an unknown name is RRF), else
/// `default`, with the request's `rrfK` or `alpha` applied to the method that takes it.
pub fn fusion_method(default: &FusionMethod, params: &RetrieveParams) -> FusionMethod {
    let f = params.fusion.as_ref();
    let method = match f.and_then(|f| f.method.as_deref()) {
        Some(name) => FusionMethod::from_name(name).unwrap_or_default(),
        None => default.clone(),
    };
    match (method, f) {
        (FusionMethod::Rrf { .. }, Some(f)) if f.rrf_k.is_some() => {
            FusionMethod::Rrf { rrf_k: f64::from(f.rrf_k.unwrap_or(60)) }
        }
        (FusionMethod::Convex { alpha_engine, .. }, Some(f)) if f.alpha.is_some() => {
            FusionMethod::Convex { alpha: f.alpha.unwrap_or(0.5), alpha_engine }
        }
        (m, _) => m,
    }
}
