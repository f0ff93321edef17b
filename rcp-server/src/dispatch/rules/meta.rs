//! Rule: a request's `_meta` (§4.2) is read only when its params carry one. Most requests have
//! none, so the params are searched for the key before anything is parsed; a malformed
//! `_meta` answers `-32602` naming it.

use rcp_protocol::{Meta, RcpError};
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

/// The request's `_meta` object, if its params carry one.
pub(crate) fn parse(params: Option<&RawValue>) -> Result<Option<Meta>, RcpError> {
    let Some(p) = params.filter(|p| memchr::memmem::find(p.get().as_bytes(), b"\"_meta\"").is_some()) else {
        return Ok(None);
    };
    serde_json::from_str::<MetaOnly>(p.get())
        .map(|m| m.meta)
        .map_err(|e| RcpError::invalid_params("_meta", e.to_string()))
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
    fn a_malformed_meta_names_the_field() {
        let e = parse(Some(&raw(r#"{"_meta":[1]}"#))).err();
        assert_eq!(e.as_ref().and_then(|e| e.field()), Some("_meta"));
    }
}
