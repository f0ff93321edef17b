//! The one ingestion rule every engine applies to a document's metadata (§8 field types,
//! §7.10 writes): a value of a declared field must have the field's type. A value that does not
//! is refused, never stored coerced or as a string. `rcp-bm25`, `rcp-dense` and `rcp-pg` call
//! it from their `index` commands and their `index/add` handlers, so every path accepts and
//! refuses the same documents.

use std::collections::BTreeMap;

use rcp_wire::Meta;
use rcp_wire::filter::{FieldType, date_to_epoch_ms};
use serde_json::Value;

/// A metadata value of a declared field, in the field's type.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum TypedValue<'a> {
    /// `keyword` or `text`.
    Str(&'a str),
    /// `int`.
    Int(i64),
    /// `float`.
    Float(f64),
    /// `bool`.
    Bool(bool),
    /// `date`, as epoch milliseconds (§4.6).
    Date(i64),
    /// `geo` or a type this rule does not know: accepted as sent.
    Unchecked(&'a Value),
}

/// One metadata value that does not fit its declared field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field '{name}' is {ty}: expected {expected}, got {got}")]
pub struct FieldValueError {
    /// Where the value sits in the document: `meta.year`, or `meta.tags[1]` in an array.
    pub field: String,
    /// The declared field's name.
    pub name: String,
    /// The declared type.
    pub ty: FieldType,
    /// What the type accepts.
    pub expected: &'static str,
    /// The value sent.
    pub got: Value,
}

impl FieldValueError {
    /// The reason alone (without the path): what `rcpctl index add` prints after `FIELD:`.
    pub fn reason(&self) -> String {
        self.to_string()
    }
}

/// `v` as a value of a field of type `ty`, or what the type expects. An `int` accepts an
/// integer, or a float with no fraction below 9e15; a `date` an RFC 3339 string or integer
/// epoch milliseconds; `keyword` and `text` a string.
pub fn typed_value<'a>(ty: &FieldType, v: &'a Value) -> Result<TypedValue<'a>, &'static str> {
    match ty {
        FieldType::Int => v
            .as_i64()
            .or_else(|| v.as_f64().filter(|x| x.fract() == 0.0 && x.abs() < 9.0e15).map(|x| x as i64))
            .map(TypedValue::Int)
            .ok_or("an integer"),
        FieldType::Float => v.as_f64().map(TypedValue::Float).ok_or("a number"),
        FieldType::Bool => v.as_bool().map(TypedValue::Bool).ok_or("a boolean"),
        FieldType::Date => {
            date_to_epoch_ms(v).map(TypedValue::Date).ok_or("an RFC 3339 date or integer epoch milliseconds")
        }
        FieldType::Keyword | FieldType::Text => v.as_str().map(TypedValue::Str).ok_or("a string"),
        _ => Ok(TypedValue::Unchecked(v)),
    }
}

/// The typed values of the declared field `name` in `meta` (each item of an array, in order;
/// nothing when the key is absent or null), or the first that does not fit.
pub fn field_values<'a>(meta: &'a Meta, name: &str, ty: &FieldType) -> Result<Vec<TypedValue<'a>>, FieldValueError> {
    let bad = |field: String, expected, got: &Value| FieldValueError {
        field,
        name: name.to_owned(),
        ty: ty.clone(),
        expected,
        got: got.clone(),
    };
    match meta.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| typed_value(ty, item).map_err(|e| bad(format!("meta.{name}[{i}]"), e, item)))
            .collect(),
        Some(v) => typed_value(ty, v).map(|t| vec![t]).map_err(|e| bad(format!("meta.{name}"), e, v)),
    }
}

/// Checks every declared field of `fields` present in `meta`; the first value that does not
/// fit its type is the error.
pub fn check_meta(meta: &Meta, fields: &BTreeMap<String, FieldType>) -> Result<(), FieldValueError> {
    for (name, ty) in fields {
        field_values(meta, name, ty)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_of_the_wrong_type_is_refused_naming_its_path() {
        let fields: BTreeMap<String, FieldType> =
            [("year".to_owned(), FieldType::Int), ("tags".to_owned(), FieldType::Keyword)].into();
        let meta = |v: Value| v.as_object().cloned().unwrap();
        assert!(check_meta(&meta(json!({"year": 1999, "tags": ["a", "b"], "other": "x"})), &fields).is_ok());
        assert!(check_meta(&meta(json!({"year": 1999.0, "tags": null})), &fields).is_ok());
        let e = check_meta(&meta(json!({"year": "nineteen"})), &fields).unwrap_err();
        assert_eq!(e.field, "meta.year");
        assert_eq!(e.reason(), "field 'year' is int: expected an integer, got \"nineteen\"");
        let e = check_meta(&meta(json!({"year": 1, "tags": ["a", 2]})), &fields).unwrap_err();
        assert_eq!(e.field, "meta.tags[1]");
        assert_eq!(typed_value(&FieldType::Int, &json!(1.5)), Err("an integer"));
        assert_eq!(
            typed_value(&FieldType::Date, &json!("2020-01-01T00:00:00Z")),
            Ok(TypedValue::Date(1_577_836_800_000))
        );
    }
}
