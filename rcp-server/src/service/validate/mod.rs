//! Params validation against the session's capabilities, done once for every engine:
//! option values (§7.7 `strict`), funnel (§7.7), filters (§8), limits (§4.7, §15.5).
//!
//! Whether an option is advertised is decided by `rcp_wire::gating`, the module the
//! client gate calls too; this module turns each finding into `-32005` (strict) or the
//! `strict:false` fallback plus its `usage.notes` entry, and adds the structural `-32602`
//! checks (ranges, the funnel, empty queries).

mod fields;
mod retrieve;
#[cfg(test)]
mod tests;

pub(crate) use retrieve::retrieve;

use std::collections::HashSet;

use rcp_wire::capabilities::{Capabilities, default_modalities};
use rcp_wire::content::{InputItem, QueryInput};
use rcp_wire::embed::EmbedParams;
use rcp_wire::feedback::Signal;
use rcp_wire::gating::{self, Finding, Gate};
use rcp_wire::index::{Document, IndexAddParams};
use rcp_wire::rerank::RerankParams;
use rcp_wire::{Meta, RcpError};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::handler::{EmbedRequest, RerankRequest};

/// Parses params into `T`, turning serde errors into `-32602` with `error.data.field` set to the
/// offending path (`filter.and[1].value`, `k`, `documents[2].id`).
pub(crate) fn parse<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RcpError> {
    let text = params.map(RawValue::get).unwrap_or("{}");
    let text = if text.trim() == "null" { "{}" } else { text };
    // Fast path; only a failure pays for tracking the path to the offending field.
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        // Strip serde's " at line L column C" suffix: positions mean nothing to the peer.
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
        if let Some(name) = msg.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
            path = if path == "." { name.to_owned() } else { format!("{path}.{name}") };
        }
        let path = path.trim_end_matches(".?").trim_end_matches('?').to_owned();
        let path = if path.is_empty() || path == "." { "params".to_owned() } else { path };
        RcpError::invalid_params(path, msg)
    })
}

/// Applies the `strict` rule (§7.7) to a finding of the gating module: `Err` when it refuses
/// the request, otherwise its note is recorded and `Ok(true)` tells the caller to fall back.
pub(crate) fn settle(finding: Option<Finding>, strict: bool, notes: &mut Vec<String>) -> Result<bool, RcpError> {
    let Some(f) = finding else { return Ok(false) };
    if f.refuses(strict) {
        return Err(f.error());
    }
    notes.extend(f.note());
    Ok(true)
}

/// The shape of a query (§4.8): not empty, and every content block well formed (`-32602`
/// naming the block). Runs before the modality rule, which judges well-formed blocks only.
pub(crate) fn query_shape(query: &QueryInput, field: &str) -> Result<(), RcpError> {
    let bad = |path: String, e: rcp_wire::content::BlockError| RcpError::invalid_params(path, e.to_string());
    match query {
        QueryInput::Text(t) if t.trim().is_empty() => Err(RcpError::invalid_params(field, "query must not be empty")),
        QueryInput::Text(_) => Ok(()),
        QueryInput::Block(b) => b.check().map_err(|e| bad(field.to_owned(), e)),
        QueryInput::Blocks(bs) if bs.is_empty() => Err(RcpError::invalid_params(field, "query must not be empty")),
        QueryInput::Blocks(bs) => {
            bs.iter().enumerate().try_for_each(|(i, b)| b.check().map_err(|e| bad(format!("{field}[{i}]"), e)))
        }
    }
}

/// A query as the engine reads it (§4.8), once its modality was judged: a text `data` block
/// decoded to its text, and a `uri` refused with `-32602` naming it (the framework fetches
/// nothing), so no part of a query is silently read as nothing. `fell_back` (a `strict:false`
/// fallback to the query's text part) first leaves out the blocks of other modalities.
pub(crate) fn query(query: &mut QueryInput, field: &str, fell_back: bool) -> Result<(), RcpError> {
    if let QueryInput::Text(_) = query {
        return Ok(());
    }
    if fell_back && let QueryInput::Blocks(bs) = query {
        bs.retain(|b| b.modality() == "text");
    }
    let taken = std::mem::replace(query, QueryInput::Text(String::new()));
    *query = taken.inline(field).map_err(|(path, e)| RcpError::invalid_params(path, e.to_string()))?;
    Ok(())
}

