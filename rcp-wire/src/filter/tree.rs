//! The filter tree (§8): the [`Filter`] AST, its builder and operator sugar, and its exact
//! wire JSON.

use std::ops::{BitAnd, BitOr, Not};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::Op;

/// A metadata filter tree (§8). Serialises to the exact wire JSON of §8; deserialising
/// checks structure and value shapes but not a capability (use [`validate`](super::validate) for that).
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::filter::fixtures::{cap, ok};

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
}
