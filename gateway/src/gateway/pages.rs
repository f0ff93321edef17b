//! Pagination over the fused list (§10 `cursor`/`nextCursor`): the gateway's cursor holds the
//! offset into its own fused ranking and a fingerprint of the request it belongs to, so it
//! survives the engines' own cursors (which are never forwarded: each page is fused afresh
//! from the engines' top `offset + k` hits, in the same deterministic order, §16.3).
//!
//! A cursor is `g1.<offset>.<fingerprint>`; one of another request, or malformed, is `-32602`
//! on `cursor`. Pages reach at most [`MAX_DEPTH`] hits into the fused list. A reranked answer
//! (the gateway's rerank stage) is not paginated, as the framework's funnel does not
//! paginate: its answer carries no `nextCursor`.

use std::hash::{DefaultHasher, Hash, Hasher};

use rcp_wire::{RcpError, RetrieveParams, RetrieveResult};

/// How deep into the fused list pages may reach.
pub(super) const MAX_DEPTH: usize = 10_000;

/// The fingerprint of a request: everything but its cursor and `_meta`.
fn fingerprint(params: &RetrieveParams) -> u64 {
    let bare = RetrieveParams { cursor: None, meta: None, ..params.clone() };
    let mut h = DefaultHasher::new();
    serde_json::to_string(&bare).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The offset a request starts at: `0`, or its cursor's.
pub(super) fn offset(params: &RetrieveParams) -> Result<usize, RcpError> {
    let Some(cursor) = params.cursor.as_deref() else { return Ok(0) };
    let bad =
        |why: &str| RcpError::invalid_params("cursor", format!("'{cursor}' is not a cursor of this request: {why}"));
    let mut parts = cursor.split('.');
    let (Some("g1"), Some(offset), Some(print), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad("not a gateway cursor"));
    };
    let offset: usize = offset.parse().map_err(|_| bad("bad offset"))?;
    let print = u64::from_str_radix(print, 16).map_err(|_| bad("bad fingerprint"))?;
    if print != fingerprint(params) {
        return Err(bad("it belongs to another query, k, filter or option"));
    }
    if offset > MAX_DEPTH {
        return Err(bad("past the deepest page"));
    }
    Ok(offset)
}

/// The cursor of the page starting at `offset`.
pub(super) fn cursor(params: &RetrieveParams, offset: usize) -> String {
    format!("g1.{offset}.{:016x}", fingerprint(params))
}

/// The page of `fused` (ranked `want` deep) starting at `offset`: at most `k` hits, and a
/// `nextCursor` when the fused list holds more.
pub(super) fn page(mut fused: RetrieveResult, params: &RetrieveParams, offset: usize, k: usize) -> RetrieveResult {
    let more = fused.hits.len() > offset + k;
    fused.hits = fused.hits.into_iter().skip(offset).take(k).collect();
    fused.next_cursor = more.then(|| cursor(params, offset + k));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_belong_to_their_request() {
        let p: RetrieveParams = serde_json::from_value(serde_json::json!({"query": "wing", "k": 5})).unwrap();
        let c = cursor(&p, 5);
        let next = RetrieveParams { cursor: Some(c.clone()), ..p.clone() };
        assert_eq!(offset(&next).unwrap(), 5);
        let other = RetrieveParams { query: "lift".into(), cursor: Some(c), ..p.clone() };
        assert!(offset(&other).unwrap_err().message.contains("another query"));
        for bad in ["x", "g1.a.00", "g1.5", "g1.5.zz", "g1.5.00.1"] {
            let q = RetrieveParams { cursor: Some(bad.into()), ..p.clone() };
            assert_eq!(offset(&q).unwrap_err().code, rcp_wire::ErrorCode::INVALID_PARAMS, "{bad}");
        }
        let deep = RetrieveParams { cursor: Some(cursor(&p, MAX_DEPTH + 1)), ..p };
        assert!(offset(&deep).is_err());
    }
}
