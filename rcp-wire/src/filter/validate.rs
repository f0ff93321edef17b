//! Parsing and validation of wire filters (§8): structure, advertised fields and operators,
//! value shapes and types, each error naming the exact path (`filter.and[1].value`).

use serde_json::{Map, Value};

use super::date::parse_rfc3339_ms;
use super::{FieldType, Filter, FilterCapability, Op};
use crate::error::{ErrorData, RcpError};
use crate::message::json_type;

/// The deepest filter tree [`validate`] accepts (§8, §15.5): every node on the path from the
/// root to a leaf counts, so 31 nested `not`s around a leaf is the limit.
pub const MAX_DEPTH: usize = 32;

/// The path prefix of filter errors: `filter` is `retrieve.filter` (§7.7, §8).
pub const ROOT_PATH: &str = "filter";

/// Validates a raw wire filter against the advertised capability (§8) and returns the
/// normalised tree (`exists` without a value becomes `exists: true`).
///
/// Errors carry `error.data.field` rooted at `filter` (`filter.and[1].value`,
/// `filter.or[0].field`, `filter.not.op`, `filter.value[2]`):
/// - `-32602` for a non-object node; a node with several of `and`/`or`/`not` or mixing them
///   with leaf keys; an `and`/`or` that is not a non-empty array; nesting beyond
///   [`MAX_DEPTH`]; a missing or empty `field`; an unknown operator (at `.op`); a field that
///   is not advertised (at `.field`); an ordered operator on a field whose type is not
///   `int`/`float`/`date` (at `.op`); a value of the wrong shape or type (at `.value`, or
///   `.value[i]` for an element of `in`/`nin`).
/// - `-32005` (`error.data.option = "filter.op"`, `error.data.field` = the `.op` path) for a
///   valid operator outside the advertised `filter.operators`.
///
/// `null` members count as absent (§4.6); unknown extra keys are ignored.
pub fn validate(value: &Value, cap: &FilterCapability) -> Result<Filter, RcpError> {
    Validator { cap: Some(cap) }.node(value, ROOT_PATH, 1)
}

impl Filter {
    /// Parses a wire filter checking structure and value shapes only (§8): any field name
    /// and operator are accepted, as if every field were advertised untyped.
    pub fn parse(value: &Value) -> Result<Filter, RcpError> {
        Validator { cap: None }.node(value, ROOT_PATH, 1)
    }
}

struct Validator<'a> {
    cap: Option<&'a FilterCapability>,
}

fn present<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0),
        _ => false,
    }
}

fn bad(path: impl Into<String>, detail: impl Into<String>) -> RcpError {
    RcpError::invalid_params(path, detail)
}

fn list_names(names: &[&str]) -> String {
    const SHOWN: usize = 20;
    if names.is_empty() {
        return "none".into();
    }
    let mut s = names.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", … ({} more)", names.len() - SHOWN));
    }
    s
}

const OPERATOR_NAMES: &str = "eq, ne, gt, gte, lt, lte, in, nin, contains, exists";

