//! Content blocks (§4.8) carrying a text payload: by `uri`, which a server must refuse when it
//! will not or cannot fetch it, and inline as base64 `data`, which must not be read as nothing.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::retrieve::NO_RETRIEVE;
use crate::session::Main;
use crate::verdict::{Res, fail, hit_key, hits, pass, pass_note, skip};

/// A URI no server can fetch: `.invalid` never resolves (RFC 6761).
const UNFETCHABLE: &str = "https://rcp-conformance.invalid/query.txt";

pub(crate) async fn uri_unfetchable(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let block = json!({"type": "blob", "mimeType": "text/plain", "uri": UNFETCHABLE});
    let r = m.retrieve(json!({"query": block, "k": 1})).await?;
    match r.code() {
        Some(-32602) => pass(),
        Some(-32005) => pass_note("-32005: the server refuses text blocks by reference as an unadvertised modality"),
        _ => fail(format!(
            "a query by a uri the server cannot fetch ({UNFETCHABLE}) must be -32602, not silently ignored; got {}",
            r.brief()
        )),
    }
}

pub(crate) async fn text_data(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let k = m.k(5);
    let plain = hits(&m.broad_hits(k, json!({})).await?)?;
    let block = json!({"type": "blob", "mimeType": "text/plain", "data": STANDARD.encode(&m.broad)});
    let r = m.retrieve(json!({"query": block, "k": k})).await?;
    let Ok(inline) = hits(&r) else {
        return match r.code() {
            Some(-32602 | -32005) => {
                pass_note(format!("refused ({}): a text-only server may accept only the string form", r.brief()))
            }
            _ => fail(format!("a text/plain data block must be searched or refused, got {}", r.brief())),
        };
    };
    let ids = |hs: &[serde_json::Value]| hs.iter().map(hit_key).collect::<Vec<_>>();
    if ids(&inline) == ids(&plain) {
        pass()
    } else {
        fail(format!(
            "a text/plain data block holding the broad query was answered {:?}, the same string {:?}: the block was not read as its text",
            ids(&inline),
            ids(&plain)
        ))
    }
}
