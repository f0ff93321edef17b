//! `retrieve` (§7.7): one function per gated option, and [`retrieve`] for all of them.

use std::borrow::Cow;

use serde_json::Value;

use super::{Finding, Gate, listed};
use crate::capabilities::{Capabilities, RetrieveCapability, hit_encodings};
use crate::content::QueryInput;
use crate::filter::{self, FieldType, Filter};
use crate::retrieve::{Mode, RerankOption, RewriteOption};
use crate::{RcpError, RetrieveParams};

/// The `retrieve` capability the checks read: the advertised one, or the defaults of §6.1.
pub fn retrieve_capability(caps: &Capabilities) -> Cow<'_, RetrieveCapability> {
    match &caps.retrieve {
        Some(rc) => Cow::Borrowed(rc),
        None => Cow::Owned(RetrieveCapability::default()),
    }
}

/// `modality` (§4.8): falls back to text.
pub fn modality(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.modality.as_deref()?;
    let advertised = rc.modalities();
    (!listed(m, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveModality, m, advertised, Some("using text".into())))
}

/// The modality of a query (§4.8): falls back to the query's text part, when it has one.
pub fn query_modality(gate: Gate, query: &QueryInput, advertised: &[String]) -> Option<Finding> {
    let m = query.modality();
    if listed(m, advertised) {
        return None;
    }
    let fallback = (!query.text().trim().is_empty()).then(|| "using the text part of the query".to_owned());
    Some(Finding::not_advertised(gate, m, advertised, fallback).at("query"))
}

/// `mode` (§6.1): falls back to `defaultMode` (or the first advertised mode).
pub fn mode(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.mode.as_ref()?;
    if rc.modes().contains(m) {
        return None;
    }
    let fallback = format!("using '{}'", rc.default_mode().map_or("the default", Mode::as_str));
    let advertised: Vec<String> = rc.modes().iter().map(|a| a.as_str().to_owned()).collect();
    Some(Finding::not_advertised(Gate::RetrieveMode, m.as_str(), &advertised, Some(fallback)))
}

/// `fusion.method` (§6.1): falls back to the server's default fusion.
pub fn fusion_method(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.fusion.as_ref()?.method.as_deref()?;
    let advertised = rc.fusion_methods();
    (!listed(m, advertised)).then(|| {
        Finding::not_advertised(
            Gate::RetrieveFusionMethod,
            m,
            advertised,
            Some("using the server's default fusion".into()),
        )
    })
}

/// Inline `rerank` (§6.1): needs `rerankBuiltin`; dropped otherwise.
pub fn inline_rerank(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    (p.rerank_stage().is_some() && !rc.offers_rerank()).then(|| {
        Finding::feature_absent(Gate::RetrieveRerank, "enabled", "server does not advertise retrieve.rerankBuiltin")
    })
}

/// `rerank.method` of an inline stage (§7.6), checked when `rerank` is advertised; falls
/// back to the server's default reranker.
pub fn inline_rerank_method(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let Some(RerankOption::Stage(stage)) = &p.rerank else { return None };
    let m = stage.method.as_deref()?;
    let rr = caps.rerank.as_ref()?;
    (!listed(m, &rr.methods)).then(|| {
        Finding::not_advertised(
            Gate::RetrieveRerankMethod,
            m,
            &rr.methods,
            Some("using the server's default reranker".into()),
        )
    })
}

/// `mmr` (§6.1): needs `retrieve.mmr`; dropped otherwise.
pub fn mmr(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    (p.mmr.is_some() && !rc.offers_mmr())
        .then(|| Finding::feature_absent(Gate::RetrieveMmr, "enabled", "server does not advertise retrieve.mmr"))
}

/// `rewrite` (§7.7, §7.8): a method ⊆ `transform.methods`; the query is used as given otherwise.
pub fn rewrite(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let Some(RewriteOption::Method(m)) = &p.rewrite else { return None };
    let advertised = caps.transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or(&[]);
    (!listed(m, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveRewrite, m, advertised, Some("query used as given".into())))
}

