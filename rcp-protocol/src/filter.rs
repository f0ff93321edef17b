//! Metadata filtering (§8): the advertised `filter` capability, a typed filter tree with a
//! builder, the validator servers run before compiling a filter to their backend, and a
//! reference evaluator for in-memory engines.
//!
//! A filter is a boolean tree: `{"and":[...]}`, `{"or":[...]}`, `{"not":{...}}` or a leaf
//! `{"field":..,"op":..,"value":..}`. [`validate`] checks a raw wire filter against the
//! advertised [`FilterCapability`] and returns a normalised [`Filter`] or a precise error:
//! `-32602` with `error.data.field` set to the offending path (`filter.and[1].value`), or
//! `-32005` for an operator outside the advertised `filter.operators`.
//!
//! ```
//! use rcp_protocol::filter::{Filter, FilterCapability, FieldType, validate};
//!
//! let f = Filter::eq("lang", "en") & (Filter::gte("year", 2023) | Filter::is_in("tag", ["news", "blog"]));
//! let cap = FilterCapability::typed([
//!     ("lang", FieldType::Keyword),
//!     ("year", FieldType::Int),
//!     ("tag", FieldType::Keyword),
//! ]);
//! assert_eq!(validate(&f.to_value(), &cap).unwrap(), f);
//! ```

#![allow(clippy::result_large_err, reason = "RcpError is the protocol error type this API is specified to return")]

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{BitAnd, BitOr, Not};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::Meta;
use crate::error::{ErrorData, RcpError};
use crate::message::json_type;

/// The deepest filter tree [`validate`] accepts (§8, §15.5): every node on the path from the
/// root to a leaf counts, so 31 nested `not`s around a leaf is the limit.
pub const MAX_DEPTH: usize = 32;

/// The path prefix of filter errors: `filter` is `retrieve.filter` (§7.7, §8).
pub const ROOT_PATH: &str = "filter";

/// The type of a filterable field, as advertised in `filter.fields` (§8).
///
/// Unknown type names are kept in [`FieldType::Other`] so a newer server's advertisement
/// still deserialises (§6.2); fields of an unknown type get shape checks only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// `"keyword"`: exact-match string.
    Keyword,
    /// `"text"`: tokenised string.
    Text,
    /// `"int"`: integer number.
    Int,
    /// `"float"`: number.
    Float,
    /// `"bool"`: boolean.
    Bool,
    /// `"date"`: a §4.6 timestamp (RFC 3339 string or integer epoch milliseconds).
    Date,
    /// `"geo"`: a geographic point.
    Geo,
    /// Any other type name.
    Other(String),
}

impl FieldType {
    /// Parses a type name (§8); unknown names become [`FieldType::Other`].
    pub fn parse(name: &str) -> Self {
        match name {
            "keyword" => FieldType::Keyword,
            "text" => FieldType::Text,
            "int" => FieldType::Int,
            "float" => FieldType::Float,
            "bool" => FieldType::Bool,
            "date" => FieldType::Date,
            "geo" => FieldType::Geo,
            other => FieldType::Other(other.to_string()),
        }
    }

    /// The wire name (§8), e.g. `"keyword"`.
    pub fn as_str(&self) -> &str {
        match self {
            FieldType::Keyword => "keyword",
            FieldType::Text => "text",
            FieldType::Int => "int",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
            FieldType::Date => "date",
            FieldType::Geo => "geo",
            FieldType::Other(s) => s,
        }
    }

    /// Whether the ordered operators `gt`/`gte`/`lt`/`lte` apply (§8: `int`/`float`/`date`).
    pub fn is_ordered(&self) -> bool {
        matches!(self, FieldType::Int | FieldType::Float | FieldType::Date)
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FieldType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FieldType {
    /// Accepts a type name; for forward compatibility also an object `{"type": name, ...}`,
    /// and keeps anything else as [`FieldType::Other`] holding its JSON text.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => FieldType::parse(&s),
            Value::Object(o) => match o.get("type") {
                Some(Value::String(s)) => FieldType::parse(s),
                _ => FieldType::Other(Value::Object(o).to_string()),
            },
            other => FieldType::Other(other.to_string()),
        })
    }
}

