//! The advertised `filter` capability (§6, §8): filterable fields, their types and the
//! allowed operators.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{Filter, validate};
use crate::Meta;
use crate::error::RcpError;

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

    /// Advertises every operator of §8 ([`Op::ALL`]).
    pub fn with_all_operators(self) -> Self {
        self.with_operators(Op::ALL.iter().map(|o| o.as_str()))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
