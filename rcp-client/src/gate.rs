//! Client-side gating (§14.4): a conforming client never calls an unadvertised method or
//! passes an unadvertised option value (unless `strict:false`). These checks run before any
//! I/O, so a refused call writes nothing.
//!
//! What is advertised is decided by `rcp_wire::gating`, the module the server validates
//! with; this file only turns a refusing finding into its [`ClientError`]. Under
//! `strict:false` the client lets through exactly what the server would accept with a
//! fallback, and refuses what the server would refuse anyway.

use rcp_wire::capabilities::{Capabilities, default_encodings};
use rcp_wire::embed::EmbedParams;
use rcp_wire::gating::{self, Finding, Gate, Kind};
use rcp_wire::index::IndexAddParams;
use rcp_wire::methods::Method;
use rcp_wire::rerank::RerankParams;
use rcp_wire::{ErrorCode, RetrieveParams};

use crate::error::ClientError;

/// The method's gating capability must be advertised (`index/add`: a writable index).
pub(crate) fn method(caps: &Capabilities, m: Method) -> Result<(), ClientError> {
    gating::method(caps, m).map_err(|missing| ClientError::CapabilityMissing {
        method: missing.method.to_owned(),
        capability: missing.capability.to_owned(),
    })
}

/// The pre-I/O error for a finding that refuses the request.
fn refusal(f: &Finding) -> ClientError {
    match &f.kind {
        Kind::Rejected(e) if e.code != ErrorCode::OPTION_UNSUPPORTED => ClientError::InvalidParams(e.clone()),
        Kind::Rejected(e) => ClientError::OptionUnsupported {
            option: e.option().unwrap_or(f.option()).to_owned(),
            value: f.value.clone(),
            advertised: f.advertised_list(),
        },
        Kind::NotAdvertised | Kind::FeatureAbsent { .. } => ClientError::OptionUnsupported {
            option: f.option().to_owned(),
            value: f.value.clone(),
            advertised: f.advertised_list(),
        },
    }
}

/// The first finding that refuses the request under `strict` (§7.7), as an error.
fn settle(findings: impl IntoIterator<Item = Finding>, strict: bool) -> Result<(), ClientError> {
    match findings.into_iter().find(|f| f.refuses(strict)) {
        Some(f) => Err(refusal(&f)),
        None => Ok(()),
    }
}

/// `value` must be one of `advertised` (an absent list advertises nothing): `query/transform`
/// `method`, `graph` `op`, `memory/build` `scope`.
pub(crate) fn one_of(option: &str, value: &str, advertised: Option<&[String]>) -> Result<(), ClientError> {
    let list = advertised.unwrap_or(&[]);
    match Gate::listed_option(option) {
        Some(gate) => settle(gating::one_of(gate, value, list), true),
        None if list.iter().any(|a| a == value) => Ok(()),
        None => Err(ClientError::OptionUnsupported {
            option: option.to_owned(),
            value: value.to_owned(),
            advertised: if list.is_empty() { "none".to_owned() } else { list.join(", ") },
        }),
    }
}

/// `encoding` must be advertised (`json` always is), unless `strict:false`.
pub(crate) fn encoding(
    advertised: Option<&Vec<String>>,
    requested: Option<&str>,
    strict: Option<bool>,
) -> Result<(), ClientError> {
    let advertised = advertised.map_or(default_encodings(), Vec::as_slice);
    settle(gating::encoding(requested, advertised), strict.unwrap_or(true))
}

/// `retrieve`: the capability, then every option value the params carry (§7.7, §8).
pub(crate) fn retrieve(caps: &Capabilities, p: &RetrieveParams) -> Result<(), ClientError> {
    method(caps, Method::Retrieve)?;
    settle(gating::retrieve(caps, p), p.is_strict())
}

/// `embed`: the capability, input modalities, the encoding, and `batchLimit` (clients
/// pre-clamp, §4.7).
pub(crate) fn embed(caps: &Capabilities, p: &EmbedParams) -> Result<(), ClientError> {
    method(caps, Method::Embed)?;
    settle(gating::embed(caps, p), p.strict.unwrap_or(true))?;
    if let Some(limit) = caps.embed.as_ref().and_then(|e| e.batch_limit)
        && p.items().len() > limit as usize
    {
        return Err(ClientError::InvalidParams(rcp_wire::RcpError::invalid_params(
            p.items_field(),
            format!("{} inputs exceed batchLimit {limit}", p.items().len()),
        )));
    }
    Ok(())
}

/// `rerank`: the capability, a text query, and the method.
pub(crate) fn rerank(caps: &Capabilities, p: &RerankParams) -> Result<(), ClientError> {
    method(caps, Method::Rerank)?;
    settle(gating::rerank(caps, p), p.strict.unwrap_or(true))
}

/// `index/add` (§7.10): `index.writable`, and `chunk:true`/`contextual:true` need their
/// capability flags (no `strict` fallback).
pub(crate) fn index_add(caps: &Capabilities, p: &IndexAddParams) -> Result<(), ClientError> {
    method(caps, Method::IndexAdd)?;
    settle(gating::index_add(caps, p), true)
}

#[cfg(test)]
mod agreement;
