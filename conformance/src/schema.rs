//! Frame validation: a JSON Schema of RCP 1.0 — the one this crate ships
//! ([`Schemas::builtin`]) or one read from a file (`--schema`, e.g. the spec's normative
//! `rcp-1.0.json`), or both at once ([`Schemas::and`]) — and the built-in structural rules of
//! the JSON-RPC 2.0 envelope (§4) that apply to every frame regardless.

use std::path::Path;

use serde_json::{Value, json};

/// The text of the RCP 1.0 JSON Schema shipped in this crate (`conformance/schema/rcp-1.0.json`):
/// written by this project from the specification's prose (§4–§17) and the workspace's wire
/// types, not copied from the normative schema. Where the two disagree it takes the normative
/// schema's verdict; the crate's `schema_agreement` test holds both to the same verdicts on a
/// corpus of valid and invalid frames. [`Schemas::builtin`] compiles it.
pub const BUILTIN_SCHEMA: &str = include_str!("../schema/rcp-1.0.json");

/// How reports and error messages name [`BUILTIN_SCHEMA`].
pub const BUILTIN_SCHEMA_NAME: &str = "built-in RCP 1.0 schema (rcp-conformance)";

/// Validators built from one or more RCP JSON Schemas: for each, the root (any frame or batch)
/// and `$defs/ResultFor` (a `{method, result}` pair, since a bare response does not name its
/// method). A frame is valid only if every schema accepts it.
pub struct Schemas {
    sets: Vec<Compiled>,
}

/// One schema, compiled.
struct Compiled {
    name: String,
    frame: jsonschema::Validator,
    result_for: jsonschema::Validator,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Schemas").field(&self.names()).finish()
    }
}

impl Schemas {
    /// Reads and compiles the schema at `path`; it is named by its path.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read schema {}: {e}", path.display()))?;
        let schema: Value =
            serde_json::from_str(&text).map_err(|e| format!("schema {} is not JSON: {e}", path.display()))?;
        Self::compile(path.display().to_string(), &schema)
    }

    /// Compiles an already-parsed schema document. Its root must validate frames and it must
    /// define `$defs/ResultFor`.
    pub fn from_value(schema: &Value) -> Result<Self, String> {
        Self::compile("schema".to_owned(), schema)
    }

    /// The RCP 1.0 schema shipped in this crate ([`BUILTIN_SCHEMA`]), named
    /// [`BUILTIN_SCHEMA_NAME`].
    ///
    /// # Panics
    ///
    /// Never in a released build: the embedded schema is compiled by this crate's tests.
    pub fn builtin() -> Self {
        let schema: Value = serde_json::from_str(BUILTIN_SCHEMA).expect("the built-in schema is JSON");
        Self::compile(BUILTIN_SCHEMA_NAME.to_owned(), &schema).expect("the built-in schema compiles")
    }

    /// These schemas and `other`'s together: a frame or result is valid only if every one
    /// accepts it, and each violation names the schema it comes from.
    pub fn and(mut self, other: Schemas) -> Self {
        self.sets.extend(other.sets);
        self
    }

    /// The names of the schemas, in the order they validate: a path, [`BUILTIN_SCHEMA_NAME`],
    /// or `schema` for one given as a value.
    pub fn names(&self) -> Vec<&str> {
        self.sets.iter().map(|s| s.name.as_str()).collect()
    }

    fn compile(name: String, schema: &Value) -> Result<Self, String> {
        let frame = jsonschema::validator_for(schema).map_err(|e| format!("schema does not compile: {e}"))?;
        let mut by_method = schema.clone();
        let obj = by_method.as_object_mut().ok_or("schema root is not an object")?;
        if obj.get("$defs").is_none_or(|d| d.get("ResultFor").is_none()) {
            return Err("schema has no $defs/ResultFor".into());
        }
        for key in ["oneOf", "anyOf", "allOf", "type", "properties", "required", "items"] {
            obj.remove(key);
        }
        obj.insert("$ref".into(), json!("#/$defs/ResultFor"));
        let result_for =
            jsonschema::validator_for(&by_method).map_err(|e| format!("$defs/ResultFor does not compile: {e}"))?;
        Ok(Self { sets: vec![Compiled { name, frame, result_for }] })
    }

    /// Schema violations of one received frame (message or batch).
    pub fn frame_errors(&self, frame: &Value) -> Vec<String> {
        self.frame_violations(frame).into_iter().map(|(_, text)| text).collect()
    }

    /// Schema violations of one received frame, each with a key naming the rule and the place
    /// (array positions folded).
    pub(crate) fn frame_violations(&self, frame: &Value) -> Vec<(String, String)> {
        self.violations(|set| set.frame.iter_errors(frame).map(|e| violation(&e)).collect())
    }

    /// Schema violations of `result` as the result of `method`.
    pub fn result_errors(&self, method: &str, result: &Value) -> Vec<String> {
        self.result_violations(method, result).into_iter().map(|(_, text)| text).collect()
    }

    /// Schema violations of `result` as the result of `method`, each with a key naming the rule
    /// and the place it was broken (array positions folded), so the same defect in two responses
    /// has the same key.
    pub(crate) fn result_violations(&self, method: &str, result: &Value) -> Vec<(String, String)> {
        let inst = json!({"method": method, "result": result});
        self.violations(|set| set.result_for.iter_errors(&inst).map(|e| violation(&e)).collect())
    }

    /// Every schema's violations; with more than one schema, each key and text names its schema.
    fn violations(&self, of: impl Fn(&Compiled) -> Vec<(String, String)>) -> Vec<(String, String)> {
        if let [only] = self.sets.as_slice() {
            return of(only);
        }
        self.sets
            .iter()
            .flat_map(|set| {
                of(set).into_iter().map(|(key, text)| (format!("{}|{key}", set.name), format!("[{}] {text}", set.name)))
            })
            .collect()
    }
}

