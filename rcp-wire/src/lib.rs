//! Wire types of RCP/1, the Retrieval Context Protocol, plus the pure algorithms every peer
//! needs: the metadata-filter builder and validator (§8), the `f32-base64` vector codec
//! (§7.3.1), MMR diversification, and the fusion functions of federation (§16.3).
//!
//! This crate does no I/O. Types follow the spec's sections, one module per concern; field
//! names are `camelCase` on the wire, optional fields are skipped when absent, unknown fields
//! are ignored and `null` is treated as absent (§4.6).

#![forbid(unsafe_code)]

pub mod capabilities;
pub mod catalog;
pub mod content;
pub mod embed;
pub mod error;
pub mod exit;
pub mod feedback;
pub mod filter;
pub mod fusion;
pub mod gating;
pub mod graph;
pub mod index;
mod int;
pub mod lifecycle;
pub mod memory;
pub mod message;
pub mod methods;
pub mod mmr;
mod mode;
pub mod ndjson;
pub mod notifications;
pub mod request;
pub mod rerank;
pub mod retrieve;
pub mod transform;
pub mod vectors;

pub use capabilities::{Capabilities, Capability};
pub use content::{Content, InputItem, QueryInput};
pub use error::{ErrorCode, ErrorData, RcpError};
pub use message::{Message, Notification, Request, RequestId, Response};
pub use retrieve::{Hit, Mode, RetrieveParams, RetrieveResult, Usage};

/// The `_meta` object (§4.4) and other free-form JSON objects.
pub type Meta = serde_json::Map<String, serde_json::Value>;

/// The highest protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Deserialises a field whose `null` means "absent" (§4.6) into its default value.
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Deserialises an optional field that must be a JSON object when present (`null` is absent,
/// §4.6), refusing the array of its fields that serde's derived `Deserialize` would read. The
/// object is read in place, so an error inside it keeps its path (`recency.field`).
pub(crate) fn opt_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Visit<T>(std::marker::PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_any(Visit(std::marker::PhantomData))
}

/// Deserialises a list whose items must each be a JSON object (§14.1: malformed params are
/// `-32602`). serde's derived `Deserialize` also reads a struct from an array of its fields in
/// order, so without this `[["h"]]` would pass for `[{"hitId": "h"}]`.
pub(crate) fn objects<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    use serde::de::Error;
    let items = Vec::<serde_json::Value>::deserialize(d)?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::Object(_) => {
                serde_json::from_value(item).map_err(|e| D::Error::custom(format!("[{i}]: {e}")))
            }
            other => Err(D::Error::custom(format!("[{i}] must be an object, not {other}"))),
        })
        .collect()
}
