//! Metadata filtering (§8): advertised fields and operators, value typing, combinators, and that
//! the hits of a valid filter satisfy it.

use serde_json::{Value, json};

use crate::session::{Main, filter_value};
use crate::verdict::{
    Res, expect_code, expect_invalid_params, expect_option_unsupported, fail, hit_key, hits, pass, pass_note, show,
    skip,
};

const OPERATORS: [&str; 10] = ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "exists"];

/// The advertised filter: fields with their types (when typed) and operators (`None`: all).
struct FilterCap {
    fields: Vec<(String, Option<String>)>,
    operators: Option<Vec<String>>,
}

impl FilterCap {
    fn of(m: &Main) -> Option<FilterCap> {
        if !m.caps.has("filter") || !m.caps.has("retrieve") {
            return None;
        }
        Some(FilterCap { fields: m.caps.filter_fields(), operators: m.caps.strings(&["filter", "operators"]) })
    }

    fn allows(&self, op: &str) -> bool {
        self.operators.as_ref().is_none_or(|ops| ops.iter().any(|o| o == op))
    }

    /// An advertised operator usable on any field type, preferring `eq`.
    fn any_type_op(&self) -> Option<&'static str> {
        ["eq", "in", "ne", "nin", "exists"].into_iter().find(|o| self.allows(o))
    }
}

/// A filter value that selects some of the unfiltered hits and excludes others.
struct Pick {
    field: String,
    ftype: Option<String>,
    value: Value,
    /// A hit that carries the value.
    from: String,
    /// The unfiltered hits that carry another value (or none): the filter must drop them.
    excluded: Vec<String>,
}

fn is_scalar(v: &Value) -> bool {
    v.is_string() || v.is_number() || v.is_boolean()
}

/// The first advertised field and value, in hit order, that one of `top` carries and another
/// does not.
fn excluding_value(fc: &FilterCap, top: &[Value]) -> Option<Pick> {
    fc.fields.iter().find_map(|(field, ftype)| {
        top.iter().find_map(|h| {
            let value = h.get("meta")?.get(field).filter(|v| is_scalar(v))?.clone();
            let excluded: Vec<String> =
                top.iter().filter(|o| o.get("meta").and_then(|x| x.get(field)) != Some(&value)).map(hit_key).collect();
            (!excluded.is_empty()).then(|| Pick {
                field: field.clone(),
                ftype: ftype.clone(),
                value,
                from: hit_key(h),
                excluded,
            })
        })
    })
}

async fn filtered(m: &mut Main, filter: Value) -> Result<crate::conn::Resp, String> {
    let k = m.k(10);
    m.broad_hits(k, json!({"filter": filter})).await
}

const NO_FILTER: &str = "filter not advertised";

pub(crate) async fn unadvertised_field(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    let Some(op) = fc.any_type_op() else { return skip("no type-independent operator advertised") };
    let field = "x-conformance-undeclared-field";
    let Some(value) = filter_value(None, op) else { return skip("no value") };
    let r = filtered(m, json!({"field": field, "op": op, "value": value})).await?;
    expect_invalid_params(&r, &[field, "filter"])
}

pub(crate) async fn unadvertised_operator(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    let Some(ops) = &fc.operators else { return skip("filter.operators absent: every operator is allowed") };
    if OPERATORS.iter().all(|o| ops.iter().any(|a| a == o)) {
        return skip("all ten operators are advertised");
    }
    // Pick a missing operator that applies to the field's type, so -32005 is the only right answer.
    for (field, ftype) in &fc.fields {
        let numeric = matches!(ftype.as_deref(), Some("int" | "float" | "date"));
        let candidates: Vec<&str> = OPERATORS
            .into_iter()
            .filter(|o| !fc.allows(o))
            .filter(|o| ["eq", "ne", "in", "nin", "exists"].contains(o) || (numeric && o.starts_with(['g', 'l'])))
            .collect();
        if let Some(op) = candidates.first()
            && let Some(value) = filter_value(ftype.as_deref(), op)
        {
            let r = filtered(m, json!({"field": field, "op": op, "value": value})).await?;
            return expect_option_unsupported(&r);
        }
    }
    skip("no unadvertised operator applies unambiguously to an advertised field")
}

async fn empty(m: &mut Main, combinator: &str) -> Res {
    if FilterCap::of(m).is_none() {
        return skip(NO_FILTER);
    }
    let r = filtered(m, json!({combinator: []})).await?;
    expect_code(&r, -32602)?;
    pass()
}

pub(crate) async fn empty_and(m: &mut Main) -> Res {
    empty(m, "and").await
}

pub(crate) async fn empty_or(m: &mut Main) -> Res {
    empty(m, "or").await
}