impl Validator<'_> {
    fn node(&self, v: &Value, path: &str, depth: usize) -> Result<Filter, RcpError> {
        if depth > MAX_DEPTH {
            return Err(bad(path, format!("filter nesting exceeds the limit of {MAX_DEPTH} levels")));
        }
        let Value::Object(obj) = v else {
            return Err(bad(path, format!("expected a filter object, got {}", json_type(v))));
        };
        let combinators: Vec<&str> = ["and", "or", "not"].into_iter().filter(|k| present(obj, k).is_some()).collect();
        let leaf_keys = ["field", "op", "value"].into_iter().any(|k| present(obj, k).is_some());
        if combinators.len() > 1 {
            return Err(bad(
                path,
                format!("a filter node holds exactly one of 'and', 'or', 'not'; found {}", combinators.join(", ")),
            ));
        }
        match combinators.first().copied() {
            Some(kind) if leaf_keys => {
                Err(bad(path, format!("a filter node is either '{kind}' or a leaf {{field, op, value}}, not both")))
            }
            Some("not") => {
                let inner = present(obj, "not").unwrap_or(&Value::Null);
                Ok(Filter::Not(Box::new(self.node(inner, &format!("{path}.not"), depth + 1)?)))
            }
            Some(kind) => {
                let items = present(obj, kind).unwrap_or(&Value::Null);
                let kpath = format!("{path}.{kind}");
                let Value::Array(items) = items else {
                    return Err(bad(
                        kpath,
                        format!("'{kind}' takes a non-empty array of filter nodes, got {}", json_type(items)),
                    ));
                };
                if items.is_empty() {
                    return Err(bad(kpath, format!("'{kind}' must not be empty")));
                }
                let children = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.node(item, &format!("{kpath}[{i}]"), depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if kind == "and" { Filter::And(children) } else { Filter::Or(children) })
            }
            None if !leaf_keys => {
                Err(bad(path, "expected 'and', 'or', 'not' or a leaf {field, op, value}".to_string()))
            }
            None => self.leaf(obj, path),
        }
    }

    fn leaf(&self, obj: &Map<String, Value>, path: &str) -> Result<Filter, RcpError> {
        let fpath = format!("{path}.field");
        let field = match present(obj, "field") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            Some(Value::String(_)) => return Err(bad(fpath, "'field' must be a non-empty string")),
            Some(other) => {
                return Err(bad(fpath, format!("'field' must be a string, got {}", json_type(other))));
            }
            None => return Err(bad(fpath, "missing 'field'")),
        };

        let opath = format!("{path}.op");
        let op_name = match present(obj, "op") {
            Some(Value::String(s)) => s.as_str(),
            Some(other) => {
                return Err(bad(opath, format!("'op' must be a string, got {}", json_type(other))));
            }
            None => {
                return Err(bad(opath, format!("missing 'op'; expected one of {OPERATOR_NAMES}")));
            }
        };
        let Some(op) = Op::parse(op_name) else {
            return Err(bad(opath, format!("unknown operator '{op_name}'; expected one of {OPERATOR_NAMES}")));
        };

        let mut ftype = None;
        if let Some(cap) = self.cap {
            if !cap.allows_op(op) {
                let mut e = RcpError::option_unsupported("filter.op", op_name, &cap.advertised_operators());
                e.data.get_or_insert_with(ErrorData::default).field = Some(opath);
                return Err(e);
            }
            match cap.field_type(field) {
                None => {
                    return Err(bad(
                        fpath,
                        format!("field '{field}' is not filterable; advertised: {}", list_names(&cap.fields.names())),
                    ));
                }
                // Unknown (newer) types get shape checks only.
                Some(t) => ftype = t.filter(|t| !matches!(t, FieldType::Other(_))),
            }
        }

        let vpath = format!("{path}.value");
        let raw = present(obj, "value");
        let value = match op {
            Op::Exists => match raw {
                None => Value::Bool(true),
                Some(Value::Bool(b)) => Value::Bool(*b),
                Some(other) => {
                    return Err(bad(vpath, format!("'exists' takes a boolean, got {}", json_type(other))));
                }
            },
            _ => {
                let Some(raw) = raw else {
                    return Err(bad(vpath, format!("missing 'value' for operator '{op}'")));
                };
                if op.is_ordered() {
                    if let Some(t) = ftype.filter(|t| !t.is_ordered()) {
                        return Err(bad(
                            opath,
                            format!("operator '{op}' needs an int, float or date field; '{field}' is {t}"),
                        ));
                    }
                    if ftype.is_none() && !matches!(raw, Value::Number(_) | Value::String(_)) {
                        return Err(bad(
                            vpath,
                            format!("operator '{op}' takes a number or a date, got {}", json_type(raw)),
                        ));
                    }
                }
                if op.is_set() {
                    let Value::Array(items) = raw else {
                        return Err(bad(
                            vpath,
                            format!("operator '{op}' takes a non-empty array of scalars, got {}", json_type(raw)),
                        ));
                    };
                    if items.is_empty() {
                        return Err(bad(vpath, format!("operator '{op}' takes a non-empty array of scalars")));
                    }
                    for (i, item) in items.iter().enumerate() {
                        check_scalar(ftype, field, item, &format!("{vpath}[{i}]"))?;
                    }
                } else {
                    check_scalar(ftype, field, raw, &vpath)?;
                }
                raw.clone()
            }
        };
        Ok(Filter::Leaf { field: field.to_string(), op, value })
    }
}