/// The key (rule and place, array positions folded) and the text of one schema error.
fn violation(e: &jsonschema::ValidationError<'_>) -> (String, String) {
    let place = e.instance_path().to_string();
    (format!("{}|{}", e.schema_path(), fold_digits(&place)), describe(&e.to_string(), &place))
}

fn describe(msg: &str, path: &str) -> String {
    let msg = crate::report::truncate(msg, 160);
    if path.is_empty() { msg } else { format!("{msg} at {path}") }
}

/// The built-in envelope rules for a frame received from a server: `jsonrpc: "2.0"`, responses
/// with an `id` and exactly one of `result`/`error`, error objects with an integer `code` and a
/// string `message` (§4.2, §4.3, §12).
pub fn envelope_errors(frame: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    match frame {
        Value::Array(members) => {
            if members.is_empty() {
                errs.push("empty batch response array (JSON-RPC forbids it)".to_owned());
            }
            for (i, m) in members.iter().enumerate() {
                if m.get("method").is_some() {
                    errs.push(format!("batch response member {i} is not a response"));
                }
                errs.extend(message_errors(m).into_iter().map(|e| format!("batch member {i}: {e}")));
            }
        }
        _ => errs.extend(message_errors(frame)),
    }
    errs
}

fn message_errors(m: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(obj) = m.as_object() else {
        return vec![format!("frame is not a JSON object: {}", crate::report::truncate(&m.to_string(), 80))];
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        errs.push(format!(
            "jsonrpc is {} instead of \"2.0\"",
            obj.get("jsonrpc").map_or("absent".into(), |v| v.to_string())
        ));
    }
    if let Some(method) = obj.get("method") {
        if !method.is_string() {
            errs.push("method is not a string".to_owned());
        }
        if let Some(p) = obj.get("params")
            && !p.is_object()
        {
            errs.push("notification params is not an object".to_owned());
        }
        return errs;
    }
    match obj.get("id") {
        None => errs.push("response has no id".to_owned()),
        Some(Value::String(_) | Value::Number(_) | Value::Null) => {}
        Some(other) => errs.push(format!("response id {other} is not a string, number or null")),
    }
    match (obj.get("result"), obj.get("error")) {
        (Some(_), Some(_)) => errs.push("response carries both result and error".to_owned()),
        (None, None) => errs.push("response carries neither result nor error".to_owned()),
        (None, Some(e)) => {
            if !e.get("code").is_some_and(|c| c.is_i64()) {
                errs.push("error.code is not an integer".to_owned());
            }
            if !e.get("message").is_some_and(Value::is_string) {
                errs.push("error.message is not a string".to_owned());
            }
        }
        (Some(_), None) => {}
    }
    errs
}

/// Replaces every run of ASCII digits with `#`.
pub(crate) fn fold_digits(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_digits = false;
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_rules() {
        assert!(envelope_errors(&json!({"jsonrpc":"2.0","id":1,"result":{}})).is_empty());
        assert!(envelope_errors(&json!({"jsonrpc":"2.0","method":"notifications/log","params":{}})).is_empty());
        assert_eq!(envelope_errors(&json!({"jsonrpc":"1.0","id":1,"result":{}})).len(), 1);
        assert_eq!(envelope_errors(&json!({"jsonrpc":"2.0","id":1})).len(), 1);
        assert_eq!(envelope_errors(&json!({"jsonrpc":"2.0","id":1,"error":{"code":"x"}})).len(), 2);
        assert_eq!(envelope_errors(&json!([])).len(), 1);
        assert_eq!(envelope_errors(&json!([{"jsonrpc":"2.0","id":[1],"result":{}}])).len(), 1);
    }

    #[test]
    fn the_builtin_schema_validates_frames_and_results() {
        let s = Schemas::builtin();
        assert_eq!(s.names(), [BUILTIN_SCHEMA_NAME]);
        assert!(
            s.frame_errors(&json!({"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"q","k":3}}))
                .is_empty()
        );
        assert!(
            !s.frame_errors(&json!({"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"q"}})).is_empty()
        );
        assert!(s.frame_errors(&json!([{"jsonrpc":"2.0","id":1,"result":{}}])).is_empty());
        assert!(!s.frame_errors(&json!([])).is_empty());
        assert!(s.result_errors("rerank", &json!({"scores":[0.5, 0.1]})).is_empty());
        let errs = s.result_errors("rerank", &json!({"results":[{"index":0,"score":0.5}]}));
        assert!(errs.iter().any(|e| e.contains("scores")), "{errs:?}");
    }

    #[test]
    fn schemas_together_accept_only_what_both_accept_and_name_the_one_that_refused() {
        // A stand-in second schema that also demands a `result.tag` on every ping result.
        let strict = json!({
            "$defs": {"ResultFor": {"if": {"properties": {"method": {"const": "ping"}}},
                                     "then": {"properties": {"result": {"required": ["tag"]}}}}},
            "anyOf": [{"type": "object"}, {"type": "array"}]
        });
        let both = Schemas::builtin().and(Schemas::from_value(&strict).expect("compiles"));
        assert_eq!(both.names(), [BUILTIN_SCHEMA_NAME, "schema"]);
        assert!(both.result_errors("ping", &json!({"tag": 1})).is_empty());
        let errs = both.result_errors("ping", &json!({}));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("[schema] "), "{errs:?}");
        let errs = both.result_errors("ping", &json!({"nonce": true}));
        assert!(errs.iter().any(|e| e.starts_with(&format!("[{BUILTIN_SCHEMA_NAME}] "))), "{errs:?}");
    }
}
