//! Loop detection and hop budget of §16.2: `_meta.federation = {depth, path}`.
//!
//! The path is read from the request as the framework parsed it, and checked before anything
//! is copied out of it: at most [`MAX_PATH_ENTRIES`] identities of at most
//! [`MAX_IDENTITY_BYTES`] each. A longer path is refused with `-32602` naming the field and
//! the limit (`error.data.limit`), so a small request cannot make the gateway copy a huge one
//! once per engine.

use rcp_wire::message::json_type;
use rcp_wire::{Meta, RcpError};
use serde_json::{Value, json};

/// The most aggregators a `_meta.federation.path` may name. An honest path is never longer
/// than the hop budget its originator gave (3 by default); anything near this is a loop or an
/// attack.
pub const MAX_PATH_ENTRIES: usize = 32;

/// The longest identity in a `_meta.federation.path`, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 256;

/// The hop budget a federated request carries (§16.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// Remaining hops; an aggregator receiving `0` answers without forwarding.
    pub depth: u32,
    /// Identities of the aggregators the request already went through, outermost first.
    pub path: Vec<String>,
}

impl Hop {
    /// The hop of an incoming request: its `_meta.federation`, or, when absent, a fresh budget
    /// of `default_depth` hops with an empty path (the gateway originates the federation).
    ///
    /// `-32602` (with `error.data.field`, and `error.data.limit` for a size) when it is not an
    /// object, `depth` is not a non-negative integer, or `path` is not an array of at most
    /// [`MAX_PATH_ENTRIES`] strings of at most [`MAX_IDENTITY_BYTES`] bytes each. Sizes are
    /// checked before anything is copied.
    pub fn from_meta(meta: Option<&Meta>, default_depth: u32) -> Result<Self, RcpError> {
        let fed = match meta.and_then(|m| m.get("federation")) {
            None | Some(Value::Null) => return Ok(Self { depth: default_depth, path: Vec::new() }),
            Some(Value::Object(fed)) => fed,
            Some(other) => {
                return Err(RcpError::invalid_params(
                    "_meta.federation",
                    format!("must be an object {{depth, path}}, got {}", json_type(other)),
                ));
            }
        };
        let depth = match fed.get("depth") {
            None | Some(Value::Null) => default_depth,
            Some(d) => depth_of(d)?,
        };
        let path = match fed.get("path") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(entries)) => path_of(entries)?,
            Some(other) => {
                return Err(RcpError::invalid_params(
                    "_meta.federation.path",
                    format!("must be an array of aggregator identities, got {}", json_type(other)),
                ));
            }
        };
        Ok(Self { depth, path })
    }

    /// What this aggregator forwards: depth decremented and its own identity appended; `None`
    /// when the budget is spent (depth `0`) and nothing may be forwarded.
    pub fn forward(&self, me: &str) -> Option<Hop> {
        let depth = self.depth.checked_sub(1)?;
        let mut path = self.path.clone();
        path.push(me.to_owned());
        Some(Hop { depth, path })
    }

    /// Whether `identity` already handled this request (a cycle).
    pub fn visited(&self, identity: &str) -> bool {
        self.path.iter().any(|p| p == identity)
    }

    /// The `_meta.federation` value.
    pub fn to_value(&self) -> Value {
        json!({"depth": self.depth, "path": self.path})
    }
}

/// `depth` as a hop count: a non-negative integer (`3` or `3.0`), saturated at `u32::MAX`.
fn depth_of(d: &Value) -> Result<u32, RcpError> {
    let n = match d {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64)),
        _ => None,
    };
    n.map(|n| u32::try_from(n).unwrap_or(u32::MAX)).ok_or_else(|| {
        RcpError::invalid_params("_meta.federation.depth", format!("must be a non-negative integer, got {d}"))
    })
}