/// Checks one scalar operand against the field's type (§8 table).
fn check_scalar(ftype: Option<&FieldType>, field: &str, v: &Value, path: &str) -> Result<(), RcpError> {
    if !is_scalar(v) {
        return Err(bad(path, format!("expected a scalar (string, number or boolean), got {}", json_type(v))));
    }
    let Some(t) = ftype else { return Ok(()) };
    let (ok, want) = match t {
        FieldType::Keyword | FieldType::Text => (v.is_string(), "a string"),
        FieldType::Int => (is_integer(v), "an integer"),
        FieldType::Float => (v.is_number(), "a number"),
        FieldType::Bool => (v.is_boolean(), "a boolean"),
        FieldType::Date => (
            match v {
                Value::String(s) => parse_rfc3339_ms(s).is_some(),
                Value::Number(_) => is_integer(v),
                _ => false,
            },
            "an RFC 3339 date string or integer epoch milliseconds",
        ),
        FieldType::Geo | FieldType::Other(_) => (true, ""),
    };
    if ok {
        Ok(())
    } else {
        let got = match v {
            Value::String(s) if matches!(t, FieldType::Date) => format!("'{s}'"),
            Value::Number(n) if matches!(t, FieldType::Int | FieldType::Date) => n.to_string(),
            other => json_type(other).to_string(),
        };
        Err(bad(path, format!("field '{field}' is {t}: expected {want}, got {got}")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::ErrorCode;
    use crate::filter::fixtures::{cap, ok};

    #[track_caller]
    fn err_at(v: Value, cap: &FilterCapability, field: &str) -> RcpError {
        let e = validate(&v, cap).expect_err("expected the filter to be rejected");
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
        assert_eq!(e.field(), Some(field), "{e:?}");
        e
    }

    fn leaf(field: &str, op: &str, value: Value) -> Value {
        json!({"field": field, "op": op, "value": value})
    }

    // ---- structure ----------------------------------------------------------------------

    #[test]
    fn node_must_be_an_object() {
        let c = cap();
        err_at(json!("lang = en"), &c, "filter");
        err_at(json!([]), &c, "filter");
        err_at(json!(null), &c, "filter");
        err_at(json!({"and": [1]}), &c, "filter.and[0]");
        err_at(json!({"not": [leaf("lang", "eq", json!("en"))]}), &c, "filter.not");
        err_at(json!({}), &c, "filter");
        err_at(json!({"x-unknown": 1}), &c, "filter");
    }

    #[test]
    fn exactly_one_combinator_and_no_mixing() {
        let c = cap();
        let l = leaf("lang", "eq", json!("en"));
        err_at(json!({"and": [l.clone()], "or": [l.clone()]}), &c, "filter");
        err_at(json!({"and": [l.clone()], "not": l.clone()}), &c, "filter");
        let e = err_at(json!({"and": [l.clone()], "field": "lang", "op": "eq", "value": "en"}), &c, "filter");
        assert!(e.message.contains("not both"), "{}", e.message);
        err_at(json!({"or": [{"not": l.clone(), "value": 1}]}), &c, "filter.or[0]");
        // null members are absent (§4.6).
        ok(json!({"and": [l.clone()], "or": null, "field": null}), &c);
        ok(json!({"field": "lang", "op": "eq", "value": "en", "not": null}), &c);
        // Unknown extra keys are ignored on leaves and combinators.
        ok(json!({"field": "lang", "op": "eq", "value": "en", "x-boost": 2}), &c);
        ok(json!({"and": [l], "x-note": "hi"}), &c);
    }

    #[test]
    fn and_or_must_be_non_empty_arrays() {
        let c = cap();
        err_at(json!({"and": []}), &c, "filter.and");
        err_at(json!({"or": []}), &c, "filter.or");
        err_at(json!({"and": {"field": "lang", "op": "eq", "value": "en"}}), &c, "filter.and");
        err_at(json!({"not": {"or": []}}), &c, "filter.not.or");
        err_at(json!({"and": [leaf("lang", "eq", json!("en")), {"or": []}]}), &c, "filter.and[1].or");
        assert_eq!(ok(json!({"or": [leaf("lang", "eq", json!("en"))]}), &c), Filter::any([Filter::eq("lang", "en")]));
    }

    #[test]
    fn depth_limit() {
        let c = cap();
        let mut v = leaf("lang", "eq", json!("en"));
        for _ in 0..MAX_DEPTH - 1 {
            v = json!({"not": v});
        }
        ok(v.clone(), &c);
        let too_deep = json!({"not": v});
        let e = validate(&too_deep, &c).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        let path = e.field().unwrap();
        assert!(path.starts_with("filter.not.not") && path.ends_with(".not"), "{path}");
        assert_eq!(path.matches(".not").count(), MAX_DEPTH);

        // Deep and-chains too, without walking the whole (large) input.
        let mut v = leaf("lang", "eq", json!("en"));
        for _ in 0..200 {
            v = json!({"and": [v]});
        }
        assert_eq!(validate(&v, &c).unwrap_err().code, ErrorCode::INVALID_PARAMS);
    }

    // ---- leaf: field & op -----------------------------------------------------------------

    #[test]
    fn field_must_be_a_non_empty_advertised_string() {
        let c = cap();
        err_at(json!({"op": "eq", "value": "en"}), &c, "filter.field");
        err_at(leaf("", "eq", json!("en")), &c, "filter.field");
        err_at(json!({"field": 3, "op": "eq", "value": "en"}), &c, "filter.field");
        let e = err_at(
            json!({"or": [leaf("lang", "eq", json!("en")), leaf("secret", "eq", json!(1))]}),
            &c,
            "filter.or[1].field",
        );
        assert!(e.message.contains("'secret'") && e.message.contains("lang"), "{}", e.message);
        err_at(json!({"or": [leaf("Lang", "eq", json!("en"))]}), &c, "filter.or[0].field");
        let untyped = FilterCapability::untyped(["a"]);
        err_at(leaf("b", "eq", json!(1)), &untyped, "filter.field");
        err_at(leaf("a", "eq", json!(1)), &FilterCapability::default(), "filter.field");
    }

    #[test]
    fn op_must_be_a_known_operator() {
        let c = cap();
        err_at(json!({"field": "lang", "value": "en"}), &c, "filter.op");
        err_at(json!({"not": leaf("lang", "like", json!("en"))}), &c, "filter.not.op");
        err_at(json!({"not": leaf("lang", "EQ", json!("en"))}), &c, "filter.not.op");
        err_at(json!({"field": "lang", "op": 1, "value": "en"}), &c, "filter.op");
    }

    #[test]
    fn unadvertised_operator_is_option_unsupported() {
        let c = cap().with_operators(["eq", "in"]);
        ok(leaf("lang", "eq", json!("en")), &c);
        let e =
            validate(&json!({"and": [leaf("lang", "eq", json!("en")), leaf("year", "gt", json!(1))]}), &c).unwrap_err();
        assert_eq!(e.code, ErrorCode::OPTION_UNSUPPORTED);
        assert_eq!(e.option(), Some("filter.op"));
        assert_eq!(e.field(), Some("filter.and[1].op"));
        assert!(e.message.contains("'gt'") && e.message.contains("eq, in"), "{}", e.message);
        let wire = serde_json::to_value(&e).unwrap();
        assert_eq!(wire["data"]["field"], "filter.and[1].op");
        assert_eq!(wire["data"]["option"], "filter.op");
        // An unknown name is still -32602, even with a restricted set.
        err_at(leaf("lang", "near", json!(1)), &c, "filter.op");
    }

    // ---- leaf: values -------------------------------------------------------------------

    #[test]
    fn eq_ne_take_a_typed_scalar() {
        let c = cap();
        ok(leaf("lang", "eq", json!("en")), &c);
        ok(leaf("title", "ne", json!("x")), &c);
        ok(leaf("year", "eq", json!(2024)), &c);
        ok(leaf("year", "eq", json!(2024.0)), &c);
        ok(leaf("rating", "eq", json!(4)), &c);
        ok(leaf("rating", "ne", json!(4.5)), &c);
        ok(leaf("draft", "eq", json!(false)), &c);
        ok(leaf("published", "eq", json!("2017-06-12T00:00:00Z")), &c);
        ok(leaf("published", "eq", json!(1_497_225_600_000i64)), &c);
        ok(leaf("future", "eq", json!(true)), &c);
        err_at(leaf("lang", "eq", json!(3)), &c, "filter.value");
        err_at(leaf("lang", "eq", json!(true)), &c, "filter.value");
        err_at(leaf("lang", "eq", json!(["en"])), &c, "filter.value");
        err_at(leaf("lang", "eq", json!({"x": 1})), &c, "filter.value");
        err_at(leaf("lang", "eq", json!(null)), &c, "filter.value");
        err_at(json!({"field": "lang", "op": "eq"}), &c, "filter.value");
        err_at(leaf("year", "eq", json!(2024.5)), &c, "filter.value");
        err_at(leaf("year", "eq", json!("2024")), &c, "filter.value");
        err_at(leaf("rating", "eq", json!("4.5")), &c, "filter.value");
        err_at(leaf("draft", "eq", json!("true")), &c, "filter.value");
        err_at(leaf("draft", "eq", json!(1)), &c, "filter.value");
        err_at(leaf("published", "eq", json!("yesterday")), &c, "filter.value");
        err_at(leaf("published", "eq", json!(1.5)), &c, "filter.value");
        err_at(leaf("published", "eq", json!(true)), &c, "filter.value");
        let e = err_at(
            json!({"and": [leaf("lang", "eq", json!("en")), leaf("year", "eq", json!("x"))]}),
            &c,
            "filter.and[1].value",
        );
        assert!(e.message.contains("'year' is int"), "{}", e.message);
    }

    #[test]
    fn ordered_ops_need_ordered_fields_and_values() {
        let c = cap();
        for op in ["gt", "gte", "lt", "lte"] {
            ok(leaf("year", op, json!(2020)), &c);
            ok(leaf("rating", op, json!(3.5)), &c);
            ok(leaf("published", op, json!("2024-02-29")), &c);
            ok(leaf("published", op, json!(0)), &c);
            err_at(leaf("lang", op, json!("m")), &c, "filter.op");
            err_at(leaf("title", op, json!("m")), &c, "filter.op");
            err_at(leaf("draft", op, json!(true)), &c, "filter.op");
            err_at(leaf("loc", op, json!(1)), &c, "filter.op");
            err_at(json!({"not": leaf("lang", op, json!(1))}), &c, "filter.not.op");
            err_at(leaf("year", op, json!(2020.5)), &c, "filter.value");
            err_at(leaf("year", op, json!("2020")), &c, "filter.value");
            err_at(leaf("rating", op, json!([1])), &c, "filter.value");
            err_at(leaf("published", op, json!("2024-02-30")), &c, "filter.value");
        }
    }

    #[test]
    fn in_nin_take_a_non_empty_array_of_typed_scalars() {
        let c = cap();
        for op in ["in", "nin"] {
            ok(leaf("tag", op, json!(["a", "b"])), &c);
            ok(leaf("year", op, json!([2020, 2021])), &c);
            ok(leaf("published", op, json!(["2020-01-01", 0])), &c);
            err_at(leaf("tag", op, json!([])), &c, "filter.value");
            err_at(leaf("tag", op, json!("a")), &c, "filter.value");
            err_at(leaf("tag", op, json!(null)), &c, "filter.value");
            err_at(leaf("tag", op, json!(["a", "b", 3])), &c, "filter.value[2]");
            err_at(leaf("tag", op, json!(["a", ["b"]])), &c, "filter.value[1]");
            err_at(leaf("year", op, json!([2020, 2020.5])), &c, "filter.value[1]");
            err_at(json!({"or": [{"not": leaf("draft", op, json!([true, "no"]))}]}), &c, "filter.or[0].not.value[1]");
        }
    }

    #[test]
    fn contains_takes_a_scalar() {
        let c = cap();
        ok(leaf("title", "contains", json!("rust")), &c);
        ok(leaf("tag", "contains", json!("news")), &c);
        ok(leaf("year", "contains", json!(2020)), &c);
        err_at(leaf("title", "contains", json!(3)), &c, "filter.value");
        err_at(leaf("tag", "contains", json!(["news"])), &c, "filter.value");
        err_at(json!({"field": "title", "op": "contains"}), &c, "filter.value");
    }

    #[test]
    fn exists_takes_an_optional_boolean() {
        let c = cap();
        assert_eq!(ok(json!({"field": "loc", "op": "exists"}), &c), Filter::exists("loc", true));
        assert_eq!(ok(json!({"field": "loc", "op": "exists", "value": null}), &c), Filter::exists("loc", true));
        assert_eq!(ok(leaf("loc", "exists", json!(false)), &c), Filter::exists("loc", false));
        err_at(leaf("loc", "exists", json!("yes")), &c, "filter.value");
        err_at(leaf("loc", "exists", json!(1)), &c, "filter.value");
        err_at(json!({"field": "nope", "op": "exists"}), &c, "filter.field");
    }

    #[test]
    fn untyped_fields_get_shape_checks_only() {
        let c = FilterCapability::untyped(["a", "b"]);
        ok(leaf("a", "eq", json!("x")), &c);
        ok(leaf("a", "eq", json!(1)), &c);
        ok(leaf("a", "eq", json!(true)), &c);
        ok(leaf("a", "gt", json!(1.5)), &c);
        ok(leaf("a", "gt", json!("2024-01-01")), &c);
        ok(leaf("a", "in", json!([1, "x", true])), &c);
        ok(leaf("a", "contains", json!(3)), &c);
        err_at(leaf("a", "eq", json!([1])), &c, "filter.value");
        err_at(leaf("a", "gt", json!(true)), &c, "filter.value");
        err_at(leaf("a", "gt", json!({"x": 1})), &c, "filter.value");
        err_at(leaf("a", "in", json!([])), &c, "filter.value");
        err_at(leaf("a", "in", json!([1, {}])), &c, "filter.value[1]");
        // Unknown advertised types behave like untyped ones, including for ordered ops.
        ok(leaf("future", "gt", json!(1)), &cap());
        // Filter::parse accepts any field.
        assert_eq!(Filter::parse(&leaf("zzz", "eq", json!(1))).unwrap(), Filter::eq("zzz", 1));
        assert_eq!(Filter::parse(&json!({"and": []})).unwrap_err().field(), Some("filter.and"));
        assert!(serde_json::from_value::<Filter>(json!({"and": []})).is_err());
    }

    #[test]
    fn validate_round_trips_builder_output() {
        let c = cap();
        let filters = [
            Filter::eq("lang", "en"),
            Filter::not(Filter::eq("draft", true)) & Filter::gte("published", "2023-01-01T00:00:00+02:00"),
            Filter::any([Filter::nin("tag", ["x"]), Filter::lt("rating", 2), Filter::exists("loc", false)]),
            Filter::all([Filter::any([Filter::not(Filter::contains("title", "a"))])]),
        ];
        for f in filters {
            let v = f.to_value();
            assert_eq!(validate(&v, &c).unwrap(), f);
            assert_eq!(c.validate(&v).unwrap(), f);
            let text = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Filter>(&text).unwrap(), f);
        }
    }
}
