//! Client-side gating (§14.4): a conforming client never calls an unadvertised method or
//! passes an unadvertised option value (unless `strict:false`). These checks run before any
//! I/O, so a refused call writes nothing.

use rcp_protocol::capabilities::Capabilities;
use rcp_protocol::embed::EmbedParams;
use rcp_protocol::filter;
use rcp_protocol::methods::Method;
use rcp_protocol::rerank::RerankParams;
use rcp_protocol::{ErrorCode, RetrieveParams};

use crate::error::ClientError;

/// The method's gating capability must be advertised.
pub(crate) fn method(caps: &Capabilities, m: Method) -> Result<(), ClientError> {
    match m.capability() {
        Some(cap) if !caps.has(cap) => {
            Err(ClientError::CapabilityMissing { method: m.name().to_owned(), capability: cap.key().to_owned() })
        }
        _ => Ok(()),
    }
}

fn unsupported(option: &str, value: &str, advertised: &[String]) -> ClientError {
    ClientError::OptionUnsupported {
        option: option.to_owned(),
        value: value.to_owned(),
        advertised: if advertised.is_empty() { "none".to_owned() } else { advertised.join(", ") },
    }
}

/// `value` must be one of `advertised` (an absent list advertises nothing).
pub(crate) fn one_of(option: &str, value: &str, advertised: Option<&[String]>) -> Result<(), ClientError> {
    let list = advertised.unwrap_or(&[]);
    if list.iter().any(|a| a == value) { Ok(()) } else { Err(unsupported(option, value, list)) }
}

fn strict_one_of(
    strict: bool,
    option: &str,
    value: Option<&str>,
    advertised: Option<&[String]>,
    default: &[&str],
) -> Result<(), ClientError> {
    let Some(value) = value else { return Ok(()) };
    if !strict {
        return Ok(());
    }
    match advertised {
        Some(list) => one_of(option, value, Some(list)),
        None if default.contains(&value) => Ok(()),
        None => Err(unsupported(option, value, &default.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>())),
    }
}

/// `encoding` must be advertised (`json` always is), unless `strict:false`.
pub(crate) fn encoding(
    advertised: Option<&Vec<String>>,
    requested: Option<&str>,
    strict: Option<bool>,
) -> Result<(), ClientError> {
    match requested {
        None | Some("json") => Ok(()),
        Some(e) => strict_one_of(strict.unwrap_or(true), "encoding", Some(e), advertised.map(Vec::as_slice), &["json"]),
    }
}

/// `retrieve`: the capability, then every option value the params carry (§7.7, §8).
pub(crate) fn retrieve(caps: &Capabilities, p: &RetrieveParams) -> Result<(), ClientError> {
    method(caps, Method::Retrieve)?;
    let rc = caps.retrieve.clone().unwrap_or_default();
    let strict = p.is_strict();
    strict_one_of(strict, "mode", p.mode.as_deref(), rc.modes.as_deref(), &[])?;
    strict_one_of(strict, "modality", p.modality.as_deref(), rc.modalities.as_deref(), &["text"])?;
    strict_one_of(strict, "unit", p.unit.as_deref(), rc.units.as_deref(), &["chunk", "passage"])?;
    if let Some(f) = &p.fusion {
        strict_one_of(strict, "fusion.method", f.method.as_deref(), rc.fusion.as_deref(), &[])?;
    }
    if strict && p.mmr.is_some() && rc.mmr != Some(true) {
        return Err(unsupported("mmr", "enabled", &[]));
    }
    if let Some(stage) = p.rerank_stage() {
        if strict && rc.rerank_builtin != Some(true) {
            return Err(unsupported("rerank", "enabled", &[]));
        }
        if let Some(rr) = &caps.rerank {
            strict_one_of(strict, "rerank.method", stage.method.as_deref(), Some(&rr.methods), &[])?;
        }
    }
    if let Some(raw) = &p.filter {
        match &caps.filter {
            None if strict => return Err(unsupported("filter", "present", &[])),
            None => {}
            Some(fc) => match filter::validate(raw, fc) {
                Ok(_) => {}
                Err(e) if e.code == ErrorCode::OPTION_UNSUPPORTED && !strict => {}
                Err(e) if e.code == ErrorCode::OPTION_UNSUPPORTED => {
                    let op = e.field().unwrap_or("filter").to_owned();
                    return Err(ClientError::OptionUnsupported {
                        option: e.option().unwrap_or("filter.op").to_owned(),
                        value: op,
                        advertised: fc.advertised_operators().join(", "),
                    });
                }
                Err(e) => return Err(ClientError::InvalidParams(e)),
            },
        }
    }
    if p.cursor.is_some() && strict && caps.pagination.is_none() {
        return Err(unsupported("cursor", "present", &[]));
    }
    // Hit vectors are JSON numbers (the schema's `Hit.vector`), whatever `embed` offers.
    encoding(None, p.encoding.as_deref(), p.strict)
}

/// `embed`: the capability, the encoding, and `batchLimit` (clients pre-clamp, §4.7).
pub(crate) fn embed(caps: &Capabilities, p: &EmbedParams) -> Result<(), ClientError> {
    method(caps, Method::Embed)?;
    let ec = caps.embed.clone().unwrap_or_default();
    encoding(ec.encodings.as_ref(), p.encoding.as_deref(), p.strict)?;
    if let Some(limit) = ec.batch_limit
        && p.items().len() > limit as usize
    {
        return Err(ClientError::InvalidParams(rcp_protocol::RcpError::invalid_params(
            p.items_field(),
            format!("{} inputs exceed batchLimit {limit}", p.items().len()),
        )));
    }
    Ok(())
}

/// `rerank`: the capability and the method.
pub(crate) fn rerank(caps: &Capabilities, p: &RerankParams) -> Result<(), ClientError> {
    method(caps, Method::Rerank)?;
    let methods = caps.rerank.as_ref().map(|r| r.methods.as_slice());
    strict_one_of(p.strict.unwrap_or(true), "method", p.method.as_deref(), methods, &[])
}

/// `index/add` needs `index.writable`.
pub(crate) fn index_add(caps: &Capabilities) -> Result<(), ClientError> {
    method(caps, Method::IndexAdd)?;
    if caps.index.as_ref().is_some_and(|i| i.writable) {
        Ok(())
    } else {
        Err(ClientError::CapabilityMissing { method: "index/add".into(), capability: "index (writable: true)".into() })
    }
}