/// `filter` (§8): needs the `filter` capability, then only advertised fields and operators.
/// Returns the validated filter; an unadvertised operator may be dropped under `strict:false`,
/// an unadvertised field or a mistyped value never (`-32602`).
pub fn filter(caps: &Capabilities, raw: &Value) -> Result<Filter, Finding> {
    let Some(fc) = &caps.filter else {
        return Err(Finding::feature_absent(Gate::RetrieveFilter, "present", "server does not advertise filter"));
    };
    filter::validate(raw, fc).map_err(|e| {
        let mut f = Finding::rejected(Gate::RetrieveFilterClause, e);
        f.advertised = fc.advertised_operators().into_iter().map(str::to_owned).collect();
        f
    })
}

/// `recency.field` (§4.6, §7.7): when `filter` is advertised, an advertised date field
/// (`-32602` otherwise, whatever `strict` says).
pub fn recency_field(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let r = p.recency.as_ref()?;
    let fc = caps.filter.as_ref()?;
    let detail = match fc.field_type(&r.field) {
        None => format!("field '{}' is not an advertised filter field", r.field),
        Some(Some(t)) if *t != FieldType::Date => format!("field '{}' is not a date field", r.field),
        _ => return None,
    };
    Some(Finding::rejected(Gate::RetrieveRecencyField, RcpError::invalid_params("recency.field", detail)))
}

/// `unit` (§7.7.2): falls back to the default unit.
pub fn unit(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let u = p.unit.as_deref()?;
    let advertised = rc.units();
    (!listed(u, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveUnit, u, advertised, Some("returning the default unit".into())))
}

/// `level` (§7.7.2): below the advertised `levels` (1 when absent); ignored otherwise.
pub fn level(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let level = p.level?;
    let levels = rc.level_count();
    (level >= levels).then(|| {
        Finding::feature_absent(Gate::RetrieveLevel, level.to_string(), format!("server advertises {levels} level(s)"))
    })
}

/// `tokenBudget` (§7.7.2): needs `retrieve.tokenBudget`; ignored otherwise.
pub fn token_budget(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let tb = p.token_budget?;
    (!rc.offers_token_budget()).then(|| {
        Finding::feature_absent(
            Gate::RetrieveTokenBudget,
            tb.to_string(),
            "server does not advertise retrieve.tokenBudget",
        )
    })
}

/// `indexVersion` (§7.7.1): needs `retrieve.snapshots`; ignored otherwise.
pub fn index_version(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let v = p.index_version.as_deref()?;
    (!rc.offers_snapshots())
        .then(|| Finding::feature_absent(Gate::RetrieveIndexVersion, v, "server does not advertise retrieve.snapshots"))
}

/// `cursor` (§10): needs `pagination`; ignored otherwise.
pub fn cursor(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    (p.cursor.is_some() && caps.pagination.is_none())
        .then(|| Finding::feature_absent(Gate::RetrieveCursor, "present", "server does not advertise pagination"))
}

/// `encoding` of hit vectors (§7.3.1): JSON numbers, following the schema's `Hit.vector`.
pub fn hit_encoding(p: &RetrieveParams) -> Option<Finding> {
    let e = p.encoding.as_deref()?;
    (!listed(e, hit_encodings())).then(|| {
        Finding::not_advertised(
            Gate::RetrieveEncoding,
            e,
            hit_encodings(),
            Some("hit vectors are sent as JSON numbers".into()),
        )
    })
}

/// Every finding of `retrieve` params (§7.7), in the order a server checks them. The filter
/// is validated here too; use [`filter()`] to keep the validated tree.
pub fn retrieve(caps: &Capabilities, p: &RetrieveParams) -> Vec<Finding> {
    let rc = retrieve_capability(caps);
    let rc = rc.as_ref();
    let mut out = Vec::new();
    out.extend(modality(rc, p));
    out.extend(query_modality(Gate::RetrieveQueryModality, &p.query, rc.modalities()));
    out.extend(mode(rc, p));
    out.extend(fusion_method(rc, p));
    match inline_rerank(rc, p) {
        Some(f) => out.push(f),
        None => out.extend(inline_rerank_method(caps, p)),
    }
    out.extend(mmr(rc, p));
    out.extend(rewrite(caps, p));
    if let Some(raw) = &p.filter {
        out.extend(filter(caps, raw).err());
    }
    out.extend(recency_field(caps, p));
    out.extend(unit(rc, p));
    out.extend(level(rc, p));
    out.extend(token_budget(rc, p));
    out.extend(hit_encoding(p));
    out.extend(index_version(rc, p));
    out.extend(cursor(caps, p));
    out
}