/// `filter.fields` (§6, §8): a list of field names, or an object mapping name → type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FilterFields {
    /// Untyped: only value-shape checks apply.
    Names(Vec<String>),
    /// Typed (RECOMMENDED by §8): values are checked against each field's type.
    Typed(BTreeMap<String, FieldType>),
}

impl Default for FilterFields {
    /// No filterable fields.
    fn default() -> Self {
        FilterFields::Names(Vec::new())
    }
}

impl FilterFields {
    /// `None` if `name` is not advertised; `Some(None)` if advertised without a type;
    /// `Some(Some(t))` if advertised with type `t` (§8).
    pub fn get(&self, name: &str) -> Option<Option<&FieldType>> {
        match self {
            FilterFields::Names(names) => names.iter().any(|n| n == name).then_some(None),
            FilterFields::Typed(map) => map.get(name).map(Some),
        }
    }

    /// The advertised field names (§8).
    pub fn names(&self) -> Vec<&str> {
        match self {
            FilterFields::Names(names) => names.iter().map(String::as_str).collect(),
            FilterFields::Typed(map) => map.keys().map(String::as_str).collect(),
        }
    }
}

/// The `filter` capability (§6, §8): `{ fields: [str]|object, operators?: [str] }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterCapability {
    /// The filterable fields, optionally typed.
    #[serde(default, deserialize_with = "crate::nullable")]
    pub fields: FilterFields,
    /// The allowed operators; absent means all ten of §8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<Vec<String>>,
    /// Unknown keys, kept for forward compatibility (§6).
    #[serde(flatten)]
    pub extra: Meta,
}

impl FilterCapability {
    /// A capability over these fields, allowing every operator (§8).
    pub fn new(fields: FilterFields) -> Self {
        Self { fields, operators: None, extra: Meta::new() }
    }

    /// A capability over typed fields (§8), allowing every operator.
    pub fn typed<I, K>(fields: I) -> Self
    where
        I: IntoIterator<Item = (K, FieldType)>,
        K: Into<String>,
    {
        Self::new(FilterFields::Typed(fields.into_iter().map(|(k, t)| (k.into(), t)).collect()))
    }

    /// A capability over untyped field names (§8), allowing every operator.
    pub fn untyped<I, K>(names: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        Self::new(FilterFields::Names(names.into_iter().map(Into::into).collect()))
    }

    /// Restricts the advertised operators (§8 `filter.operators`).
    pub fn with_operators<I, S>(mut self, operators: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.operators = Some(operators.into_iter().map(Into::into).collect());
        self
    }

    /// See [`FilterFields::get`] (§8).
    pub fn field_type(&self, name: &str) -> Option<Option<&FieldType>> {
        self.fields.get(name)
    }

    /// Whether `op` is advertised (§8); every operator is when `operators` is absent.
    pub fn allows_op(&self, op: Op) -> bool {
        match &self.operators {
            None => true,
            Some(ops) => ops.iter().any(|o| o == op.as_str()),
        }
    }

    /// The advertised operator names (§8): `operators` as given, or all ten when absent.
    pub fn advertised_operators(&self) -> Vec<&str> {
        match &self.operators {
            None => Op::ALL.iter().map(|o| o.as_str()).collect(),
            Some(ops) => ops.iter().map(String::as_str).collect(),
        }
    }

    /// Validates a raw wire filter against this capability; see [`validate`] (§8).
    pub fn validate(&self, filter: &Value) -> Result<Filter, RcpError> {
        validate(filter, self)
    }
}

/// A filter operator (§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `eq`: equality.
    Eq,
    /// `ne`: inequality.
    Ne,
    /// `gt`: greater than.
    Gt,
    /// `gte`: greater than or equal.
    Gte,
    /// `lt`: less than.
    Lt,
    /// `lte`: less than or equal.
    Lte,
    /// `in`: set membership.
    In,
    /// `nin`: set exclusion.
    Nin,
    /// `contains`: substring (text) or element membership (array-valued field).
    Contains,
    /// `exists`: field present (`true`) or absent (`false`).
    Exists,
}

