//! Rule: a request's `_meta` (§4.2) is read only when its params carry one. Most requests have
//! none, so the params are searched for the key before anything is parsed; a malformed
//! `_meta` answers `-32602` naming it. `_meta` is side-band data: one larger than
//! [`MAX_META_BYTES`] is refused (`-32602`, `error.data.limit`) from its borrowed text,
//! before it is parsed into a tree many times its size.

use rcp_wire::{Meta, RcpError};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The largest `_meta` object a request may carry, in bytes of its JSON text.
pub(crate) const MAX_META_BYTES: usize = 64 * 1024;

#[derive(Deserialize, Default)]
struct MetaOnly<'a> {
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
}

/// The request's `_meta` object, if its params carry one.
pub(crate) fn parse(params: Option<&RawValue>) -> Result<Option<Meta>, RcpError> {
    let Some(p) = params.filter(|p| memchr::memmem::find(p.get().as_bytes(), b"\"_meta\"").is_some()) else {
        return Ok(None);
    };
    let bad = |e: serde_json::Error| RcpError::invalid_params("_meta", e.to_string());
    let Some(raw) = serde_json::from_str::<MetaOnly<'_>>(p.get()).map_err(bad)?.meta else {
        return Ok(None);
    };
    let len = raw.get().len();
    if len > MAX_META_BYTES {
        return Err(RcpError::invalid_params(
            "_meta",
            format!("{len} bytes; a request's _meta may hold at most {MAX_META_BYTES} bytes"),
        )
        .with_limit(MAX_META_BYTES as u64));
    }
    serde_json::from_str::<Option<Meta>>(raw.get()).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).expect("json")
    }

    #[test]
    fn meta_is_read_only_when_present() {
        assert_eq!(parse(None).ok(), Some(None));
        assert_eq!(parse(Some(&raw(r#"{"query":"q"}"#))).ok(), Some(None));
        let meta = parse(Some(&raw(r#"{"query":"q","_meta":{"deadlineMs":5}}"#))).ok().flatten();
        assert_eq!(meta.and_then(|m| m.get("deadlineMs").and_then(|v| v.as_u64())), Some(5));
    }

    #[test]
    fn an_oversized_meta_is_refused_naming_the_limit() {
        let path = vec!["a"; MAX_META_BYTES / 4];
        let params = serde_json::json!({"query": "q", "_meta": {"federation": {"path": path}}}).to_string();
        let e = parse(Some(&raw(&params))).err();
        assert_eq!(e.as_ref().map(|e| (e.code.0, e.field(), e.limit())), Some((-32602, Some("_meta"), Some(65536))));
        assert_eq!(parse(Some(&raw(r#"{"_meta":null}"#))).ok(), Some(None));
    }

    #[test]
    fn a_malformed_meta_names_the_field() {
        let e = parse(Some(&raw(r#"{"_meta":[1]}"#))).err();
        assert_eq!(e.as_ref().and_then(|e| e.field()), Some("_meta"));
    }
}
