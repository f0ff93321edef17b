//! Mutations derived from the schema: walk a method's params schema alongside a valid call and,
//! at every path the schema types, put one value there that the schema forbids (§14.1).
//!
//! What counts as forbidden is read from the schema only: a JSON type outside the node's `type`
//! (or the types of its `enum`/`const`, or of any `anyOf`/`oneOf` branch), a number outside
//! `minimum`/`maximum`, a non-integral number where `integer` is required, and an empty array
//! under `minItems`. Two exceptions keep the sweep from asking for what the spec itself does not
//! forbid: `null` is sent only where a value is required (an array item, a required property),
//! since §4.6 says a receiver treats an explicit `null` for an optional field as absent (the
//! `tolerance.null-as-absent` check holds servers to that); and a path the schema leaves untyped
//! (a filter leaf's `value`, `_meta.progressToken`) is not mutated at all.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One step of a params path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object key.
    Key(String),
    /// An array position.
    Index(usize),
}

/// A path as a reader writes it: `filter.and[0].field`.
pub(crate) fn dotted(at: &[Step]) -> String {
    written(at, false)
}

/// The same path with array positions folded (`filter.and[].field`): the key of one defect.
pub(crate) fn folded(at: &[Step]) -> String {
    written(at, true)
}

/// `at` written with dots between keys and each array position as `[i]`, or `[]` when
/// `fold_positions`.
fn written(at: &[Step], fold_positions: bool) -> String {
    let mut out = String::new();
    for s in at {
        match s {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(_) if fold_positions => out.push_str("[]"),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// One malformed call: a valid call with one forbidden value at one path.
#[derive(Debug, Clone)]
pub(crate) struct Mutation {
    /// Where the forbidden value is, e.g. `filter.and[0].field`.
    pub path: String,
    /// The path with array positions folded: mutations with the same key probe the same defect.
    pub key: String,
    /// What was put there, in words: `a string for an integer`.
    pub kind: String,
    /// The whole params object sent.
    pub params: Value,
    /// `-32005` is conformant too: the path names an option (an enum, or a feature the valid call
    /// did not use and the server may not advertise).
    pub option: bool,
    /// The last key of the path (what `error.data.field` should name).
    pub leaf: String,
    /// When the path lies inside another branch of a union than the valid call took (a query as
    /// a content block): that valid call, which the server must accept before the mutation says
    /// anything.
    pub alternative: Option<Value>,
}

/// The JSON types a schema node allows; `None` when it does not constrain the type.
fn allowed(defs: &Map<String, Value>, s: &Value, depth: usize) -> Option<BTreeSet<&'static str>> {
    let s = resolve(defs, s);
    if depth > 8 {
        return None;
    }
    if let Some(t) = s.get("type") {
        let mut set = BTreeSet::new();
        let names: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        for n in names {
            set.insert(kind_name(n)?);
            if n == "number" {
                set.insert("integer");
            }
        }
        return Some(set);
    }
    if let Some(Value::Array(vals)) = s.get("enum") {
        return Some(vals.iter().map(json_kind).collect());
    }
    if let Some(c) = s.get("const") {
        return Some(BTreeSet::from([json_kind(c)]));
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(union) {
            let mut set = BTreeSet::new();
            for b in branches {
                set.extend(allowed(defs, b, depth + 1)?);
            }
            return Some(set);
        }
    }
    None
}

fn kind_name(n: &str) -> Option<&'static str> {
    Some(match n {
        "string" => "string",
        "integer" => "integer",
        "number" => "number",
        "boolean" => "boolean",
        "object" => "object",
        "array" => "array",
        "null" => "null",
        _ => return None,
    })
}

/// The JSON type of a value (`integer` for a number with no fractional part).
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Follows `$ref: "#/$defs/<name>"` links.
fn resolve<'a>(defs: &'a Map<String, Value>, mut s: &'a Value) -> &'a Value {
    for _ in 0..8 {
        match s.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
            Some(name) => match defs.get(name) {
                Some(next) => s = next,
                None => return s,
            },
            None => return s,
        }
    }
    s
}

/// A copy of `base` with `v` at `at` (the last key is created when absent).
pub(crate) fn put(base: &Value, at: &[Step], v: Value) -> Value {
    let mut out = base.clone();
    let mut cur = &mut out;
    for (i, step) in at.iter().enumerate() {
        let last = i + 1 == at.len();
        let next = match step {
            Step::Key(k) => cur.as_object_mut().map(|o| {
                if last {
                    o.insert(k.clone(), Value::Null);
                }
                o.entry(k.clone()).or_insert(Value::Null)
            }),
            Step::Index(j) => cur.as_array_mut().and_then(|a| a.get_mut(*j)),
        };
        match next {
            Some(n) => cur = n,
            None => return out,
        }
    }
    *cur = v;
    out
}

