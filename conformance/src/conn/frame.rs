//! Reading frames: a response with its accessors, notifications, and id matching.

use serde_json::Value;

use crate::report::truncate;

/// A response frame (or a batch response array).
#[derive(Debug, Clone)]
pub(crate) struct Resp(pub Value);

impl Resp {
    /// `result`, when the response is a success.
    pub(crate) fn result(&self) -> Option<&Value> {
        self.0.get("result")
    }

    /// `error.code`, when the response is an error.
    pub(crate) fn code(&self) -> Option<i64> {
        self.0.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64)
    }

    /// `error.data.<key>` as a string.
    pub(crate) fn data_str(&self, key: &str) -> Option<&str> {
        self.0.get("error").and_then(|e| e.get("data")).and_then(|d| d.get(key)).and_then(Value::as_str)
    }

    /// The `id` of the response.
    pub(crate) fn id(&self) -> Option<&Value> {
        self.0.get("id")
    }

    /// A short description for failure messages.
    pub(crate) fn brief(&self) -> String {
        if let Some(e) = self.0.get("error") {
            let code = e.get("code").map_or("?".into(), Value::to_string);
            let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
            return format!("error {code} '{}'", truncate(msg, 100));
        }
        match self.result() {
            Some(r) => format!("result {}", truncate(&r.to_string(), 160)),
            None => truncate(&self.0.to_string(), 160),
        }
    }

    /// `Ok(result)` or `Err(description of the error)`.
    pub(crate) fn ok(&self) -> Result<&Value, String> {
        self.result().ok_or_else(|| format!("expected a result, got {}", self.brief()))
    }
}

/// An id as a map key (its JSON text: `5` and `"5"` differ).
pub(super) fn key(id: &Value) -> String {
    id.to_string()
}

/// Whether two ids are "the same" when their JSON types are ignored (`5` vs `"5"`).
pub(super) fn loose_eq(a: &Value, b: &Value) -> bool {
    let plain = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    a == b || (!a.is_null() && !b.is_null() && plain(a) == plain(b))
}

/// Whether a frame is a notification (a method and no id).
pub(crate) fn is_notification(v: &Value) -> bool {
    v.get("method").is_some() && v.get("id").is_none()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn loose_ids() {
        assert!(loose_eq(&json!(5), &json!("5")));
        assert!(loose_eq(&json!("a"), &json!("a")));
        assert!(!loose_eq(&json!(5), &json!(6)));
        assert!(!loose_eq(&json!(null), &json!("null")));
    }
}
