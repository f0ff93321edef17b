//! Declared fields at `index/add` (§7.10, §8): a document whose metadata does not fit the
//! types of the advertised filter fields is refused before any handler runs, for every engine
//! built on the framework. The rule itself is the bundled engines' ingestion policy,
//! [`rcp_corpus::validate`]: one implementation for the `index` commands, the corpus reader
//! and the wire.

use rcp_corpus::validate::field_values;
use rcp_wire::RcpError;
use rcp_wire::capabilities::Capabilities;
use rcp_wire::error::echo;
use rcp_wire::filter::FilterFields;
use rcp_wire::index::IndexAddParams;

/// Refuses (`-32602` on `documents[i].meta.FIELD`, the message naming the document) a batch
/// holding a document with a value of the wrong type for a typed filter field the session was
/// advertised (§8); nothing of the batch reaches the engine, so nothing of it is stored.
/// Untyped fields and undeclared keys are not checked.
pub(crate) fn declared_fields(p: &IndexAddParams, caps: &Capabilities) -> Result<(), RcpError> {
    let Some(FilterFields::Typed(fields)) = caps.filter.as_ref().map(|f| &f.fields) else { return Ok(()) };
    if fields.is_empty() {
        return Ok(());
    }
    for (i, d) in p.documents.iter().enumerate() {
        let Some(meta) = &d.meta else { continue };
        for (name, ty) in fields {
            if let Err(e) = field_values(meta, name, ty) {
                // `data.detail` is the reason alone, as the `index` commands print it; the
                // message names the document by its id too.
                let field = format!("documents[{i}].{}", e.field);
                let mut err = RcpError::invalid_params(&field, e.reason());
                if let Some(id) = &d.id {
                    let detail = err.data.as_ref().and_then(|x| x.detail.clone()).unwrap_or_default();
                    err.message = format!("invalid params: {field} (document '{}'): {detail}", echo(id));
                }
                return Err(err);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rcp_wire::filter::{FieldType, FilterCapability};
    use rcp_wire::index::Document;
    use serde_json::json;

    use super::*;

    fn doc(id: Option<&str>, meta: serde_json::Value) -> Document {
        Document { id: id.map(str::to_owned), text: "t".into(), meta: meta.as_object().cloned() }
    }

    #[test]
    fn a_mistyped_declared_field_is_refused_naming_the_document_and_field() {
        let caps = Capabilities {
            filter: Some(FilterCapability::typed([("year", FieldType::Int), ("at", FieldType::Date)])),
            ..Default::default()
        };
        let ok = IndexAddParams {
            documents: vec![
                doc(Some("a"), json!({"year": 1999, "at": "2020-01-01", "other": "x"})),
                doc(None, json!({})),
            ],
            ..Default::default()
        };
        assert!(declared_fields(&ok, &caps).is_ok());
        let bad = IndexAddParams {
            documents: vec![doc(Some("a"), json!({"year": 1999})), doc(Some("b"), json!({"year": "nineteen"}))],
            ..Default::default()
        };
        let e = declared_fields(&bad, &caps).expect_err("refused");
        assert_eq!(e.code, rcp_wire::ErrorCode::INVALID_PARAMS);
        assert_eq!(e.data.as_ref().and_then(|d| d.field.as_deref()), Some("documents[1].meta.year"));
        assert!(e.message.contains("document 'b'") && e.message.contains("int"), "{}", e.message);
        let bad =
            IndexAddParams { documents: vec![doc(None, json!({"at": ["2020-01-01", 7.5]}))], ..Default::default() };
        let e = declared_fields(&bad, &caps).expect_err("refused");
        assert!(e.message.contains("documents[0]"), "{}", e.message);
        // Untyped fields are not checked.
        let untyped = Capabilities { filter: Some(FilterCapability::untyped(["year"])), ..Default::default() };
        assert!(declared_fields(&bad, &untyped).is_ok());
    }
}
