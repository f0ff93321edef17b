//! What PostgreSQL can be asked, checked before it is asked, so client input that it would
//! refuse is `-32602` naming the field (and `error.data.limit`), never an outage or an internal
//! error, and never stored altered:
//!
//! - `text` and `jsonb` cannot hold U+0000 (`\u0000` in JSON): an id, title, text, metadata
//!   value or key, query or filter operand holding it is refused ([`refuse_nul`],
//!   [`refuse_nul_in_json`], [`refuse_nul_in_filter`]);
//! - one statement binds at most [`MAX_BIND_PARAMS`] parameters (the protocol's 16-bit count):
//!   a filter that compiles to more is refused before the statement is sent.

use rcp_wire::RcpError;
use rcp_wire::filter::Filter;
use serde_json::{Map, Value};

/// The most bind parameters one PostgreSQL statement takes (the wire protocol counts them in
/// 16 bits).
pub const MAX_BIND_PARAMS: usize = u16::MAX as usize;

/// `-32602` on `field` when `s` holds U+0000.
pub fn refuse_nul(field: impl FnOnce() -> String, s: &str) -> Result<(), RcpError> {
    if s.contains('\0') { Err(nul_error(field())) } else { Ok(()) }
}

/// `-32602` naming the path (`field.key[2]`) of the first string or object key in `v` that
/// holds U+0000.
pub fn refuse_nul_in_json(field: &str, v: &Value) -> Result<(), RcpError> {
    match find_nul(v) {
        Some(at) => Err(nul_error(format!("{field}{at}"))),
        None => Ok(()),
    }
}

/// [`refuse_nul_in_json`] for a JSON object (a document's metadata).
pub fn refuse_nul_in_object(field: &str, map: &Map<String, Value>) -> Result<(), RcpError> {
    match find_nul_in_object(map) {
        Some(at) => Err(nul_error(format!("{field}{at}"))),
        None => Ok(()),
    }
}

/// `-32602` naming the path (`filter.and[1].value`) of the first field name or operand of
/// `filter` that holds U+0000.
pub fn refuse_nul_in_filter(filter: &Filter) -> Result<(), RcpError> {
    in_filter(filter, rcp_wire::filter::ROOT_PATH)
}

fn in_filter(filter: &Filter, path: &str) -> Result<(), RcpError> {
    match filter {
        Filter::And(items) | Filter::Or(items) => {
            let kind = if matches!(filter, Filter::And(_)) { "and" } else { "or" };
            items.iter().enumerate().try_for_each(|(i, f)| in_filter(f, &format!("{path}.{kind}[{i}]")))
        }
        Filter::Not(inner) => in_filter(inner, &format!("{path}.not")),
        Filter::Leaf { field, value, .. } => {
            refuse_nul(|| format!("{path}.field"), field)?;
            refuse_nul_in_json(&format!("{path}.value"), value)
        }
    }
}

/// `-32602` on `filter`: it compiles to `needed` bind parameters, over [`MAX_BIND_PARAMS`].
pub fn too_many_params(needed: usize) -> RcpError {
    RcpError::invalid_params(
        "filter",
        format!(
            "the filter needs {needed} bind parameters; PostgreSQL takes at most {MAX_BIND_PARAMS} per statement \
             (each leaf takes one or two): split it into several requests"
        ),
    )
    .with_limit(MAX_BIND_PARAMS as u64)
}

fn nul_error(field: String) -> RcpError {
    RcpError::invalid_params(field, "holds U+0000 (\\u0000), which PostgreSQL text and jsonb cannot store")
}

/// The path, relative to `v`, of the first string or key holding U+0000.
fn find_nul(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| find_nul(x).map(|at| format!("[{i}]{at}"))),
        Value::Object(map) => find_nul_in_object(map),
        _ => None,
    }
}

fn find_nul_in_object(map: &Map<String, Value>) -> Option<String> {
    map.iter().find_map(|(k, x)| {
        if k.contains('\0') {
            return Some(format!(".{}", k.replace('\0', "\\u0000")));
        }
        find_nul(x).map(|at| format!(".{k}{at}"))
    })
}

#[cfg(test)]
mod tests {
    use rcp_wire::filter::Op;
    use serde_json::json;

    use super::*;

    #[test]
    fn nul_is_refused_naming_its_path() {
        let meta = json!({"topic": "science", "year": 1999, "note": "a\u{0}b"});
        let e = refuse_nul_in_json("documents[0].meta", &meta).unwrap_err();
        assert_eq!((e.code.0, e.field()), (-32602, Some("documents[0].meta.note")));
        let e = refuse_nul_in_json("m", &json!({"a": [1, {"b\u{0}": 2}]})).unwrap_err();
        assert_eq!(e.field(), Some("m.a[1].b\\u0000"));
        assert!(refuse_nul_in_json("m", &json!({"a": ["ok", 1, null]})).is_ok());

        let f = Filter::eq("topic", "x") & Filter::leaf("tags", Op::In, json!(["a", "b\u{0}"]));
        assert_eq!(refuse_nul_in_filter(&f).unwrap_err().field(), Some("filter.and[1].value[1]"));
        assert_eq!(refuse_nul(|| "query".into(), "a\u{0}").unwrap_err().field(), Some("query"));
        assert_eq!(too_many_params(80_001).limit(), Some(65_535));
    }
}