impl Op {
    /// The ten operators of §8, in spec order.
    pub const ALL: [Op; 10] =
        [Op::Eq, Op::Ne, Op::Gt, Op::Gte, Op::Lt, Op::Lte, Op::In, Op::Nin, Op::Contains, Op::Exists];

    /// The wire name (§8), e.g. `"gte"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::Gt => "gt",
            Op::Gte => "gte",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::In => "in",
            Op::Nin => "nin",
            Op::Contains => "contains",
            Op::Exists => "exists",
        }
    }

    /// Parses a wire name (§8; case-sensitive per §4.6); `None` if it is not an operator.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether this is an ordered comparison (`gt`, `gte`, `lt`, `lte`; §8).
    pub fn is_ordered(self) -> bool {
        matches!(self, Op::Gt | Op::Gte | Op::Lt | Op::Lte)
    }

    /// Whether this takes an array of scalars (`in`, `nin`; §8).
    pub fn is_set(self) -> bool {
        matches!(self, Op::In | Op::Nin)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metadata filter tree (§8). Serialises to the exact wire JSON of §8; deserialising
/// checks structure and value shapes but not a capability (use [`validate`] for that).
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `{"and": [...]}`: every child matches. Must be non-empty on the wire.
    And(Vec<Filter>),
    /// `{"or": [...]}`: some child matches. Must be non-empty on the wire.
    Or(Vec<Filter>),
    /// `{"not": {...}}`: the child does not match.
    Not(Box<Filter>),
    /// `{"field": .., "op": .., "value": ..}`: a comparison on one metadata field.
    Leaf {
        /// The metadata field name.
        field: String,
        /// The operator.
        op: Op,
        /// The operand; a boolean for `exists`, an array for `in`/`nin`.
        value: Value,
    },
}

impl Filter {
    /// A leaf `{"field", "op", "value"}` (§8).
    pub fn leaf(field: impl Into<String>, op: Op, value: impl Into<Value>) -> Self {
        Filter::Leaf { field: field.into(), op, value: value.into() }
    }

    /// `eq` (§8).
    pub fn eq(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Eq, value)
    }

    /// `ne` (§8).
    pub fn ne(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Ne, value)
    }

    /// `gt` (§8).
    pub fn gt(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Gt, value)
    }

    /// `gte` (§8).
    pub fn gte(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Gte, value)
    }

    /// `lt` (§8).
    pub fn lt(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Lt, value)
    }

    /// `lte` (§8).
    pub fn lte(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Lte, value)
    }

    /// `in` (§8): the field's value is one of `values`.
    pub fn is_in<I, V>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self::leaf(field, Op::In, Value::Array(values.into_iter().map(Into::into).collect()))
    }

    /// `in` (§8); an alias of [`Filter::is_in`] matching the reference SDKs' `in_`.
    pub fn in_<I, V>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self::is_in(field, values)
    }

    /// `nin` (§8): the field's value is none of `values`.
    pub fn nin<I, V>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self::leaf(field, Op::Nin, Value::Array(values.into_iter().map(Into::into).collect()))
    }

    /// `contains` (§8): substring of a text field, or element of an array-valued field.
    pub fn contains(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::leaf(field, Op::Contains, value)
    }

    /// `exists` (§8): the field is present (`true`) or absent (`false`).
    pub fn exists(field: impl Into<String>, present: bool) -> Self {
        Self::leaf(field, Op::Exists, present)
    }

    /// `and` over `filters` (§8). An empty `and` is invalid on the wire.
    pub fn all(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::And(filters.into_iter().collect())
    }

    /// `or` over `filters` (§8). An empty `or` is invalid on the wire.
    pub fn any(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter::Or(filters.into_iter().collect())
    }

    /// `not` (§8); also available as `!filter`.
    #[allow(clippy::should_implement_trait, reason = "builder name of §8; `!filter` uses `std::ops::Not`")]
    pub fn not(filter: Filter) -> Self {
        Filter::Not(Box::new(filter))
    }

    /// The wire JSON of §8.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        match self {
            Filter::And(items) => {
                m.insert("and".into(), Value::Array(items.iter().map(Filter::to_value).collect()));
            }
            Filter::Or(items) => {
                m.insert("or".into(), Value::Array(items.iter().map(Filter::to_value).collect()));
            }
            Filter::Not(inner) => {
                m.insert("not".into(), inner.to_value());
            }
            Filter::Leaf { field, op, value } => {
                m.insert("field".into(), Value::String(field.clone()));
                m.insert("op".into(), Value::String(op.as_str().into()));
                m.insert("value".into(), value.clone());
            }
        }
        Value::Object(m)
    }

    /// Parses a wire filter checking structure and value shapes only (§8): any field name
    /// and operator are accepted, as if every field were advertised untyped.
    pub fn parse(value: &Value) -> Result<Filter, RcpError> {
        Validator { cap: None }.node(value, ROOT_PATH, 1)
    }

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