/// The schema walk: every mutation of one method's params, in a stable order.
pub(crate) struct Walker<'a> {
    defs: &'a Map<String, Value>,
    /// Mutations found so far.
    pub out: Vec<Mutation>,
    /// With a seed: more samples per forbidden type (see [`samples`]).
    deep: bool,
    /// Folded paths whose own type is mutated but whose inside is not walked.
    opaque: &'a [&'a str],
}

impl<'a> Walker<'a> {
    /// A walker over the `$defs` of a schema document.
    pub(crate) fn new(defs: &'a Map<String, Value>, deep: bool) -> Self {
        Walker { defs, out: Vec::new(), deep, opaque: &[] }
    }

    /// Leaves the inside of these (folded) paths alone.
    pub(crate) fn opaque(mut self, paths: &'a [&'a str]) -> Self {
        self.opaque = paths;
        self
    }

    /// Walks `schema` (a params schema) alongside `base` (a valid params object).
    pub(crate) fn params(&mut self, schema: &Value, base: &Value) {
        self.node(schema, base, &mut Vec::new(), Some(base), true, false, None);
    }

    /// One node: its own type mutations, then its children, then the branches of a union.
    #[allow(clippy::too_many_arguments)] // the walk's state, threaded through one recursion
    fn node(
        &mut self,
        schema: &Value,
        base: &Value,
        at: &mut Vec<Step>,
        value: Option<&Value>,
        required: bool,
        option: bool,
        alt: Option<&Value>,
    ) {
        let defs = self.defs;
        let s = resolve(defs, schema);
        if !at.is_empty() {
            self.forbidden_values(s, base, at, value, required, option, alt);
        }
        let Some(v) = value else { return };
        if self.opaque.contains(&folded(at).as_str()) {
            return;
        }
        self.node_children(s, base, at, v, option, alt);
        let Some(branches) = s.get("anyOf").or_else(|| s.get("oneOf")).and_then(Value::as_array) else { return };
        let chosen = branches.iter().find(|b| fits(defs, b, v));
        if let Some(b) = chosen {
            self.node_children(b, base, at, v, option, alt);
        }
        // The other object-shaped branches, built around the valid value (a content block for a
        // string query, an `and`/`or`/`not` around a filter leaf), once per path: the call with
        // that valid alternative in place is the base of their mutations.
        if alt.is_none() {
            for b in branches.iter().filter(|b| Some(*b) != chosen) {
                if let Some(other) = self.alternative(b, s, v) {
                    let base2 = put(base, at, other.clone());
                    self.node_children(b, &base2, at, &other, option, Some(&base2));
                }
            }
        }
    }

    /// Descends into an object's properties and an array's first item.
    fn node_children(
        &mut self,
        schema: &Value,
        base: &Value,
        at: &mut Vec<Step>,
        v: &Value,
        option: bool,
        alt: Option<&Value>,
    ) {
        let defs = self.defs;
        let s = resolve(defs, schema);
        if let (Some(props), Some(obj)) = (s.get("properties").and_then(Value::as_object), v.as_object()) {
            let req = required_keys(s);
            for (name, sub) in props {
                at.push(Step::Key(name.clone()));
                match obj.get(name) {
                    Some(child) => self.node(sub, base, at, Some(child), req.contains(name), option, alt),
                    // An option the valid call left out: typed mutations only, and -32005 may
                    // answer them (the feature need not be advertised). Not inside an
                    // alternative branch: `data` on a text block says nothing about coercion.
                    None if alt.is_none() => self.node(sub, base, at, None, false, true, alt),
                    None => {}
                }
                at.pop();
            }
        }
        if let (Some(items), Some(first)) = (s.get("items"), v.as_array().and_then(|a| a.first())) {
            at.push(Step::Index(0));
            self.node(items, base, at, Some(first), true, option, alt);
            at.pop();
        }
    }

    /// The forbidden values of one node.
    #[allow(clippy::too_many_arguments)] // the node's place in the walk
    fn forbidden_values(
        &mut self,
        s: &Value,
        base: &Value,
        at: &[Step],
        value: Option<&Value>,
        required: bool,
        option: bool,
        alt: Option<&Value>,
    ) {
        let Some(ok) = allowed(self.defs, s, 0) else { return };
        let is_enum = s.get("enum").is_some() || s.get("const").is_some();
        let push = |v: Value, kind: String, out: &mut Vec<Mutation>| {
            let leaf = at
                .iter()
                .rev()
                .find_map(|s| match s {
                    Step::Key(k) => Some(k.clone()),
                    Step::Index(_) => None,
                })
                .unwrap_or_default();
            out.push(Mutation {
                path: dotted(at),
                key: folded(at),
                kind,
                params: put(base, at, v),
                option: option || is_enum,
                leaf,
                alternative: alt.cloned(),
            });
        };
        for (sample, what) in samples(value, self.deep) {
            let k = json_kind(&sample);
            let fits = ok.contains(k) || (k == "integer" && ok.contains("number"));
            if fits || (k == "null" && !required) {
                continue;
            }
            let shown: Vec<&str> = ok.iter().copied().filter(|t| !(*t == "integer" && ok.contains("number"))).collect();
            push(sample, format!("{what} where the schema allows {}", shown.join("/")), &mut self.out);
        }
        let integer_only = ok.contains("integer") && !ok.contains("number");
        if integer_only {
            let base_n = value.and_then(Value::as_f64).unwrap_or(1.0);
            push(json!(base_n + 0.5), "a non-integral number for an integer".into(), &mut self.out);
        }
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            let below = if integer_only { json!(min as i64 - 1) } else { json!(min - 1.0) };
            let what = format!("{below} below the minimum {min}");
            push(below, what, &mut self.out);
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            let above = if integer_only { json!(max as i64 + 1) } else { json!(max + 1.0) };
            let what = format!("{above} above the maximum {max}");
            push(above, what, &mut self.out);
        }
        if s.get("minItems").and_then(Value::as_u64).is_some_and(|n| n >= 1) && value.is_some_and(Value::is_array) {
            push(json!([]), "an empty array where items are required".into(), &mut self.out);
        }
        if s.get("minLength").and_then(Value::as_u64).is_some_and(|n| n >= 1) && value.is_some_and(Value::is_string) {
            push(json!(""), "an empty string where content is required".into(), &mut self.out);
        }
    }

    /// A valid instance of an object-shaped `branch` of `union`, built around `v`: a required
    /// property typed as the union itself holds `v`, one typed as an array of it holds `[v]`, a
    /// required string holds `v` when it is a string.
    fn alternative(&self, branch: &Value, union: &Value, v: &Value) -> Option<Value> {
        let defs = self.defs;
        let b = resolve(defs, branch);
        if b.get("type").and_then(Value::as_str) != Some("object") {
            return None;
        }
        let props = b.get("properties").and_then(Value::as_object)?;
        let mut req = required_keys(b);
        // A content block: `if type is text then text is required`.
        if let Some(then) = b.get("then") {
            req.extend(required_keys(then));
        }
        let mut out = Map::new();
        for name in req {
            let p = props.get(&name)?;
            let pr = resolve(defs, p);
            let item = pr.get("items").map(|i| resolve(defs, i));
            let value = if std::ptr::eq(pr, union) {
                v.clone()
            } else if item.is_some_and(|i| std::ptr::eq(i, union)) {
                json!([v])
            } else if let Some(Value::Array(e)) = pr.get("enum") {
                e.first()?.clone()
            } else if pr.get("type").and_then(Value::as_str) == Some("string") {
                v.as_str().map_or_else(|| json!("conformance"), |s| json!(s))
            } else {
                return None;
            };
            out.insert(name, value);
        }
        Some(Value::Object(out))
    }
}

