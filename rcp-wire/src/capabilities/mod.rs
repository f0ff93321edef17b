//! Capabilities (§6): presence means supported; the value carries metadata.
//!
//! Every known key has a typed struct. Unknown capability keys (including vendor `x-` keys)
//! and unknown fields inside known capabilities are kept in flattened maps so they survive a
//! round trip (§6.2).
//!
//! Reading is liberal (§6, §6.2: metadata is informational, presence is what signals support):
//! a metadata field a peer leaves out takes its default, `dimensions` is read as `dimension`,
//! and a known capability whose metadata still cannot be read stays present, with the fields
//! that could be read and its raw JSON in [`Capabilities::unparsed`]. Writing is unchanged.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::Meta;
use crate::filter::FilterCapability;
use crate::retrieve::Mode;

/// A capability whose presence is all it says (`streaming`, `pagination`, `feedback`, ...).
///
/// Accepts `{}` (any object) and, for `citations` (which the schema allows as a boolean),
/// `true`; it always serialises as an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Flag {
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Object(extra) => Ok(Self { extra }),
            Value::Bool(_) => Ok(Self::default()),
            other => Err(serde::de::Error::custom(format!(
                "capability value must be an object, got {}",
                crate::message::json_type(&other)
            ))),
        }
    }
}

mod metadata;
pub use metadata::*;
#[cfg(test)]
mod tests;

/// The capability object of `initialize`/`info` (§6), for servers and clients alike.
///
/// Serialises as the wire object (a capability in [`Self::unparsed`] as the raw JSON it came
/// in); deserialises liberally (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capabilities {
    /// `embed`.
    pub embed: Option<EmbedCapability>,
    /// `sparseEmbed`.
    pub sparse_embed: Option<SparseEmbedCapability>,
    /// `multiVector`.
    pub multi_vector: Option<MultiVectorCapability>,
    /// `rerank`.
    pub rerank: Option<RerankCapability>,
    /// `retrieve`.
    pub retrieve: Option<RetrieveCapability>,
    /// `transform`.
    pub transform: Option<TransformCapability>,
    /// `graph`.
    pub graph: Option<GraphCapability>,
    /// `index`.
    pub index: Option<IndexCapability>,
    /// `session`.
    pub session: Option<SessionCapability>,
    /// `feedback`.
    pub feedback: Option<Flag>,
    /// `memory`.
    pub memory: Option<MemoryCapability>,
    /// `filter`.
    pub filter: Option<FilterCapability>,
    /// `streaming`.
    pub streaming: Option<Flag>,
    /// `pagination`.
    pub pagination: Option<Flag>,
    /// `citations`.
    pub citations: Option<Flag>,
    /// `log`.
    pub log: Option<LogCapability>,
    /// `catalog`.
    pub catalog: Option<CatalogCapability>,
    /// Unknown and vendor (`x-`) capability keys, kept verbatim.
    pub extra: Meta,
    /// Known capabilities whose metadata could not be read as typed (§6.2). Each is still
    /// present in its typed field (with the fields that could be read, defaults for the rest),
    /// so calls are not gated away; its raw JSON is kept here and written back on output.
    pub unparsed: BTreeMap<Capability, Unparsed>,
}

/// A known capability's metadata that could not be read as typed: the raw JSON the peer sent
/// and why it could not be read (§6.2: the capability stays present all the same).
#[derive(Debug, Clone, PartialEq)]
pub struct Unparsed {
    /// The capability's value as received.
    pub raw: Value,
    /// What could not be read (the fields left out of the typed value), for diagnostics.
    pub error: String,
}

/// A capability key of §6, used for gating and `supports()` queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `embed`
    Embed,
    /// `sparseEmbed`
    SparseEmbed,
    /// `multiVector`
    MultiVector,
    /// `rerank`
    Rerank,
    /// `retrieve`
    Retrieve,
    /// `transform`
    Transform,
    /// `graph`
    Graph,
    /// `index`
    Index,
    /// `session`
    Session,
    /// `feedback`
    Feedback,
    /// `memory`
    Memory,
    /// `filter`
    Filter,
    /// `streaming`
    Streaming,
    /// `pagination`
    Pagination,
    /// `citations`
    Citations,
    /// `log`
    Log,
    /// `catalog`
    Catalog,
}