impl BitAnd for Filter {
    type Output = Filter;

    /// `a & b` is `and` (§8), flattening nested `and`s.
    fn bitand(self, rhs: Filter) -> Filter {
        let mut items = match self {
            Filter::And(items) => items,
            other => vec![other],
        };
        match rhs {
            Filter::And(more) => items.extend(more),
            other => items.push(other),
        }
        Filter::And(items)
    }
}

impl BitOr for Filter {
    type Output = Filter;

    /// `a | b` is `or` (§8), flattening nested `or`s.
    fn bitor(self, rhs: Filter) -> Filter {
        let mut items = match self {
            Filter::Or(items) => items,
            other => vec![other],
        };
        match rhs {
            Filter::Or(more) => items.extend(more),
            other => items.push(other),
        }
        Filter::Or(items)
    }
}

impl Not for Filter {
    type Output = Filter;

    /// `!a` is `not` (§8).
    fn not(self) -> Filter {
        Filter::Not(Box::new(self))
    }
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Filter::parse(&v).map_err(|e| serde::de::Error::custom(e.message))
    }
}

impl From<Filter> for Value {
    fn from(f: Filter) -> Value {
        f.to_value()
    }
}

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

/// Converts a §4.6 timestamp to milliseconds since the Unix epoch: an RFC 3339 / ISO 8601
/// string (`YYYY-MM-DD`, optionally `THH:MM[:SS[.fff]]` and `Z`/`±HH:MM`; no offset means
/// UTC) or an integer number of milliseconds. `None` for anything else.
pub fn date_to_epoch_ms(value: &Value) -> Option<i64> {
    match value {
        Value::String(s) => parse_rfc3339_ms(s),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else if n.is_u64() {
                None // beyond i64: not a plausible timestamp
            } else {
                let f = n.as_f64()?;
                (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
            }
        }
        _ => None,
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

const MS_PER_DAY: i64 = 86_400_000;

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        _ => 28,
    }
}

/// Leap years in `[0, y)` minus a constant: differences give leap years between two years
/// (proleptic Gregorian; floor division keeps year 0 and before correct).
fn leaps_before(y: i64) -> i64 {
    let p = y - 1;
    p.div_euclid(4) - p.div_euclid(100) + p.div_euclid(400)
}

fn days_since_epoch(y: i64, m: u32, d: u32) -> i64 {
    const BEFORE_MONTH: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let mut days = 365 * (y - 1970) + leaps_before(y) - leaps_before(1970);
    days += BEFORE_MONTH[(m as usize - 1) % 12];
    if m > 2 && is_leap(y) {
        days += 1;
    }
    days + i64::from(d) - 1
}

/// A cursor over the ASCII bytes of a timestamp.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<u32> {
        let s = self.b.get(self.i..self.i + n)?;
        let mut v = 0u32;
        for &c in s {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(c - b'0');
        }
        self.i += n;
        Some(v)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn done(&self) -> bool {
        self.i == self.b.len()
    }
}

