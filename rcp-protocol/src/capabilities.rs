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

/// `embed` (§6, §7.3): dense content→vector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbedCapability {
    /// Vector dimension; read from `dimensions` too, `0` when the server does not say.
    #[serde(default, alias = "dimensions")]
    pub dimension: u32,
    /// Model identity (name and quantization); a change corrupts client indexes (§15.7).
    /// Empty when the server does not say.
    #[serde(default)]
    pub identity: String,
    /// Maximum inputs per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_limit: Option<u32>,
    /// Whether vectors are unit-norm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized: Option<bool>,
    /// Accepted input modalities (default `["text"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modalities: Option<Vec<String>>,
    /// Vector encodings offered (§7.3.1); `json` is always supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encodings: Option<Vec<String>>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `sparseEmbed` (§6, §7.4): learned-sparse term weights.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SparseEmbedCapability {
    /// Model identity; empty when the server does not say.
    #[serde(default)]
    pub identity: String,
    /// Vocabulary size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocabulary: Option<u64>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `multiVector` (§6, §7.5): late-interaction matrices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiVectorCapability {
    /// Per-token vector dimension; read from `dimensions` too, `0` when the server does not say.
    #[serde(default, alias = "dimensions")]
    pub dimension: u32,
    /// Model identity; empty when the server does not say.
    #[serde(default)]
    pub identity: String,
    /// `dot` or `cosine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<String>,
    /// Accepted input modalities (default `["text"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modalities: Option<Vec<String>>,
    /// Vector encodings offered (§7.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encodings: Option<Vec<String>>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `rerank` (§6, §7.6).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RerankCapability {
    /// Methods offered, ⊆ `cross-encoder`, `colbert`, `llm`.
    #[serde(default, deserialize_with = "crate::nullable")]
    pub methods: Vec<String>,
    /// Maximum passages per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_candidates: Option<u32>,
    /// Models offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `retrieve` (§6.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrieveCapability {
    /// Ceiling on `k`; larger values are clamped (§7.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_k: Option<u64>,
    /// Retrieval modes (`dense`, `sparse`, `hybrid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<Vec<String>>,
    /// Accepted query modalities (default `["text"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modalities: Option<Vec<String>>,
    /// Fusion strategies for `hybrid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Vec<String>>,
    /// Inline MMR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mmr: Option<bool>,
    /// Inline rerank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank_builtin: Option<bool>,
    /// Honours `seed` (§7.7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deterministic: Option<bool>,
    /// Honours `indexVersion` (§7.7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<bool>,
    /// Granularities offered (§7.7.2); absent means chunk/passage only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Vec<String>>,
    /// Abstraction levels of a hierarchical corpus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<u32>,
    /// Honours `tokenBudget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<bool>,
    /// Hits carry a `[0,1]` `confidence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<bool>,
    /// Scale of `Hit.score` (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_scale: Option<String>,
    /// Theoretical minimum of `Hit.score`, enabling convex fusion (§16.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_floor: Option<f64>,
    /// Mode used when `mode` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `transform` (§6, §7.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransformCapability {
    /// Methods offered.
    #[serde(default, deserialize_with = "crate::nullable")]
    pub methods: Vec<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `graph` (§6, §7.9).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphCapability {
    /// Ops offered.
    #[serde(default, deserialize_with = "crate::nullable")]
    pub ops: Vec<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `index` (§6, §7.10, §7.11).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexCapability {
    /// Whether `index/add` is offered.
    #[serde(default)]
    pub writable: bool,
    /// Server-side chunking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<bool>,
    /// Contextual retrieval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contextual: Option<bool>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `session` (§6, §7.7.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCapability {
    /// Deduplicates hits within a trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<bool>,
    /// How long trajectory state lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `memory` (§6, §7.17).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryCapability {
    /// Scopes offered (`global`, `session`).
    #[serde(default, deserialize_with = "crate::nullable")]
    pub scopes: Vec<String>,
    /// Recall returns clues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clues: Option<bool>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `log` (§6, §17.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogCapability {
    /// Levels the server emits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<String>>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `catalog` (§6, §7.13): the server is an aggregator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogCapability {
    /// Number of engines federated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<u64>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

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

    /// The capability with this wire key.
    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.key() == key)
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

    /// Whether any retrieval capability (`embed`, `rerank`, `retrieve`, `graph`) is present (§14.1).
    pub fn has_retrieval(&self) -> bool {
        self.embed.is_some() || self.rerank.is_some() || self.retrieve.is_some() || self.graph.is_some()
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

impl RetrieveCapability {
    /// Query modalities accepted, `["text"]` when absent (§4.8, §6.1).
    pub fn modalities(&self) -> &[String] {
        self.modalities.as_deref().unwrap_or(&TEXT_ONLY)
    }

    /// Retrieval modes offered; none when absent (§6.1).
    pub fn modes(&self) -> &[String] {
        self.modes.as_deref().unwrap_or(&[])
    }

    /// The mode used when `mode` is absent: `defaultMode`, else the first of `modes` (§6.1).
    pub fn default_mode(&self) -> Option<&str> {
        self.default_mode.as_deref().or_else(|| self.modes().first().map(String::as_str))
    }

    /// Fusion strategies offered; none when absent (§6.1).
    pub fn fusion_methods(&self) -> &[String] {
        self.fusion.as_deref().unwrap_or(&[])
    }

    /// Units offered, `["chunk", "passage"]` when absent (§6.1, §7.7.2).
    pub fn units(&self) -> &[String] {
        self.units.as_deref().unwrap_or(&CLASSIC_UNITS)
    }

    /// Abstraction levels, `1` (a flat corpus) when absent (§6.1).
    pub fn level_count(&self) -> u32 {
        self.levels.unwrap_or(1)
    }

    /// The effective `maxK` (§7.7): unbounded when absent, never below 1.
    pub fn max_k_or_unbounded(&self) -> u64 {
        self.max_k.unwrap_or(u64::MAX).max(1)
    }

    /// Whether inline MMR is offered (§6.1); absent means no.
    pub fn offers_mmr(&self) -> bool {
        self.mmr == Some(true)
    }

    /// Whether inline rerank is offered (§6.1); absent means no.
    pub fn offers_rerank(&self) -> bool {
        self.rerank_builtin == Some(true)
    }

    /// Whether `tokenBudget` is honoured (§7.7.2); absent means no.
    pub fn offers_token_budget(&self) -> bool {
        self.token_budget == Some(true)
    }

    /// Whether `seed` is honoured (§7.7.1); absent means no.
    pub fn offers_determinism(&self) -> bool {
        self.deterministic == Some(true)
    }

    /// Whether `indexVersion` pinning is honoured (§7.7.1); absent means no.
    pub fn offers_snapshots(&self) -> bool {
        self.snapshots == Some(true)
    }
}

impl EmbedCapability {
    /// Input modalities accepted, `["text"]` when absent (§4.8, §7.3).
    pub fn modalities(&self) -> &[String] {
        self.modalities.as_deref().unwrap_or(&TEXT_ONLY)
    }

    /// Vector encodings offered, `["json"]` when absent; `json` is always accepted (§7.3.1).
    pub fn encodings(&self) -> &[String] {
        self.encodings.as_deref().unwrap_or(&JSON_ONLY)
    }
}

impl MultiVectorCapability {
    /// Input modalities accepted, `["text"]` when absent (§4.8, §7.5).
    pub fn modalities(&self) -> &[String] {
        self.modalities.as_deref().unwrap_or(&TEXT_ONLY)
    }

    /// Vector encodings offered, `["json"]` when absent; `json` is always accepted (§7.3.1).
    pub fn encodings(&self) -> &[String] {
        self.encodings.as_deref().unwrap_or(&JSON_ONLY)
    }
}

impl IndexCapability {
    /// Whether server-side chunking (`index/add` `chunk:true`) is offered (§7.10).
    pub fn offers_chunking(&self) -> bool {
        self.chunking == Some(true)
    }

    /// Whether contextual retrieval (`index/add` `contextual:true`) is offered (§7.10).
    pub fn offers_contextual(&self) -> bool {
        self.contextual == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_round_trip() {
        let raw = json!({
            "retrieve": {"maxK": 50, "modes": ["sparse"], "x-acme-boost": true},
            "x-acme": {"v": 2},
            "streaming": {},
            "citations": true,
            "futureKey": {"a": 1}
        });
        let caps: Capabilities = serde_json::from_value(raw).unwrap();
        assert_eq!(caps.retrieve.as_ref().unwrap().max_k, Some(50));
        assert_eq!(caps.retrieve.as_ref().unwrap().extra["x-acme-boost"], true);
        assert!(caps.has(Capability::Citations));
        let back = serde_json::to_value(&caps).unwrap();
        assert_eq!(back["x-acme"]["v"], 2);
        assert_eq!(back["futureKey"]["a"], 1);
        assert_eq!(back["citations"], json!({}));
        assert_eq!(caps.keys(), vec!["retrieve", "streaming", "citations", "futureKey", "x-acme"]);
    }

    #[test]
    fn defaults_of_section_6_apply_when_absent() {
        let rc = RetrieveCapability::default();
        assert_eq!(rc.modalities(), ["text"]);
        assert_eq!(rc.units(), ["chunk", "passage"]);
        assert_eq!(rc.level_count(), 1);
        assert!(rc.modes().is_empty() && rc.default_mode().is_none());
        let ec = EmbedCapability::default();
        assert_eq!(ec.encodings(), ["json"]);
        let rc = RetrieveCapability { modes: Some(vec!["sparse".into()]), ..Default::default() };
        assert_eq!(rc.default_mode(), Some("sparse"));
    }

    #[test]
    fn missing_metadata_takes_defaults_and_dimensions_reads_as_dimension() {
        let raw = json!({
            "embed": {"dimensions": 384, "modes": ["dense"]},
            "sparseEmbed": {},
            "multiVector": {"dimensions": 128}
        });
        let caps: Capabilities = serde_json::from_value(raw).unwrap();
        let embed = caps.embed.as_ref().unwrap();
        assert_eq!((embed.dimension, embed.identity.as_str()), (384, ""));
        assert_eq!(embed.extra["modes"], json!(["dense"]));
        assert_eq!(caps.sparse_embed.as_ref().unwrap().identity, "");
        assert_eq!(caps.multi_vector.as_ref().unwrap().dimension, 128);
        assert!(caps.unparsed.is_empty(), "{:?}", caps.unparsed);
    }

    #[test]
    fn unreadable_metadata_keeps_the_capability_its_readable_fields_and_its_raw_json() {
        let raw = json!({
            "rerank": {"methods": "cross-encoder", "maxCandidates": 10},
            "retrieve": ["sparse"],
            "index": {"writable": true, "chunking": "yes"},
            "streaming": 1
        });
        let caps: Capabilities = serde_json::from_value(raw.clone()).unwrap();
        for cap in [Capability::Rerank, Capability::Retrieve, Capability::Index, Capability::Streaming] {
            assert!(caps.has(cap), "{cap} must stay present");
            assert!(caps.unparsed.contains_key(&cap), "{cap} must be recorded as unparsed");
        }
        let rerank = caps.rerank.as_ref().unwrap();
        assert_eq!((rerank.max_candidates, rerank.methods.is_empty()), (Some(10), true));
        assert!(caps.unparsed[&Capability::Rerank].error.contains("methods"), "{:?}", caps.unparsed);
        let index = caps.index.as_ref().unwrap();
        assert!(index.writable && index.chunking.is_none());
        assert_eq!(caps.unparsed[&Capability::Index].raw, raw["index"]);
        assert_eq!(serde_json::to_value(&caps).unwrap(), raw, "unparsed values are written back as received");
        let mut caps = caps;
        caps.remove(Capability::Rerank);
        assert!(!caps.unparsed.contains_key(&Capability::Rerank));
        assert!(serde_json::to_value(&caps).unwrap().get("rerank").is_none());
    }

    #[test]
    fn a_servers_own_capabilities_serialise_as_before() {
        let mut caps = Capabilities {
            embed: Some(EmbedCapability { dimension: 8, identity: "m".into(), ..Default::default() }),
            retrieve: Some(RetrieveCapability { max_k: Some(5), ..Default::default() }),
            streaming: Some(Flag::default()),
            ..Default::default()
        };
        caps.extra.insert("x-acme".into(), json!({"v": 1}));
        let wire = serde_json::to_string(&caps).unwrap();
        assert_eq!(
            wire,
            r#"{"embed":{"dimension":8,"identity":"m"},"retrieve":{"maxK":5},"streaming":{},"x-acme":{"v":1}}"#
        );
        let back: Capabilities = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, caps);
    }

    #[test]
    fn a_capability_object_that_is_not_an_object_is_still_an_error() {
        assert!(serde_json::from_value::<Capabilities>(json!(["retrieve"])).is_err());
    }

    #[test]
    fn null_capability_is_absent() {
        let caps: Capabilities = serde_json::from_value(json!({"embed": null})).unwrap();
        assert!(!caps.has(Capability::Embed));
    }
}