/// The identities of a path, checked for count and size before any is copied.
fn path_of(entries: &[Value]) -> Result<Vec<String>, RcpError> {
    if entries.len() > MAX_PATH_ENTRIES {
        return Err(RcpError::invalid_params(
            "_meta.federation.path",
            format!("{} entries; at most {MAX_PATH_ENTRIES} aggregators may be on a federation path", entries.len()),
        )
        .with_limit(MAX_PATH_ENTRIES as u64));
    }
    for (i, entry) in entries.iter().enumerate() {
        let field = || format!("_meta.federation.path[{i}]");
        match entry {
            Value::String(s) if s.len() > MAX_IDENTITY_BYTES => {
                return Err(RcpError::invalid_params(
                    field(),
                    format!("{} bytes; an aggregator identity is at most {MAX_IDENTITY_BYTES} bytes", s.len()),
                )
                .with_limit(MAX_IDENTITY_BYTES as u64));
            }
            Value::String(_) => {}
            other => {
                return Err(RcpError::invalid_params(
                    field(),
                    format!("must be an aggregator identity (a string), got {}", json_type(other)),
                ));
            }
        }
    }
    Ok(entries.iter().filter_map(Value::as_str).map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(federation: Value) -> Meta {
        let mut meta = Meta::new();
        meta.insert("federation".into(), federation);
        meta
    }

    #[test]
    fn forwards_with_depth_decremented_and_identity_appended() {
        let meta = meta(json!({"depth": 2, "path": ["a"]}));
        let hop = Hop::from_meta(Some(&meta), 3).unwrap();
        let next = hop.forward("b").unwrap();
        assert_eq!(next, Hop { depth: 1, path: vec!["a".into(), "b".into()] });
        assert!(next.visited("a") && !hop.visited("b"));
        assert_eq!(next.to_value(), json!({"depth": 1, "path": ["a", "b"]}));
    }

    #[test]
    fn a_fresh_request_gets_the_default_budget_and_depth_zero_stops() {
        assert_eq!(Hop::from_meta(None, 3).unwrap(), Hop { depth: 3, path: vec![] });
        assert_eq!(Hop::from_meta(Some(&meta(json!({"depth": 2.0}))), 3).unwrap().depth, 2);
        let spent = Hop { depth: 0, path: vec!["x".into()] };
        assert_eq!(spent.forward("y"), None);
    }

    #[test]
    fn an_overlong_path_or_identity_is_refused_naming_the_limit() {
        let long = meta(json!({"depth": 3, "path": vec!["a"; MAX_PATH_ENTRIES + 1]}));
        let e = Hop::from_meta(Some(&long), 3).unwrap_err();
        assert_eq!((e.code.0, e.field(), e.limit()), (-32602, Some("_meta.federation.path"), Some(32)), "{e}");
        let at_limit = meta(json!({"path": vec!["a"; MAX_PATH_ENTRIES]}));
        assert_eq!(Hop::from_meta(Some(&at_limit), 3).unwrap().path.len(), MAX_PATH_ENTRIES);

        let wide = meta(json!({"path": ["ok", "x".repeat(MAX_IDENTITY_BYTES + 1)]}));
        let e = Hop::from_meta(Some(&wide), 3).unwrap_err();
        assert_eq!((e.field(), e.limit()), (Some("_meta.federation.path[1]"), Some(256)), "{e}");
    }

    #[test]
    fn a_malformed_federation_is_refused_naming_the_field() {
        for (federation, field) in [
            (json!([1]), "_meta.federation"),
            (json!({"depth": -1}), "_meta.federation.depth"),
            (json!({"depth": "3"}), "_meta.federation.depth"),
            (json!({"path": "a"}), "_meta.federation.path"),
            (json!({"path": ["a", 7]}), "_meta.federation.path[1]"),
        ] {
            let e = Hop::from_meta(Some(&meta(federation.clone())), 3).unwrap_err();
            assert_eq!((e.code.0, e.field()), (-32602, Some(field)), "{federation}: {e}");
        }
    }
}