fn required_keys(s: &Value) -> Vec<String> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Whether `v` fits a union branch well enough to walk it: its JSON type is allowed and an
/// object has the branch's required keys.
fn fits(defs: &Map<String, Value>, branch: &Value, v: &Value) -> bool {
    let b = resolve(defs, branch);
    let k = json_kind(v);
    let typed = allowed(defs, b, 0).is_none_or(|ok| ok.contains(k) || (k == "integer" && ok.contains("number")));
    typed && required_keys(b).iter().all(|r| v.get(r).is_some())
}

/// The values tried at a node, one of each JSON type (the node drops those it allows). A string
/// for a number is the number's own text (`"1"`, and `"1.0"`: what a coercing server parses);
/// a number for a string is `7`. With a seed (`deep`), more of each.
fn samples(value: Option<&Value>, deep: bool) -> Vec<(Value, String)> {
    let numeric_text = value.filter(|v| v.is_number()).map(Value::to_string);
    let mut out = Vec::new();
    match &numeric_text {
        Some(t) => {
            if !t.contains('.') {
                let f = format!("{t}.0");
                out.push((json!(f), format!("the string \"{f}\"")));
            }
            out.push((json!(t), format!("the string \"{t}\"")));
        }
        None => out.push((json!("1.0"), "the string \"1.0\"".into())),
    }
    out.push((json!(7), "the number 7".into()));
    out.push((json!(true), "true".into()));
    out.push((json!({}), "an object".into()));
    out.push((json!(["conformance"]), "an array".into()));
    out.push((Value::Null, "null".into()));
    if deep {
        out.push((json!(""), "an empty string".into()));
        out.push((json!(-1), "the number -1".into()));
        out.push((json!(1e300), "the number 1e300".into()));
        out.push((json!(9_007_199_254_740_993_u64), "the number 2^53+1".into()));
        out.push((json!(false), "false".into()));
        out.push((json!({"text": "conformance"}), "an object with a text key".into()));
        out.push((json!([]), "an empty array".into()));
        out.push((json!([1]), "an array of a number".into()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> Map<String, Value> {
        let schema: Value = serde_json::from_str(crate::schema::BUILTIN_SCHEMA).expect("schema");
        schema.get("$defs").and_then(Value::as_object).cloned().expect("$defs")
    }

    fn walk(def: &str, base: Value) -> Vec<Mutation> {
        let defs = defs();
        let mut w = Walker::new(&defs, false);
        w.params(&json!({"$ref": format!("#/$defs/{def}")}), &base);
        w.out
    }

    fn at<'m>(ms: &'m [Mutation], path: &str) -> Vec<&'m Mutation> {
        ms.iter().filter(|m| m.path == path).collect()
    }

    #[test]
    fn initialize_gets_a_string_version_and_no_null_for_optionals() {
        let ms = walk("params.initialize", json!({"protocolVersion": 1, "client": {"name": "c"}}));
        let pv: Vec<&Value> = at(&ms, "protocolVersion").iter().map(|m| &m.params["protocolVersion"]).collect();
        assert!(pv.contains(&&json!("1")) && pv.contains(&&json!("1.0")), "{pv:?}");
        assert!(pv.contains(&&Value::Null), "protocolVersion is required: null is sent");
        assert!(pv.contains(&&json!(1.5)) && pv.contains(&&json!(0)), "{pv:?}");
        assert!(!pv.contains(&&json!(7)), "7 is a valid integer");
        let meta: Vec<&Value> = at(&ms, "_meta").iter().map(|m| &m.params["_meta"]).collect();
        assert!(!meta.is_empty() && !meta.contains(&&Value::Null), "_meta is optional: no null");
        assert!(at(&ms, "_meta").iter().all(|m| m.option));
        assert!(!at(&ms, "client.name").is_empty(), "nested objects are walked");
    }

    #[test]
    fn retrieve_reaches_query_blocks_and_filter_trees() {
        let base = json!({"query": "q", "k": 3, "filter": {"field": "lang", "op": "eq", "value": "en"}});
        let ms = walk("params.retrieve", base);
        let k: Vec<&Value> = at(&ms, "k").iter().map(|m| &m.params["k"]).collect();
        assert!(k.contains(&&json!("3")) && k.contains(&&json!(3.5)) && k.contains(&&json!(0)), "{k:?}");
        let field = at(&ms, "filter.field");
        assert!(field.iter().any(|m| m.params["filter"]["field"] == json!(7)), "a number for the field name");
        let text = at(&ms, "query.text");
        assert!(text.iter().any(|m| m.params["query"] == json!({"type": "text", "text": 7})), "{text:?}");
        let nested = at(&ms, "filter.and[0].field");
        assert!(nested.iter().any(|m| m.params["filter"] == json!({"and": [{"field": 7, "op": "eq", "value": "en"}]})));
        assert_eq!(nested[0].key, "filter.and[].field");
        assert!(at(&ms, "filter.and").iter().any(|m| m.params["filter"]["and"] == json!([])), "empty and");
        assert!(at(&ms, "filter.value").is_empty(), "an untyped path is left alone");
        assert!(at(&ms, "mmr.lambda").is_empty(), "an absent object is not entered");
        assert!(at(&ms, "seed").iter().all(|m| m.option && m.params["seed"] != Value::Null));
        // Every mutation is invalid against the schema itself.
        let schema: Value = serde_json::from_str(crate::schema::BUILTIN_SCHEMA).expect("schema");
        let mut one = schema.clone();
        one.as_object_mut().expect("object").remove("allOf");
        one["$ref"] = json!("#/$defs/params.retrieve");
        let v = jsonschema::validator_for(&one).expect("compiles");
        for m in &ms {
            assert!(!v.is_valid(&m.params), "{} {}: {} is valid", m.path, m.kind, m.params);
        }
    }
}