/// Validates the inputs of `embed`, `embed/sparse` and `embed/multi` (§7.3–§7.5), and of
/// `rerank`'s passages: within `batch_limit`, each block read as [`query`] reads one (text
/// `data` decoded, `uri` refused) and of an advertised modality.
pub(crate) fn inputs(
    items: &mut [InputItem],
    field: &str,
    batch_limit: Option<u32>,
    modalities: &[String],
) -> Result<(), RcpError> {
    if let Some(limit) = batch_limit
        && items.len() > limit as usize
    {
        return Err(RcpError::invalid_params(field, format!("{} inputs exceed batchLimit {limit}", items.len())));
    }
    for (i, item) in items.iter_mut().enumerate() {
        if let InputItem::Block(b) = item {
            b.check().map_err(|d| RcpError::invalid_params(format!("{field}[{i}]"), d.to_string()))?;
        }
        // The modality rule first (`-32005` for an unadvertised one, even by `uri`), then the
        // block as it is read (text `data` decoded, `uri` refused).
        if let Some(f) = gating::input_modality(item, field, i, modalities) {
            return Err(f.error());
        }
        if let InputItem::Block(_) = item {
            let taken = std::mem::replace(item, InputItem::Text(String::new()));
            *item = taken.inline(field, i).map_err(|(path, e)| RcpError::invalid_params(path, e.to_string()))?;
        }
    }
    Ok(())
}

/// `kind` of `embed`, `embed/sparse` and `embed/multi`: `query` or `document` when present.
pub(crate) fn check_kind(kind: &Option<String>) -> Result<(), RcpError> {
    match kind.as_deref() {
        None | Some("query") | Some("document") => Ok(()),
        Some(other) => Err(RcpError::invalid_params("kind", format!("kind '{other}' must be 'query' or 'document'"))),
    }
}

/// Validates `embed`/`embed/multi` params against the advertised modalities and encodings
/// (the capability accessors, which apply the §6 defaults); returns the request and the encoding to use.
pub(crate) fn embed(
    p: EmbedParams,
    batch_limit: Option<u32>,
    modalities: &[String],
    encodings: &[String],
    notes: &mut Vec<String>,
) -> Result<(EmbedRequest, String), RcpError> {
    if p.inputs.is_none() && p.texts.is_none() {
        return Err(RcpError::invalid_params("inputs", "missing field `inputs` (or legacy `texts`)"));
    }
    let field = p.items_field();
    let mut items = p.items().to_vec();
    inputs(&mut items, field, batch_limit, modalities)?;
    check_kind(&p.kind)?;
    let strict = p.strict.unwrap_or(true);
    let finding = gating::encoding(p.encoding.as_deref(), encodings);
    let encoding = match p.encoding.clone() {
        Some(e) if !settle(finding, strict, notes)? => e,
        _ => "json".to_owned(),
    };
    Ok((EmbedRequest { inputs: items, kind: p.kind, meta: p.meta }, encoding))
}

/// Validates `rerank` params (§7.6); returns the request and `topN`.
pub(crate) fn rerank(
    mut p: RerankParams,
    caps: &Capabilities,
    notes: &mut Vec<String>,
) -> Result<(RerankRequest, Option<usize>), RcpError> {
    let rc = caps.rerank.clone().unwrap_or_default();
    let strict = p.strict.unwrap_or(true);
    query_shape(&p.query, "query")?;
    // The query of `rerank` is text (§7.6): refused whatever `strict` says.
    settle(gating::query_modality(Gate::RerankQueryModality, &p.query, default_modalities()), true, notes)?;
    query(&mut p.query, "query", false)?;
    if let Some(max) = rc.max_candidates
        && p.passages.len() > max as usize
    {
        return Err(RcpError::invalid_params(
            "passages",
            format!("{} passages exceed rerank.maxCandidates {max}", p.passages.len()),
        ));
    }
    inputs(&mut p.passages, "passages", None, default_modalities())?;
    let fell_back = settle(gating::rerank_method(caps, &p), strict, notes)?;
    let method = match p.method {
        Some(m) if !fell_back => m,
        _ => gating::default_rerank_method(&rc).to_owned(),
    };
    let top_n = match p.top_n {
        Some(0) => return Err(RcpError::invalid_params("topN", "topN must be >= 1")),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => None,
    };
    Ok((RerankRequest { query: p.query, passages: p.passages, method, model: p.model, meta: p.meta }, top_n))
}

