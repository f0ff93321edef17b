//! Typed filter fields (§8) of a corpus: declared with `--field NAME:TYPE` or inferred from
//! the metadata, and the passage text engines embed for a document.

use std::collections::BTreeMap;

use rcp_wire::filter::FieldType;
use serde_json::Value;

use crate::CorpusDoc;

/// Parses a `--field NAME:TYPE` flag (§8 field types).
pub fn parse_field(s: &str) -> Result<(String, FieldType), FieldSpecError> {
    let (name, ty) = s.split_once(':').ok_or_else(|| FieldSpecError::NoType(s.to_owned()))?;
    let ty = FieldType::parse(ty.trim());
    if matches!(ty, FieldType::Other(_)) || name.trim().is_empty() {
        return Err(FieldSpecError::BadType(s.to_owned()));
    }
    Ok((name.trim().to_owned(), ty))
}

/// A `--field` flag that is not `NAME:TYPE` with a §8 field type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldSpecError {
    /// No `:` separates name and type.
    #[error("'{0}': expected NAME:TYPE, e.g. year:int")]
    NoType(String),
    /// The name is empty or the type is not one of §8.
    #[error("'{0}': TYPE must be keyword, text, int, float, bool, date or geo")]
    BadType(String),
}

/// Infers typed filter fields (§8) from corpus metadata: a field whose values are all strings
/// is `keyword`, all integers `int`, all numbers `float`, all booleans `bool`; fields of mixed
/// or structured values, and `title`, are not filterable unless declared with `--field`.
pub fn infer_fields<'a>(docs: impl IntoIterator<Item = &'a CorpusDoc>) -> BTreeMap<String, FieldType> {
    let mut seen: BTreeMap<String, Option<FieldType>> = BTreeMap::new();
    for doc in docs {
        for (k, v) in &doc.meta {
            let t = match v {
                Value::String(_) => Some(FieldType::Keyword),
                Value::Number(n) if n.is_i64() || n.is_u64() => Some(FieldType::Int),
                Value::Number(_) => Some(FieldType::Float),
                Value::Bool(_) => Some(FieldType::Bool),
                _ => None,
            };
            let merged = match (seen.get(k), t) {
                (None, t) => t,
                (Some(None), _) | (_, None) => None,
                (Some(Some(a)), Some(b)) if *a == b => Some(b),
                (Some(Some(FieldType::Int | FieldType::Float)), Some(FieldType::Int | FieldType::Float)) => {
                    Some(FieldType::Float)
                }
                _ => None,
            };
            seen.insert(k.clone(), merged);
        }
    }
    seen.into_iter().filter(|(k, _)| k != "title").filter_map(|(k, t)| t.map(|t| (k, t))).collect()
}

/// The text embedded for a corpus document: `title` and body, as BEIR does.
pub fn passage(doc: &CorpusDoc) -> String {
    match &doc.title {
        Some(t) if !t.is_empty() => format!("{t} {}", doc.text),
        _ => doc.text.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(meta: Value) -> CorpusDoc {
        CorpusDoc { id: None, title: Some("t".into()), text: "x".into(), meta: meta.as_object().cloned().unwrap() }
    }

    #[test]
    fn fields_are_inferred_and_parsed() {
        let docs = [
            doc(json!({"topic": "a", "year": 2000, "score": 1, "tags": ["x"], "title": "t"})),
            doc(json!({"topic": "b", "year": 2001, "score": 1.5, "flag": true})),
        ];
        let f = infer_fields(&docs);
        assert_eq!(
            f.into_iter().collect::<Vec<_>>(),
            vec![
                ("flag".into(), FieldType::Bool),
                ("score".into(), FieldType::Float),
                ("topic".into(), FieldType::Keyword),
                ("year".into(), FieldType::Int)
            ]
        );
        assert_eq!(parse_field("year:int").unwrap(), ("year".into(), FieldType::Int));
        assert!(parse_field("year").is_err());
        assert!(parse_field("year:integer").is_err());
        assert_eq!(passage(&docs[0]), "t x");
    }
}
