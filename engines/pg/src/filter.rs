//! §8 filters compiled to SQL over the `metadata` JSONB column, with every value bound as a
//! parameter (field names too): no part of a filter is ever spliced into the SQL text.
//!
//! The semantics are those of the reference evaluator ([`Filter::matches`]): a missing or
//! `null` field fails every comparison except `ne`, `nin` and `exists:false`; numbers compare
//! as numbers, `date` fields as instants (RFC 3339 or epoch ms, via `rcp_epoch_ms`), strings
//! byte-wise (`COLLATE "C"`); `eq`/`in` compare whole JSON values, except on `date` fields,
//! where they compare instants too (the untyped evaluator compares two date strings as
//! strings; a typed field knows better); `contains` is substring on
//! strings and membership on arrays. Every leaf is wrapped in `coalesce(.., false)` so `not`
//! stays two-valued. The integration tests check the SQL against the evaluator row by row.

use std::collections::BTreeMap;

use rcp_wire::filter::date_to_epoch_ms;
use rcp_wire::filter::{FieldType, Filter, Op};
use serde_json::Value;
use tokio_postgres::types::{ToSql, Type};

/// Bind parameters of one statement, numbered `$1..` in the order they are pushed, each with
/// its SQL type so a statement runs in one round trip (`query_typed`, no prepare).
#[derive(Debug, Default)]
pub struct Params {
    values: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
}

impl Params {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value of SQL type `ty` and returns its placeholder (`$n`).
    pub fn typed<T: ToSql + Sync + Send + 'static>(&mut self, value: T, ty: Type) -> String {
        self.values.push((Box::new(value), ty));
        format!("${}", self.values.len())
    }

    /// Adds a value whose SQL type follows from its Rust type (see [`SqlType`]).
    pub fn push<T: SqlType + ToSql + Sync + Send + 'static>(&mut self, value: T) -> String {
        self.typed(value, T::TYPE)
    }

    /// The values with their types, for `client.query_typed(sql, &params.typed_refs())`.
    pub fn typed_refs(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.values.iter().map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone())).collect()
    }

    /// How many values are bound.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is bound.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// The SQL type a Rust value is bound as.
pub trait SqlType {
    /// The type.
    const TYPE: Type;
}

impl SqlType for String {
    const TYPE: Type = Type::TEXT;
}
impl SqlType for i64 {
    const TYPE: Type = Type::INT8;
}
impl SqlType for f64 {
    const TYPE: Type = Type::FLOAT8;
}
impl SqlType for Value {
    const TYPE: Type = Type::JSONB;
}
impl SqlType for Vec<i64> {
    const TYPE: Type = Type::INT8_ARRAY;
}

/// Compiles `filter` to a boolean SQL expression over the row alias `d`, pushing its values
/// onto `params`. `fields` are the advertised typed fields (§8); a field absent from it is
/// compared by the JSON type of the operand.
pub fn compile(filter: &Filter, fields: &BTreeMap<String, FieldType>, params: &mut Params) -> String {
    match filter {
        Filter::And(items) if items.is_empty() => "TRUE".to_owned(),
        Filter::Or(items) if items.is_empty() => "FALSE".to_owned(),
        Filter::And(items) => join(items, " AND ", fields, params),
        Filter::Or(items) => join(items, " OR ", fields, params),
        Filter::Not(inner) => format!("(NOT {})", compile(inner, fields, params)),
        Filter::Leaf { field, op, value } => leaf(field, *op, value, fields.get(field), params),
    }
}

fn join(items: &[Filter], sep: &str, fields: &BTreeMap<String, FieldType>, params: &mut Params) -> String {
    let parts: Vec<String> = items.iter().map(|f| compile(f, fields, params)).collect();
    format!("({})", parts.join(sep))
}

fn leaf(field: &str, op: Op, value: &Value, ty: Option<&FieldType>, params: &mut Params) -> String {
    let key = params.push(field.to_owned());
    let v = format!("(d.metadata -> {key}::text)");
    let present = format!("coalesce(jsonb_typeof({v}) <> 'null', false)");
    let is_date = matches!(ty, Some(FieldType::Date));
    let expr = match op {
        Op::Exists => return if value.as_bool().unwrap_or(true) { present } else { format!("(NOT {present})") },
        Op::Eq => eq(&v, value, is_date, params),
        Op::Ne => return format!("(NOT coalesce({}, false))", eq(&v, value, is_date, params)),
        Op::In => set(&v, value, is_date, params),
        Op::Nin => return format!("(NOT coalesce({}, false))", set(&v, value, is_date, params)),
        Op::Gt | Op::Gte | Op::Lt | Op::Lte => ordered(&v, op, value, ty, params),
        Op::Contains => contains(&v, value, params),
    };
    format!("coalesce({expr}, false)")
}