/// Checks that `value` is one of `advertised` (no `strict` fallback for this method):
/// `query/transform` `method`, `graph` `op`, `memory/build` `scope` (§7.8, §7.9, §7.17).
pub(crate) fn one_of(option: &str, value: &str, advertised: &[String]) -> Result<(), RcpError> {
    match Gate::listed_option(option) {
        Some(gate) => gating::one_of(gate, value, advertised).map_or(Ok(()), |f| Err(f.error())),
        None if advertised.iter().any(|a| a == value) => Ok(()),
        None => {
            let list: Vec<&str> = advertised.iter().map(String::as_str).collect();
            Err(RcpError::option_unsupported(option, value, &list))
        }
    }
}

/// The largest `_meta.deadlineMs` accepted: 2^53 - 1, the largest integer every JSON peer
/// represents exactly (about 285,000 years, so never a real limit).
const MAX_DEADLINE_MS: u64 = (1 << 53) - 1;

/// `_meta.deadlineMs` (§13.1, §16.2): milliseconds remaining, a non-negative integer. Absent
/// is `None`; anything else that is not such an integer (`-1`, `"5"`, `0.5`, `true`, `2^63`,
/// `1e300`) is `-32602` at `_meta.deadlineMs` rather than silently ignored.
pub(crate) fn deadline_ms(meta: Option<&Meta>) -> Result<Option<u64>, RcpError> {
    let Some(v) = meta.and_then(|m| m.get("deadlineMs")) else { return Ok(None) };
    match v.as_u64() {
        Some(ms) if ms <= MAX_DEADLINE_MS => Ok(Some(ms)),
        _ => Err(RcpError::invalid_params(
            "_meta.deadlineMs",
            format!("deadlineMs must be an integer number of milliseconds in [0, {MAX_DEADLINE_MS}], got {v}"),
        )),
    }
}

/// A count that must be `>= 1` when present: `n`, `k`, `hops` (§7.8, §7.9, §7.17).
pub(crate) fn at_least_one(field: &str, value: Option<impl Into<u64>>) -> Result<(), RcpError> {
    match value.map(Into::into) {
        Some(0) => Err(RcpError::invalid_params(field, format!("{field} must be >= 1"))),
        _ => Ok(()),
    }
}

/// `index/add` params (§7.10): only advertised options (`chunk`, `contextual`; no `strict`
/// fallback), well-formed document ids, and metadata that fits the advertised field types
/// (§8; the ingestion rule of `rcp_corpus::validate`).
pub(crate) fn index_add(p: &IndexAddParams, caps: &Capabilities) -> Result<(), RcpError> {
    if let Some(f) = gating::index_add(caps, p).first() {
        return Err(f.error());
    }
    document_ids(&p.documents)?;
    fields::declared_fields(p, caps)
}

/// The document ids of one `index/add` batch (§7.10): each given id non-empty and unique.
pub(crate) fn document_ids(docs: &[Document]) -> Result<(), RcpError> {
    let mut seen = HashSet::new();
    for (i, d) in docs.iter().enumerate() {
        let Some(id) = &d.id else { continue };
        if id.is_empty() {
            return Err(RcpError::invalid_params(format!("documents[{i}].id"), "id must not be empty"));
        }
        if !seen.insert(id.as_str()) {
            return Err(RcpError::invalid_params(
                format!("documents[{i}].id"),
                format!("duplicate id '{id}' in one batch"),
            ));
        }
    }
    Ok(())
}

/// Every `feedback` reward in `[-1, 1]` (§7.16).
pub(crate) fn rewards(signals: &[Signal]) -> Result<(), RcpError> {
    match signals.iter().position(|s| s.reward.is_some_and(|r| !(-1.0..=1.0).contains(&r))) {
        Some(i) => Err(RcpError::invalid_params(format!("signals[{i}].reward"), "reward must be in [-1,1]")),
        None => Ok(()),
    }
}
