//! Capabilities (§6): presence means supported; the value carries metadata.
//!
//! Every known key has a typed struct. Unknown capability keys (including vendor `x-` keys)
//! and unknown fields inside known capabilities are kept in flattened maps so they survive a
//! round trip (§6.2).

use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize};
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
    /// Vector dimension.
    pub dimension: u32,
    /// Model identity (name and quantization); a change corrupts client indexes (§15.7).
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
    /// Model identity.
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
    /// Per-token vector dimension.
    pub dimension: u32,
    /// Model identity.
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// `embed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<EmbedCapability>,
    /// `sparseEmbed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_embed: Option<SparseEmbedCapability>,
    /// `multiVector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_vector: Option<MultiVectorCapability>,
    /// `rerank`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankCapability>,
    /// `retrieve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieve: Option<RetrieveCapability>,
    /// `transform`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformCapability>,
    /// `graph`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphCapability>,
    /// `index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexCapability>,
    /// `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionCapability>,
    /// `feedback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Flag>,
    /// `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryCapability>,
    /// `filter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterCapability>,
    /// `streaming`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<Flag>,
    /// `pagination`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pagination: Option<Flag>,
    /// `citations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<Flag>,
    /// `log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogCapability>,
    /// `catalog`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogCapability>,
    /// Unknown and vendor (`x-`) capability keys, kept verbatim.
    #[serde(flatten)]
    pub extra: Meta,
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
    fn null_capability_is_absent() {
        let caps: Capabilities = serde_json::from_value(json!({"embed": null})).unwrap();
        assert!(!caps.has(Capability::Embed));
    }
}