impl Capability {
    /// Every capability key of RCP/1, in the order of §6.
    pub const ALL: [Capability; 17] = [
        Self::Embed,
        Self::SparseEmbed,
        Self::MultiVector,
        Self::Rerank,
        Self::Retrieve,
        Self::Transform,
        Self::Graph,
        Self::Index,
        Self::Session,
        Self::Feedback,
        Self::Memory,
        Self::Filter,
        Self::Streaming,
        Self::Pagination,
        Self::Citations,
        Self::Log,
        Self::Catalog,
    ];

    /// The wire key.
    pub fn key(self) -> &'static str {
        match self {
            Self::Embed => "embed",
            Self::SparseEmbed => "sparseEmbed",
            Self::MultiVector => "multiVector",
            Self::Rerank => "rerank",
            Self::Retrieve => "retrieve",
            Self::Transform => "transform",
            Self::Graph => "graph",
            Self::Index => "index",
            Self::Session => "session",
            Self::Feedback => "feedback",
            Self::Memory => "memory",
            Self::Filter => "filter",
            Self::Streaming => "streaming",
            Self::Pagination => "pagination",
            Self::Citations => "citations",
            Self::Log => "log",
            Self::Catalog => "catalog",
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// The one list of known capability fields, in §6 order, from which the wire (de)serialisation
/// of [`Capabilities`] is generated.
macro_rules! known_capabilities {
    ($($field:ident => $cap:ident),* $(,)?) => {
        impl Serialize for Capabilities {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(None)?;
                $(
                    if let Some(value) = &self.$field {
                        let key = Capability::$cap.key();
                        match self.unparsed.get(&Capability::$cap) {
                            Some(unparsed) => map.serialize_entry(key, &unparsed.raw)?,
                            None => map.serialize_entry(key, value)?,
                        }
                    }
                )*
                for (key, value) in &self.extra {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }

        impl<'de> Deserialize<'de> for Capabilities {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let mut extra = Meta::deserialize(d)?;
                let mut caps = Capabilities::default();
                $( caps.$field = lenient(&mut extra, Capability::$cap, &mut caps.unparsed); )*
                caps.extra = extra;
                Ok(caps)
            }
        }
    };
}

known_capabilities! {
    embed => Embed,
    sparse_embed => SparseEmbed,
    multi_vector => MultiVector,
    rerank => Rerank,
    retrieve => Retrieve,
    transform => Transform,
    graph => Graph,
    index => Index,
    session => Session,
    feedback => Feedback,
    memory => Memory,
    filter => Filter,
    streaming => Streaming,
    pagination => Pagination,
    citations => Citations,
    log => Log,
    catalog => Catalog,
}

/// Takes `cap` out of the capability object and reads it liberally (§6.2): `null` is absence;
/// a value that does not read as `T` keeps the fields that do (each field alone must read),
/// and is recorded in `unparsed` with its raw JSON. Presence is never lost.
fn lenient<T: DeserializeOwned + Default>(
    map: &mut Meta,
    cap: Capability,
    unparsed: &mut BTreeMap<Capability, Unparsed>,
) -> Option<T> {
    let raw = map.remove(cap.key())?;
    if raw.is_null() {
        return None;
    }
    let error = match T::deserialize(&raw) {
        Ok(value) => return Some(value),
        Err(e) => e.to_string(),
    };
    let (value, dropped) = salvage::<T>(&raw);
    let error = if dropped.is_empty() { error } else { format!("{error} (fields left out: {})", dropped.join(", ")) };
    unparsed.insert(cap, Unparsed { raw, error });
    Some(value)
}

/// The fields of `raw` that read as part of a `T` one by one, read together; the default `T`
/// when `raw` is not an object or the kept fields still do not read. Also returns the names of
/// the fields left out.
fn salvage<T: DeserializeOwned + Default>(raw: &Value) -> (T, Vec<String>) {
    let Value::Object(fields) = raw else { return (T::default(), Vec::new()) };
    let mut kept = Meta::new();
    let mut dropped = Vec::new();
    for (key, value) in fields {
        let alone = Value::Object(Meta::from_iter([(key.clone(), value.clone())]));
        if T::deserialize(&alone).is_ok() {
            kept.insert(key.clone(), value.clone());
        } else {
            dropped.push(key.clone());
        }
    }
    let value = T::deserialize(&Value::Object(kept)).unwrap_or_default();
    (value, dropped)
}

impl Capabilities {
    /// Whether `cap` is present.
    pub fn has(&self, cap: Capability) -> bool {
        match cap {
            Capability::Embed => self.embed.is_some(),
            Capability::SparseEmbed => self.sparse_embed.is_some(),
            Capability::MultiVector => self.multi_vector.is_some(),
            Capability::Rerank => self.rerank.is_some(),
            Capability::Retrieve => self.retrieve.is_some(),
            Capability::Transform => self.transform.is_some(),
            Capability::Graph => self.graph.is_some(),
            Capability::Index => self.index.is_some(),
            Capability::Session => self.session.is_some(),
            Capability::Feedback => self.feedback.is_some(),
            Capability::Memory => self.memory.is_some(),
            Capability::Filter => self.filter.is_some(),
            Capability::Streaming => self.streaming.is_some(),
            Capability::Pagination => self.pagination.is_some(),
            Capability::Citations => self.citations.is_some(),
            Capability::Log => self.log.is_some(),
            Capability::Catalog => self.catalog.is_some(),
        }
    }

    /// Removes `cap` (used when a protocol profile does not permit it).
    pub fn remove(&mut self, cap: Capability) {
        self.unparsed.remove(&cap);
        match cap {
            Capability::Embed => self.embed = None,
            Capability::SparseEmbed => self.sparse_embed = None,
            Capability::MultiVector => self.multi_vector = None,
            Capability::Rerank => self.rerank = None,
            Capability::Retrieve => self.retrieve = None,
            Capability::Transform => self.transform = None,
            Capability::Graph => self.graph = None,
            Capability::Index => self.index = None,
            Capability::Session => self.session = None,
            Capability::Feedback => self.feedback = None,
            Capability::Memory => self.memory = None,
            Capability::Filter => self.filter = None,
            Capability::Streaming => self.streaming = None,
            Capability::Pagination => self.pagination = None,
            Capability::Citations => self.citations = None,
            Capability::Log => self.log = None,
            Capability::Catalog => self.catalog = None,
        }
    }

    /// Every present key, core keys first (in §6 order), then extension keys sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut out: Vec<String> =
            Capability::ALL.into_iter().filter(|c| self.has(*c)).map(|c| c.key().to_owned()).collect();
        let mut extra: Vec<String> = self.extra.keys().cloned().collect();
        extra.sort();
        out.extend(extra);
        out
    }
}

/// `["text"]`: the modalities every capability accepts when it names none (§4.8, §6).
static TEXT_ONLY: LazyLock<Vec<String>> = LazyLock::new(|| vec!["text".to_owned()]);
/// `["chunk", "passage"]`: the units of a server that advertises none (§6.1).
static CLASSIC_UNITS: LazyLock<Vec<String>> = LazyLock::new(|| vec!["chunk".to_owned(), "passage".to_owned()]);
/// `["json"]`: the vector encoding every peer supports (§7.3.1).
static JSON_ONLY: LazyLock<Vec<String>> = LazyLock::new(|| vec!["json".to_owned()]);

/// The vector encodings of `retrieve` hit vectors: always JSON numbers, following the
/// schema's `Hit.vector` (§7.3.1 would allow a binary encoding; the normative schema does not).
pub fn hit_encodings() -> &'static [String] {
    &JSON_ONLY
}

/// The vector encodings of a capability that advertises none: `["json"]` (§7.3.1).
pub fn default_encodings() -> &'static [String] {
    &JSON_ONLY
}

/// The modalities of a capability that advertises none: `["text"]` (§4.8).
pub fn default_modalities() -> &'static [String] {
    &TEXT_ONLY
}