fn eq(v: &str, value: &Value, is_date: bool, params: &mut Params) -> String {
    if is_date {
        return match date_to_epoch_ms(value) {
            Some(ms) => format!("rcp_epoch_ms({v}) = {}::int8", params.push(ms)),
            None => "FALSE".to_owned(),
        };
    }
    // jsonb equality: numbers numerically, strings exactly, arrays/objects as whole values.
    format!("{v} = {}::jsonb", params.push(value.clone()))
}

fn set(v: &str, value: &Value, is_date: bool, params: &mut Params) -> String {
    let Value::Array(items) = value else { return "FALSE".to_owned() };
    if is_date {
        let ms: Vec<i64> = items.iter().filter_map(date_to_epoch_ms).collect();
        return format!("rcp_epoch_ms({v}) = ANY({}::int8[])", params.push(ms));
    }
    format!(
        "EXISTS (SELECT 1 FROM jsonb_array_elements({}::jsonb) AS e(x) WHERE e.x = {v})",
        params.push(value.clone())
    )
}

fn ordered(v: &str, op: Op, value: &Value, ty: Option<&FieldType>, params: &mut Params) -> String {
    let sym = match op {
        Op::Gt => ">",
        Op::Gte => ">=",
        Op::Lt => "<",
        _ => "<=",
    };
    let numeric = match ty {
        Some(FieldType::Int | FieldType::Float) => true,
        Some(_) => false,
        None => value.is_number(),
    };
    if matches!(ty, Some(FieldType::Date)) {
        return match date_to_epoch_ms(value) {
            Some(ms) => format!("rcp_epoch_ms({v}) {sym} {}::int8", params.push(ms)),
            None => "FALSE".to_owned(),
        };
    }
    if numeric {
        return match value.as_f64() {
            Some(x) => format!(
                "(CASE WHEN jsonb_typeof({v}) = 'number' THEN ({v})::float8 END) {sym} {}::float8",
                params.push(x)
            ),
            None => "FALSE".to_owned(),
        };
    }
    match value.as_str() {
        Some(s) => format!(
            "(CASE WHEN jsonb_typeof({v}) = 'string' THEN ({v} #>> '{{}}') END) COLLATE \"C\" {sym} {}::text",
            params.push(s.to_owned())
        ),
        None => "FALSE".to_owned(),
    }
}

fn contains(v: &str, value: &Value, params: &mut Params) -> String {
    let member = params.push(value.clone());
    let substring = match value.as_str() {
        Some(s) => format!("strpos({v} #>> '{{}}', {}::text) > 0", params.push(s.to_owned())),
        None => "FALSE".to_owned(),
    };
    format!(
        "(CASE jsonb_typeof({v}) WHEN 'string' THEN {substring} \
         WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements({v}) AS e(x) WHERE e.x = {member}::jsonb) \
         ELSE FALSE END)"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_and_field_names_are_bound_never_spliced() {
        let fields = BTreeMap::from([("year".to_owned(), FieldType::Int)]);
        let hostile = "x'); DROP TABLE rcp_documents; --";
        let f = Filter::eq(hostile, hostile) & Filter::gt("year", 2000) & !Filter::is_in("lang", ["en", hostile]);
        let mut params = Params::new();
        let sql = compile(&f, &fields, &mut params);
        assert!(!sql.contains("DROP"), "{sql}");
        assert_eq!(params.len(), 6, "{sql}");
        assert!(sql.contains("::float8"), "int fields compare numerically: {sql}");
    }

    #[test]
    fn empty_combinators_and_exists() {
        let mut p = Params::new();
        let fields = BTreeMap::new();
        assert_eq!(compile(&Filter::And(vec![]), &fields, &mut p), "TRUE");
        assert_eq!(compile(&Filter::Or(vec![]), &fields, &mut p), "FALSE");
        let absent = compile(&Filter::exists("a", false), &fields, &mut p);
        assert!(absent.starts_with("(NOT coalesce(jsonb_typeof"), "{absent}");
        let dates = BTreeMap::from([("at".to_owned(), FieldType::Date)]);
        let sql = compile(&Filter::leaf("at", Op::Gte, json!("2020-01-01")), &dates, &mut p);
        assert!(sql.contains("rcp_epoch_ms"), "{sql}");
        // An operand that is no date never matches (rather than erroring in SQL).
        let sql = compile(&Filter::leaf("at", Op::Gte, json!("soon")), &dates, &mut p);
        assert_eq!(sql, "coalesce(FALSE, false)");
    }
}