pub(crate) async fn type_mismatch(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    if !fc.allows("eq") {
        return skip("eq not advertised");
    }
    let pick = ["int", "float", "bool", "keyword", "text"]
        .into_iter()
        .find_map(|t| fc.fields.iter().find(|(_, ft)| ft.as_deref() == Some(t)).map(|(f, _)| (f.clone(), t)));
    let Some((field, ftype)) = pick else { return skip("filter.fields carries no types (§8 SHOULD)") };
    let wrong = match ftype {
        "int" | "float" => json!("not-a-number"),
        "bool" => json!("yes"),
        _ => json!({"not": "a scalar"}),
    };
    let r = filtered(m, json!({"field": field, "op": "eq", "value": wrong})).await?;
    expect_invalid_params(&r, &[&field, "filter"])
}

pub(crate) async fn valid(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    let typed_exact = |t: &Option<String>| matches!(t.as_deref(), None | Some("keyword" | "int" | "bool"));
    // A value some unfiltered hit carries, chosen so that another hit of the same unfiltered
    // request does not: the filter must then exclude that hit, and an engine that ignores the
    // filter returns it (the filtered request asks for as many hits as the unfiltered one).
    let k = m.probe_k;
    let top: Vec<Value> = m.baseline.clone();
    let pick = if fc.allows("eq") { excluding_value(&fc, &top) } else { None };
    if let Some(Pick { field, ftype, value, from, excluded }) = pick {
        let r = m.broad_hits(k, json!({"filter": {"field": field, "op": "eq", "value": value}})).await?;
        let hs = hits(&r)?;
        if let Some(bad) = hs.iter().find(|h| h.get("meta").and_then(|x| x.get(&field)).is_some_and(|v| *v != value)) {
            return fail(format!(
                "filter {field} eq {value} returned hit {} with {field}={}",
                hit_key(bad),
                show(&bad["meta"][&field])
            ));
        }
        if let Some(kept) = hs.iter().map(hit_key).find(|id| excluded.contains(id)) {
            return fail(format!(
                "filter {field} eq {value} returned hit {kept}, which carries another {field} unfiltered: the filter was ignored"
            ));
        }
        if hs.is_empty() && typed_exact(&ftype) {
            return fail(format!(
                "filter {field} eq {value} returned no hits although hit {from} carries {field}={value}"
            ));
        }
        return pass_note(format!(
            "{field} eq {value}: {} hits, none of the {} unfiltered hits with another {field}",
            hs.len(),
            excluded.len()
        ));
    }
    if let Some((field, value)) = fc.fields.iter().find_map(|(f, _)| {
        top.iter().find_map(|h| h.get("meta")?.get(f).filter(|v| is_scalar(v)).map(|v| (f.clone(), v.clone())))
    }) && fc.allows("eq")
    {
        // Every top hit carries the same value: the filter cannot be shown to exclude anything.
        let r = filtered(m, json!({"field": field, "op": "eq", "value": value})).await?;
        let hs = hits(&r)?;
        return pass_note(format!(
            "{field} eq {value} accepted ({} hits); no value of an advertised field excludes one of the {} unfiltered hits (at k={k}), so an engine ignoring the filter would pass too",
            hs.len(),
            top.len()
        ));
    }
    // No hit carries advertised meta: the filter must at least be accepted.
    let Some((field, ftype)) = fc.fields.first().cloned() else { return skip("filter.fields is empty") };
    let Some(op) = fc.any_type_op() else { return skip("no type-independent operator advertised") };
    let Some(value) = filter_value(ftype.as_deref(), op) else {
        return skip(format!("cannot form a value for field type {ftype:?}"));
    };
    let r = filtered(m, json!({"field": field, "op": op, "value": value})).await?;
    let hs = hits(&r)?;
    pass_note(format!("{field} {op} {value} accepted ({} hits; no hit carried the field to verify)", hs.len()))
}

pub(crate) async fn operator_type(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    let Some(op) = ["gt", "gte", "lt", "lte"].into_iter().find(|o| fc.allows(o)) else {
        return skip("no ordered operator advertised");
    };
    let Some((field, ftype)) =
        fc.fields.iter().find(|(_, t)| matches!(t.as_deref(), Some("keyword" | "text" | "bool"))).cloned()
    else {
        return skip("no typed keyword/text/bool field advertised");
    };
    let value = if ftype.as_deref() == Some("bool") { json!(true) } else { json!("m") };
    let r = filtered(m, json!({"field": field, "op": op, "value": value})).await?;
    expect_invalid_params(&r, &[&field, "filter"])
}

pub(crate) async fn nested(m: &mut Main) -> Res {
    let Some(fc) = FilterCap::of(m) else { return skip(NO_FILTER) };
    let Some((field, ftype)) = fc.fields.first().cloned() else { return skip("filter.fields is empty") };
    let Some(op) = fc.any_type_op() else { return skip("no type-independent operator advertised") };
    let Some(value) = filter_value(ftype.as_deref(), op) else {
        return skip(format!("no value for field type {ftype:?}"));
    };
    let leaf = json!({"field": field, "op": op, "value": value});
    let tree = json!({"or": [{"and": [leaf, {"not": leaf}]}, {"not": {"not": leaf}}]});
    let r = filtered(m, tree).await?;
    hits(&r).map_err(|_| format!("a nested and/or/not filter was rejected: {}", r.brief()))?;
    pass()
}
