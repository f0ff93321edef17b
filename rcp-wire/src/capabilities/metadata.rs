//! The metadata of each known capability (§6.1), with the spec's defaults as accessors.

use super::*;

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
    pub modes: Option<Vec<Mode>>,
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
    pub default_mode: Option<Mode>,
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

impl RetrieveCapability {
    /// Query modalities accepted, `["text"]` when absent (§4.8, §6.1).
    pub fn modalities(&self) -> &[String] {
        self.modalities.as_deref().unwrap_or(&TEXT_ONLY)
    }

    /// Retrieval modes offered; none when absent (§6.1).
    pub fn modes(&self) -> &[Mode] {
        self.modes.as_deref().unwrap_or(&[])
    }

    /// The mode used when `mode` is absent: `defaultMode`, else the first of `modes` (§6.1).
    pub fn default_mode(&self) -> Option<&Mode> {
        self.default_mode.as_ref().or_else(|| self.modes().first())
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

    /// The extension key (§6.2) under which an engine lists the optional `retrieve` params it
    /// honours that no flag of its own gates (`recency`, `includeVectors`); rcp-server's
    /// `Honours` writes it and refuses the params it does not list.
    pub const HONOURS_KEY: &'static str = "x-rcp-honours";

    /// The params listed under [`Self::HONOURS_KEY`] (none when absent).
    pub fn honours(&self) -> Vec<&str> {
        let listed = self.extra.get(Self::HONOURS_KEY).and_then(serde_json::Value::as_array);
        listed.into_iter().flatten().filter_map(serde_json::Value::as_str).collect()
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
