//! Evaluating a filter on a document's metadata (§8): the reference semantics for
//! in-memory engines.

use serde_json::Value;

use super::date::date_to_epoch_ms;
use super::{Filter, Op};
use crate::Meta;

impl Filter {
    /// Evaluates the filter against a document's metadata (a reference for in-memory
    /// engines, §8).
    ///
    /// A missing (or `null`, §4.6) field fails every comparison except `ne`, `nin` and
    /// `exists: false`. Numbers compare as `f64`; strings byte-wise and case-sensitively;
    /// ordered comparisons of two date encodings (RFC 3339 / epoch ms) compare instants.
    /// `eq`/`in` compare whole values (an array field equals only an identical array);
    /// `contains` is substring on strings and element membership on arrays.
    pub fn matches(&self, doc: &Meta) -> bool {
        match self {
            Filter::And(items) => items.iter().all(|f| f.matches(doc)),
            Filter::Or(items) => items.iter().any(|f| f.matches(doc)),
            Filter::Not(inner) => !inner.matches(doc),
            Filter::Leaf { field, op, value } => {
                let actual = doc.get(field).filter(|v| !v.is_null());
                match (op, actual) {
                    (Op::Exists, a) => a.is_some() == value.as_bool().unwrap_or(true),
                    (Op::Ne | Op::Nin, None) => true,
                    (_, None) => false,
                    (Op::Eq, Some(a)) => loose_eq(a, value),
                    (Op::Ne, Some(a)) => !loose_eq(a, value),
                    (Op::In, Some(a)) => set_contains(value, a),
                    (Op::Nin, Some(a)) => !set_contains(value, a),
                    (Op::Gt, Some(a)) => compare(a, value) == Some(std::cmp::Ordering::Greater),
                    (Op::Gte, Some(a)) => compare(a, value).is_some_and(|o| o.is_ge()),
                    (Op::Lt, Some(a)) => compare(a, value) == Some(std::cmp::Ordering::Less),
                    (Op::Lte, Some(a)) => compare(a, value).is_some_and(|o| o.is_le()),
                    (Op::Contains, Some(a)) => match (a, value) {
                        (Value::String(hay), Value::String(needle)) => hay.contains(needle.as_str()),
                        (Value::Array(items), v) => items.iter().any(|x| loose_eq(x, v)),
                        _ => false,
                    },
                }
            }
        }
    }
}

fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
        (Value::String(_), Value::Number(_)) | (Value::Number(_), Value::String(_)) => {
            match (date_to_epoch_ms(a), date_to_epoch_ms(b)) {
                (Some(x), Some(y)) => x == y,
                _ => false,
            }
        }
        _ => a == b,
    }
}

fn set_contains(set: &Value, v: &Value) -> bool {
    match set {
        Value::Array(items) => items.iter().any(|x| loose_eq(v, x)),
        _ => false,
    }
}

fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    if let (Value::Number(x), Value::Number(y)) = (a, b) {
        return x.as_f64()?.partial_cmp(&y.as_f64()?);
    }
    if let (Some(x), Some(y)) = (date_to_epoch_ms(a), date_to_epoch_ms(b)) {
        return Some(x.cmp(&y));
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc() -> Meta {
        match json!({
            "lang": "en",
            "title": "Rust for retrieval",
            "year": 2023,
            "rating": 4.5,
            "draft": false,
            "published": "2023-06-01T10:00:00Z",
            "tags": ["news", "rust"],
            "nothing": null
        }) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn matches_comparisons() {
        let d = doc();
        assert!(Filter::eq("lang", "en").matches(&d));
        assert!(!Filter::eq("lang", "EN").matches(&d));
        assert!(Filter::eq("year", 2023.0).matches(&d));
        assert!(Filter::ne("lang", "de").matches(&d));
        assert!(!Filter::ne("lang", "en").matches(&d));
        assert!(Filter::gt("year", 2022).matches(&d));
        assert!(!Filter::gt("year", 2023).matches(&d));
        assert!(Filter::gte("year", 2023).matches(&d));
        assert!(Filter::lt("rating", 5).matches(&d));
        assert!(Filter::lte("rating", 4.5).matches(&d));
        assert!(!Filter::lt("rating", 4.5).matches(&d));
        assert!(Filter::eq("draft", false).matches(&d));
        assert!(!Filter::eq("draft", 0).matches(&d));
        assert!(Filter::is_in("lang", ["de", "en"]).matches(&d));
        assert!(!Filter::is_in("lang", ["de", "fr"]).matches(&d));
        assert!(Filter::nin("lang", ["de", "fr"]).matches(&d));
        assert!(!Filter::nin("year", [2023]).matches(&d));
        // Strings order byte-wise.
        assert!(Filter::gt("lang", "de").matches(&d));
        assert!(!Filter::gt("lang", "f").matches(&d));
        // Mismatched types never compare.
        assert!(!Filter::gt("lang", 1).matches(&d));
        assert!(!Filter::eq("year", "2023").matches(&d));
    }

    #[test]
    fn matches_dates_in_either_encoding() {
        let d = doc();
        let ms = date_to_epoch_ms(&json!("2023-06-01T10:00:00Z")).unwrap();
        assert!(Filter::gte("published", "2023-06-01").matches(&d));
        assert!(Filter::lt("published", "2023-06-01T12:00:00+01:00").matches(&d));
        assert!(!Filter::lt("published", "2023-06-01T11:00:00+01:00").matches(&d));
        assert!(Filter::gt("published", ms - 1).matches(&d));
        assert!(Filter::lte("published", ms).matches(&d));
        assert!(Filter::eq("published", ms).matches(&d));
        assert!(!Filter::eq("published", ms + 1).matches(&d));
        let mut d2 = Meta::new();
        d2.insert("published".into(), json!(ms));
        assert!(Filter::eq("published", "2023-06-01T10:00:00Z").matches(&d2));
        assert!(Filter::gt("published", "2023-06-01").matches(&d2));
    }

    #[test]
    fn matches_missing_fields() {
        let d = doc();
        for name in ["missing", "nothing"] {
            assert!(!Filter::eq(name, 1).matches(&d));
            assert!(Filter::ne(name, 1).matches(&d));
            assert!(!Filter::gt(name, 1).matches(&d));
            assert!(!Filter::lte(name, 1).matches(&d));
            assert!(!Filter::is_in(name, [1]).matches(&d));
            assert!(Filter::nin(name, [1]).matches(&d));
            assert!(!Filter::contains(name, "x").matches(&d));
            assert!(!Filter::exists(name, true).matches(&d));
            assert!(Filter::exists(name, false).matches(&d));
        }
        assert!(Filter::exists("lang", true).matches(&d));
        assert!(!Filter::exists("lang", false).matches(&d));
        // exists with a non-boolean value (only reachable by hand) defaults to true.
        assert!(Filter::leaf("lang", Op::Exists, json!(null)).matches(&d));
    }

    #[test]
    fn matches_contains_and_combinators() {
        let d = doc();
        assert!(Filter::contains("title", "retrieval").matches(&d));
        assert!(!Filter::contains("title", "Retrieval").matches(&d));
        assert!(Filter::contains("tags", "rust").matches(&d));
        assert!(!Filter::contains("tags", "ru").matches(&d));
        assert!(!Filter::contains("year", 20).matches(&d));
        // eq on an array field compares whole values.
        assert!(!Filter::eq("tags", "rust").matches(&d));

        let spec = Filter::eq("lang", "en") & (Filter::gte("year", 2024) | Filter::contains("tags", "news"));
        assert!(spec.matches(&d));
        assert!(!(!spec.clone()).matches(&d));
        assert!(!(Filter::eq("lang", "en") & Filter::eq("draft", true)).matches(&d));
        assert!((Filter::eq("lang", "de") | Filter::eq("draft", false)).matches(&d));
        // Empty combinators (invalid on the wire) follow all/any semantics.
        assert!(Filter::And(vec![]).matches(&d));
        assert!(!Filter::Or(vec![]).matches(&d));
    }
}
