//! What one `retrieve` may carry into a fan-out. Every engine asked gets its own copy of the
//! filter, the query and the forwarded `_meta`, so their sizes are checked on the request as
//! the framework parsed it, before anything is copied: a list over its limit is `-32602`
//! naming the field and the limit (`error.data.limit`). The hop path has its own limits
//! ([`crate::hop`]).

use rcp_wire::message::json_type;
use rcp_wire::{QueryInput, RcpError, RetrieveParams};
use serde_json::Value;

use super::startup::META_COLLECTIONS;

/// The most collection names `_meta.collections` may list.
pub const MAX_COLLECTIONS: usize = 256;
/// The longest collection name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The most JSON values (nodes, and the elements of `in`/`nin` lists) a filter may hold.
pub const MAX_FILTER_VALUES: usize = 16_384;
/// The most JSON values the `_meta` keys forwarded to every engine may hold together.
pub const MAX_META_VALUES: usize = 4_096;
/// The most content blocks a query may hold.
pub const MAX_QUERY_BLOCKS: usize = 256;

/// The `_meta` keys the gateway reads itself; every other key is forwarded to each engine.
pub(super) const GATEWAY_META_KEYS: [&str; 5] =
    ["federation", "deadlineMs", "progressToken", META_COLLECTIONS, rcp_client::federation::route::META_ENGINE];

/// Checks what `params` would carry into a fan-out against the limits above, without copying.
pub(super) fn check(params: &RetrieveParams) -> Result<(), RcpError> {
    if let QueryInput::Blocks(blocks) = &params.query
        && blocks.len() > MAX_QUERY_BLOCKS
    {
        return Err(too_many("query", blocks.len(), MAX_QUERY_BLOCKS, "content blocks"));
    }
    if let Some(filter) = &params.filter
        && values_over(filter, MAX_FILTER_VALUES)
    {
        return Err(too_many_values("filter", MAX_FILTER_VALUES));
    }
    let forwarded = params.meta.iter().flatten().filter(|(k, _)| !GATEWAY_META_KEYS.contains(&k.as_str()));
    let mut budget = MAX_META_VALUES;
    for (key, value) in forwarded {
        match count_values(value, budget) {
            Some(n) => budget -= n,
            None => return Err(too_many_values(&format!("_meta.{key}"), MAX_META_VALUES)),
        }
    }
    Ok(())
}

/// The collections `_meta.collections` names (`None`: every collection), borrowed from the
/// request: an array of at most [`MAX_COLLECTIONS`] strings of at most [`MAX_NAME_BYTES`].
pub(super) fn collections(params: &RetrieveParams) -> Result<Option<Vec<&str>>, RcpError> {
    let field = format!("_meta.{META_COLLECTIONS}");
    let names = match params.meta.as_ref().and_then(|m| m.get(META_COLLECTIONS)) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(names)) => names,
        Some(other) => {
            return Err(RcpError::invalid_params(
                field,
                format!("must be an array of collection names, got {}", json_type(other)),
            ));
        }
    };
    if names.len() > MAX_COLLECTIONS {
        return Err(too_many(&field, names.len(), MAX_COLLECTIONS, "collection names"));
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        match name {
            Value::String(s) if s.len() > MAX_NAME_BYTES => {
                return Err(RcpError::invalid_params(
                    format!("{field}[{i}]"),
                    format!("{} bytes; a collection name is at most {MAX_NAME_BYTES} bytes", s.len()),
                )
                .with_limit(MAX_NAME_BYTES as u64));
            }
            Value::String(s) => out.push(s.as_str()),
            other => {
                return Err(RcpError::invalid_params(
                    format!("{field}[{i}]"),
                    format!("must be a collection name (a string), got {}", json_type(other)),
                ));
            }
        }
    }
    Ok(Some(out))
}

fn too_many(field: &str, got: usize, limit: usize, what: &str) -> RcpError {
    RcpError::invalid_params(field, format!("{got} {what}; at most {limit} are accepted by this gateway"))
        .with_limit(limit as u64)
}

fn too_many_values(field: &str, limit: usize) -> RcpError {
    RcpError::invalid_params(
        field,
        format!("more than {limit} JSON values; at most {limit} are forwarded to the engines by this gateway"),
    )
    .with_limit(limit as u64)
}

/// Whether `v` holds more than `limit` JSON values (itself included).
fn values_over(v: &Value, limit: usize) -> bool {
    count_values(v, limit).is_none()
}

/// How many JSON values `v` holds (itself included), or `None` as soon as there are more than
/// `budget`: the walk stops there, so its cost is bounded by the budget, not by the input.
fn count_values(v: &Value, budget: usize) -> Option<usize> {
    let mut left = budget.checked_sub(1)?;
    let children: Box<dyn Iterator<Item = &Value>> = match v {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => return Some(1),
    };
    for child in children {
        left -= count_values(child, left)?;
    }
    Some(budget - left)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(v: Value) -> RetrieveParams {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn counting_stops_at_the_budget() {
        assert_eq!(count_values(&json!({"a": [1, 2, {"b": null}]}), 100), Some(6));
        assert_eq!(count_values(&json!([1, 2, 3]), 4), Some(4));
        assert_eq!(count_values(&json!([1, 2, 3]), 3), None);
        assert_eq!(count_values(&json!(1), 0), None);
    }

    #[test]
    fn lists_over_their_limit_are_refused_naming_field_and_limit() {
        let ok = params(json!({"query": "q", "k": 1, "filter": {"field": "id", "op": "in", "value": vec!["x"; 100]}}));
        assert!(check(&ok).is_ok());
        let big = vec!["x"; MAX_FILTER_VALUES];
        let e = check(&params(json!({"query": "q", "k": 1, "filter": {"field": "id", "op": "in", "value": big}})))
            .unwrap_err();
        assert_eq!((e.code.0, e.field(), e.limit()), (-32602, Some("filter"), Some(MAX_FILTER_VALUES as u64)));

        let meta =
            json!({"query": "q", "k": 1, "_meta": {"federation": {"path": []}, "trace": vec![0; MAX_META_VALUES]}});
        let e = check(&params(meta)).unwrap_err();
        assert_eq!((e.field(), e.limit()), (Some("_meta.trace"), Some(MAX_META_VALUES as u64)));

        let names = vec!["c"; MAX_COLLECTIONS + 1];
        let e = collections(&params(json!({"query": "q", "k": 1, "_meta": {"collections": names}}))).unwrap_err();
        assert_eq!((e.field(), e.limit()), (Some("_meta.collections"), Some(MAX_COLLECTIONS as u64)));
        let e = collections(&params(json!({"query": "q", "k": 1, "_meta": {"collections": ["a", 1]}}))).unwrap_err();
        assert_eq!(e.field(), Some("_meta.collections[1]"));
        let named = params(json!({"query": "q", "k": 1, "_meta": {"collections": ["a", "b"]}}));
        assert_eq!(collections(&named).unwrap(), Some(vec!["a", "b"]));
    }
}