/// Parses `YYYY-MM-DD[(T|t| )HH:MM[:SS[(.|,)fraction]][Z|z|±HH[:]MM]]` to epoch ms.
fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let mut c = Cursor { b: s.as_bytes(), i: 0 };
    let year = i64::from(c.digits(4)?);
    if !c.eat(b'-') {
        return None;
    }
    let month = c.digits(2)?;
    if !c.eat(b'-') {
        return None;
    }
    let day = c.digits(2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_since_epoch(year, month, day) * MS_PER_DAY;
    if c.done() {
        return Some(ms);
    }
    if !(c.eat(b'T') || c.eat(b't') || c.eat(b' ')) {
        return None;
    }
    let hour = c.digits(2)?;
    if !c.eat(b':') {
        return None;
    }
    let minute = c.digits(2)?;
    let mut second = 0;
    let mut millis = 0;
    if c.eat(b':') {
        second = c.digits(2)?;
        if c.eat(b'.') || c.eat(b',') {
            let start = c.i;
            let mut scale = 100;
            while let Some(d) = c.peek().filter(u8::is_ascii_digit) {
                millis += u32::from(d - b'0') * scale;
                scale /= 10;
                c.i += 1;
            }
            if c.i == start {
                return None;
            }
        }
    }
    // 60 admits a leap second.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    ms += ((i64::from(hour) * 60 + i64::from(minute)) * 60 + i64::from(second)) * 1000 + i64::from(millis);
    match c.peek() {
        Some(b'Z' | b'z') => c.i += 1,
        Some(sign @ (b'+' | b'-')) => {
            c.i += 1;
            let oh = c.digits(2)?;
            c.eat(b':');
            let om = c.digits(2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let offset = (i64::from(oh) * 60 + i64::from(om)) * 60_000;
            ms += if sign == b'+' { -offset } else { offset };
        }
        _ => {}
    }
    c.done().then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use serde_json::json;

    fn cap() -> FilterCapability {
        FilterCapability::typed([
            ("lang", FieldType::Keyword),
            ("title", FieldType::Text),
            ("year", FieldType::Int),
            ("rating", FieldType::Float),
            ("draft", FieldType::Bool),
            ("published", FieldType::Date),
            ("loc", FieldType::Geo),
            ("tag", FieldType::Keyword),
            ("future", FieldType::Other("vector".into())),
        ])
    }

    #[track_caller]
    fn err_at(v: Value, cap: &FilterCapability, field: &str) -> RcpError {
        let e = validate(&v, cap).expect_err("expected the filter to be rejected");
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
        assert_eq!(e.field(), Some(field), "{e:?}");
        e
    }

    #[track_caller]
    fn ok(v: Value, cap: &FilterCapability) -> Filter {
        match validate(&v, cap) {
            Ok(f) => f,
            Err(e) => panic!("expected {v} to validate, got {e:?}"),
        }
    }

    fn leaf(field: &str, op: &str, value: Value) -> Value {
        json!({"field": field, "op": op, "value": value})
    }

    // ---- capability & types -------------------------------------------------------------

    #[test]
    fn capability_deserialises_both_field_shapes() {
        let c: FilterCapability = serde_json::from_value(json!({"fields": ["a", "b"], "x-vendor": 1})).unwrap();
        assert_eq!(c.fields, FilterFields::Names(vec!["a".into(), "b".into()]));
        assert_eq!(c.field_type("a"), Some(None));
        assert_eq!(c.field_type("z"), None);
        assert_eq!(c.operators, None);
        assert_eq!(c.extra["x-vendor"], 1);
        assert_eq!(c.advertised_operators().len(), 10);
        assert!(Op::ALL.into_iter().all(|o| c.allows_op(o)));

        let c: FilterCapability = serde_json::from_value(json!({
            "fields": {
                "lang": "keyword", "year": "int", "when": "date",
                "shape": "polygon", "obj": {"type": "float"}
            },
            "operators": ["eq", "in", "x-near"]
        }))
        .unwrap();
        assert_eq!(c.field_type("lang"), Some(Some(&FieldType::Keyword)));
        assert_eq!(c.field_type("shape"), Some(Some(&FieldType::Other("polygon".into()))));
        assert_eq!(c.field_type("obj"), Some(Some(&FieldType::Float)));
        assert!(c.allows_op(Op::Eq) && c.allows_op(Op::In) && !c.allows_op(Op::Gt));
        assert_eq!(c.advertised_operators(), ["eq", "in", "x-near"]);

        // Round trip: camelCase, None skipped, extra flattened.
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["fields"]["lang"], "keyword");
        assert_eq!(v["fields"]["shape"], "polygon");
        let back: FilterCapability = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
        let v = serde_json::to_value(FilterCapability::untyped(["a"])).unwrap();
        assert_eq!(v, json!({"fields": ["a"]}));

        // Missing / null fields mean "none".
        let c: FilterCapability = serde_json::from_value(json!({"fields": null, "operators": null})).unwrap();
        assert_eq!(c.fields.names(), Vec::<&str>::new());
        assert_eq!(c.operators, None);
        let c: FilterCapability = serde_json::from_value(json!({})).unwrap();
        assert_eq!(c.fields, FilterFields::default());
    }

    #[test]
    fn field_type_and_op_names_round_trip() {
        for t in ["keyword", "text", "int", "float", "bool", "date", "geo", "whatever"] {
            let ft = FieldType::parse(t);
            assert_eq!(ft.as_str(), t);
            assert_eq!(serde_json::to_value(&ft).unwrap(), json!(t));
            assert_eq!(serde_json::from_value::<FieldType>(json!(t)).unwrap(), ft);
        }
        assert_eq!(FieldType::parse("Keyword"), FieldType::Other("Keyword".into()));
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()), Some(op));
            assert_eq!(serde_json::to_value(op).unwrap(), json!(op.as_str()));
            assert_eq!(serde_json::from_value::<Op>(json!(op.as_str())).unwrap(), op);
        }
        assert_eq!(Op::parse("EQ"), None);
        assert_eq!(Op::parse("like"), None);
        assert!(Op::Gte.is_ordered() && !Op::Eq.is_ordered());
        assert!(Op::Nin.is_set() && !Op::Contains.is_set());
    }

    // ---- builder ------------------------------------------------------------------------

    #[test]
    fn builder_produces_the_spec_example() {
        let f = Filter::eq("lang", "en") & (Filter::gte("year", 2023) | Filter::is_in("tag", ["news", "blog"]));
        let expected = json!({ "and": [
            { "field": "lang", "op": "eq", "value": "en" },
            { "or": [
                { "field": "year", "op": "gte", "value": 2023 },
                { "field": "tag", "op": "in", "value": ["news", "blog"] } ] } ] });
        assert_eq!(f.to_value(), expected);
        assert_eq!(serde_json::to_value(&f).unwrap(), expected);
        assert_eq!(serde_json::from_value::<Filter>(expected.clone()).unwrap(), f);
        assert_eq!(ok(expected, &cap()), f);
    }

    #[test]
    fn builder_covers_every_operator() {
        let f = Filter::all([
            Filter::eq("lang", "en"),
            Filter::ne("draft", true),
            Filter::gt("rating", 2.5),
            Filter::gte("year", 2020),
            Filter::lt("published", "2024-01-01"),
            Filter::lte("published", 1_700_000_000_000i64),
            Filter::in_("year", [2020, 2021]),
            Filter::nin("lang", ["de", "fr"]),
            Filter::contains("title", "rust"),
            Filter::exists("tag", false),
            Filter::not(Filter::any([Filter::eq("tag", "a"), Filter::eq("tag", "b")])),
            !Filter::exists("loc", true),
        ]);
        let expected = json!({"and": [
            {"field": "lang", "op": "eq", "value": "en"},
            {"field": "draft", "op": "ne", "value": true},
            {"field": "rating", "op": "gt", "value": 2.5},
            {"field": "year", "op": "gte", "value": 2020},
            {"field": "published", "op": "lt", "value": "2024-01-01"},
            {"field": "published", "op": "lte", "value": 1_700_000_000_000i64},
            {"field": "year", "op": "in", "value": [2020, 2021]},
            {"field": "lang", "op": "nin", "value": ["de", "fr"]},
            {"field": "title", "op": "contains", "value": "rust"},
            {"field": "tag", "op": "exists", "value": false},
            {"not": {"or": [
                {"field": "tag", "op": "eq", "value": "a"},
                {"field": "tag", "op": "eq", "value": "b"}]}},
            {"not": {"field": "loc", "op": "exists", "value": true}}
        ]});
        assert_eq!(f.to_value(), expected);
        assert_eq!(ok(f.to_value(), &cap()), f);
        assert_eq!(Value::from(f.clone()), expected);
    }

    #[test]
    fn operator_sugar_flattens() {
        let (a, b, c) = (Filter::eq("x", 1), Filter::eq("y", 2), Filter::eq("z", 3));
        assert_eq!(a.clone() & b.clone() & c.clone(), Filter::all([a.clone(), b.clone(), c.clone()]));
        assert_eq!(a.clone() | (b.clone() | c.clone()), Filter::any([a.clone(), b.clone(), c.clone()]));
        assert_eq!((a.clone() & b.clone()) | c.clone(), Filter::any([Filter::all([a.clone(), b.clone()]), c.clone()]));
        assert_eq!(!a.clone(), Filter::not(a.clone()));
        assert_eq!((!a.clone()).to_value(), json!({"not": {"field": "x", "op": "eq", "value": 1}}));
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

    // ---- dates --------------------------------------------------------------------------

    #[test]
    fn date_parsing() {
        let d = |s: &str| date_to_epoch_ms(&json!(s));
        assert_eq!(d("1970-01-01"), Some(0));
        assert_eq!(d("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(d("2017-06-12T00:00:00Z"), Some(1_497_225_600_000));
        assert_eq!(d("2017-06-12"), Some(1_497_225_600_000));
        assert_eq!(d("2000-02-29T12:34:56.789Z"), Some(951_827_696_789));
        assert_eq!(d("2000-02-29t12:34:56,7z"), Some(951_827_696_700));
        assert_eq!(d("2000-02-29 12:34"), Some(951_827_640_000));
        assert_eq!(d("2000-02-29T12:34:56.123456789Z"), Some(951_827_696_123));
        assert_eq!(d("1969-12-31"), Some(-86_400_000));
        assert_eq!(d("0000-01-01"), Some(-62_167_219_200_000));
        assert_eq!(d("9999-12-31T23:59:59Z"), Some(253_402_300_799_000));
        assert_eq!(d("2024-03-01T00:00:00+01:00"), d("2024-02-29T23:00:00Z"));
        assert_eq!(d("2024-03-01T00:00:00-0530"), d("2024-03-01T05:30:00Z"));
        assert_eq!(d("2016-12-31T23:59:60Z"), Some(1_483_228_800_000));
        assert_eq!(date_to_epoch_ms(&json!(1_497_225_600_000i64)), Some(1_497_225_600_000));
        assert_eq!(date_to_epoch_ms(&json!(-5)), Some(-5));
        assert_eq!(date_to_epoch_ms(&json!(1.0e3)), Some(1000));
        for bad in [
            "",
            "2017",
            "2017-06",
            "2017-6-12",
            "17-06-12",
            "2017-13-01",
            "2017-00-10",
            "2017-02-29",
            "1900-02-29",
            "2017-04-31",
            "2017-06-00",
            "2017-06-12T",
            "2017-06-12T24:00",
            "2017-06-12T12",
            "2017-06-12T12:60",
            "2017-06-12T12:00:61",
            "2017-06-12T12:00:00.",
            "2017-06-12T12:00:00+25:00",
            "2017-06-12T12:00:00+01",
            "2017-06-12X12:00",
            "2017-06-12T12:00Zjunk",
            "２０１７-06-12",
            "yesterday",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
        assert_eq!(date_to_epoch_ms(&json!(1.5)), None);
        assert_eq!(date_to_epoch_ms(&json!(u64::MAX)), None);
        assert_eq!(date_to_epoch_ms(&json!(true)), None);
        assert_eq!(date_to_epoch_ms(&json!(null)), None);
    }

    // ---- matches ------------------------------------------------------------------------

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
