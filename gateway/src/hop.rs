//! Loop detection and hop budget of §16.2: `_meta.federation = {depth, path}`.

use rcp_protocol::Meta;
use serde_json::{Value, json};

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
    pub fn from_meta(meta: Option<&Meta>, default_depth: u32) -> Self {
        let fed = meta.and_then(|m| m.get("federation"));
        let depth = fed
            .and_then(|f| f.get("depth"))
            .and_then(Value::as_u64)
            .map_or(default_depth, |d| u32::try_from(d).unwrap_or(u32::MAX));
        let path = fed
            .and_then(|f| f.get("path"))
            .and_then(Value::as_array)
            .map(|p| p.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        Self { depth, path }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_with_depth_decremented_and_identity_appended() {
        let mut meta = Meta::new();
        meta.insert("federation".into(), json!({"depth": 2, "path": ["a"]}));
        let hop = Hop::from_meta(Some(&meta), 3);
        let next = hop.forward("b").unwrap();
        assert_eq!(next, Hop { depth: 1, path: vec!["a".into(), "b".into()] });
        assert!(next.visited("a") && !hop.visited("b"));
        assert_eq!(next.to_value(), json!({"depth": 1, "path": ["a", "b"]}));
    }

    #[test]
    fn a_fresh_request_gets_the_default_budget_and_depth_zero_stops() {
        assert_eq!(Hop::from_meta(None, 3), Hop { depth: 3, path: vec![] });
        let spent = Hop { depth: 0, path: vec!["x".into()] };
        assert_eq!(spent.forward("y"), None);
    }
}
