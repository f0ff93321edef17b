//! `retrieve` (§7.7): params, the `Hit`, and the result with `usage`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Meta;
use crate::content::{Content, QueryInput};
use crate::message::RequestId;
pub use crate::mode::Mode;

/// `retrieve.fusion` (§7.7): how a hybrid server fuses its dense and sparse lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FusionParams {
    /// `rrf`, `weighted` or `convex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Per-list weights, e.g. `{"dense":0.5,"sparse":0.5}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<BTreeMap<String, f64>>,
    /// The RRF constant (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u32")]
    pub rrf_k: Option<u32>,
    /// Convex mixing weight of the dense list, in `[0,1]` (default 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

/// The inline rerank stage of `retrieve` (§7.7): `{method, model?, topN?}`, plus this
/// implementation's `fusion` field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RerankStage {
    /// `cross-encoder`, `colbert` or `llm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A specific model, if the server offers several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How many candidates the reranker rescores.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u64")]
    pub top_n: Option<u64>,
    /// How the reranker's ranking is merged with the first stage's (an extension field of the
    /// stage object, advertised under [`RERANK_FUSION_KEY`]); absent means the server's
    /// default. A value outside [`RerankFusion`] is refused (-32602, field `rerank.fusion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<RerankFusion>,
}

/// The `retrieve` capability key under which a server lists the [`RerankFusion`] values it
/// accepts in `rerank.fusion`, its default first (an `x-` extension key, §6.2).
pub const RERANK_FUSION_KEY: &str = "x-rcp-rerankFusion";

/// `rerank.fusion`: how the inline rerank stage (§7.7) orders the candidates it rescored.
///
/// A reranker alone can rank worse than the list it reranks (on Cranfield, the cross-encoder
/// over RRF's top 100 loses nDCG@10 to RRF itself; see `docs/benchmarks.md`); merging its
/// ranking with the first stage's keeps the first stage's evidence. `Hit.score` is then the
/// merged score, `scores.rerank` the reranker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankFusion {
    /// Reciprocal rank fusion (§16.3, k = 60) of the candidate's first-stage rank (its position
    /// in the recalled list) and its rank by the reranker's score.
    Rrf,
    /// A convex combination of the reranker's and the first stage's scores, each min-max
    /// normalised over the rescored candidates.
    Convex,
    /// The reranker's order alone (its score becomes `Hit.score`).
    None,
}

impl RerankFusion {
    /// Every value, in the order a server advertises them.
    pub const ALL: [RerankFusion; 3] = [RerankFusion::Rrf, RerankFusion::Convex, RerankFusion::None];

    /// The wire name (`rrf`, `convex`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            RerankFusion::Rrf => "rrf",
            RerankFusion::Convex => "convex",
            RerankFusion::None => "none",
        }
    }
}

/// `retrieve.rerank`: a stage object, or `false` to disable server-side reranking.
///
/// Read by hand rather than as an untagged enum so that an error inside the stage object
/// keeps its path (`rerank.fusion`, `rerank.topN`) instead of "no variant matched".
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RerankOption {
    /// `false` (or `true`, meaning "server default").
    Enabled(bool),
    /// An explicit stage.
    Stage(RerankStage),
}

impl<'de> Deserialize<'de> for RerankOption {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RerankOption;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a boolean or a rerank stage object")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RerankOption, E> {
                Ok(RerankOption::Enabled(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RerankOption, A::Error> {
                RerankStage::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(RerankOption::Stage)
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// `retrieve.mmr` (§7.7): diversification with `lambda` (0 = max diversity, 1 = relevance).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MmrParams {
    /// Relevance/diversity trade-off in `[0,1]` (default 0.5).
    #[serde(default = "default_lambda")]
    pub lambda: f64,
}

fn default_lambda() -> f64 {
    0.5
}

/// `retrieve.recency` (§7.7): exponential decay on a date field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recency {
    /// The `date` field to decay on.
    pub field: String,
    /// Half-life of the decay, in days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_life_days: Option<f64>,
}

/// A retrieval granularity (§7.7.2): what one hit is. The wire form is the spec's lowercase
/// name (`tree-node` for [`Unit::TreeNode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// A chunk of a document.
    Chunk,
    /// A passage.
    Passage,
    /// A whole document.
    Document,
    /// A graph node.
    Node,
    /// A graph triplet.
    Triplet,
    /// A graph path.
    Path,
    /// A subgraph.
    Subgraph,
    /// A community summary.
    Community,
    /// A node of a summary tree.
    TreeNode,
    /// A page of a visual document.
    Page,
}

impl Unit {
    /// Every unit of §7.7.2.
    pub const ALL: [Unit; 10] = [
        Self::Chunk,
        Self::Passage,
        Self::Document,
        Self::Node,
        Self::Triplet,
        Self::Path,
        Self::Subgraph,
        Self::Community,
        Self::TreeNode,
        Self::Page,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chunk => "chunk",
            Self::Passage => "passage",
            Self::Document => "document",
            Self::Node => "node",
            Self::Triplet => "triplet",
            Self::Path => "path",
            Self::Subgraph => "subgraph",
            Self::Community => "community",
            Self::TreeNode => "tree-node",
            Self::Page => "page",
        }
    }

    /// The unit with this wire name, if §7.7.2 defines one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.as_str() == name)
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `retrieve.rewrite`: a transform method, or `false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RewriteOption {
    /// `false` disables rewriting.
    Enabled(bool),
    /// A transform method name (`rewrite`, `hyde`, ...).
    Method(String),
}

/// `retrieve` params (§7.7). Every option beyond `query`/`k` is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrieveParams {
    /// The query: a string, a block, or blocks.
    pub query: QueryInput,
    /// Final result count (clamped to `maxK` by the server).
    #[serde(deserialize_with = "crate::int::u64")]
    pub k: u64,
    /// `dense`, `sparse` or `hybrid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// `text`, `image`, `audio`, `code` or `multimodal` (default `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<String>,
    /// Recall-stage candidate count.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u64")]
    pub candidate_k: Option<u64>,
    /// Fusion of the hybrid lists.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::opt_object")]
    pub fusion: Option<FusionParams>,
    /// Inline rerank stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankOption>,
    /// MMR diversification.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::opt_object")]
    pub mmr: Option<MmrParams>,
    /// Inline query rewriting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<RewriteOption>,
    /// Metadata filter tree (§8), as sent; the server validates it into a [`crate::filter::Filter`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    /// Drop hits scoring below this, in the server's own scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// Recency decay.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::opt_object")]
    pub recency: Option<Recency>,
    /// Retrieval granularity (§7.7.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Abstraction level in a hierarchical corpus.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u32")]
    pub level: Option<u32>,
    /// Token budget for packing hits (§7.7.2).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u64")]
    pub token_budget: Option<u64>,
    /// Agentic trajectory handle (§7.7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Whether hits carry `text` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_text: Option<bool>,
    /// Whether hits carry `vector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_vectors: Option<bool>,
    /// Encoding of `hit.vector` when `includeVectors` (§7.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Determinism seed (§7.7.1).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_i64")]
    pub seed: Option<i64>,
    /// Pinned corpus snapshot (§7.7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_version: Option<String>,
    /// Reject (`true`, the default) or degrade (`false`) on unsupported options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Pagination cursor (§10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Side-band data (§4.4).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl RetrieveParams {
    /// Minimal params: a text query and `k`.
    pub fn new(query: impl Into<QueryInput>, k: u64) -> Self {
        Self {
            query: query.into(),
            k,
            mode: None,
            modality: None,
            candidate_k: None,
            fusion: None,
            rerank: None,
            mmr: None,
            rewrite: None,
            filter: None,
            min_score: None,
            recency: None,
            unit: None,
            level: None,
            token_budget: None,
            session_id: None,
            include_text: None,
            include_vectors: None,
            encoding: None,
            seed: None,
            index_version: None,
            strict: None,
            cursor: None,
            meta: None,
        }
    }

    /// `strict`, defaulting to `true` (§7.7).
    pub fn is_strict(&self) -> bool {
        self.strict.unwrap_or(true)
    }

    /// The inline rerank stage, if one was requested.
    pub fn rerank_stage(&self) -> Option<RerankStage> {
        match &self.rerank {
            Some(RerankOption::Stage(s)) => Some(s.clone()),
            Some(RerankOption::Enabled(true)) => Some(RerankStage::default()),
            _ => None,
        }
    }
}

/// `hit.citation` (§7.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// Source label (file, collection, site).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Address of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Title of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Start offset of the cited span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    /// End offset of the cited span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
    /// Page number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<i64>,
}

/// An edge of `hit.provenance` (§7.7.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceEdge {
    /// Source node.
    pub src: String,
    /// Destination node.
    pub dst: String,
}

/// `hit.provenance`: graph/tree lineage behind a hit (§7.7.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Entity path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<String>>,
    /// Nodes traversed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Edges traversed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<Vec<ProvenanceEdge>>,
    /// Leaves a summary covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<Vec<String>>,
}

/// `hit.trust`: provenance and safety signals (§7.7, §15).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trust {
    /// `trusted`, `community` or `untrusted`.
    pub level: String,
    /// Normalised trust in `[0,1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The body looks like an injection attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_suspected: Option<bool>,
    /// The body was sanitised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitized: Option<bool>,
}

/// `hit.chunk`: the chunk's parent document and position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkRef {
    /// Parent document id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    /// Position of the chunk in the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
    /// Situating context (contextual retrieval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// A dense vector carried on the wire: JSON numbers or one `f32-base64` string (§7.3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WireVector {
    /// JSON numbers.
    Json(Vec<f32>),
    /// Little-endian binary32, base64-encoded.
    Base64(String),
}

/// One ranked result (§7.7). Only `id` and `score` are required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// Identifier in the server's id space (string or number).
    pub id: RequestId,
    /// Server-scaled score; higher is more relevant.
    pub score: f64,
    /// Normalised `[0,1]` relevance, comparable across calls (§7.7.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Text body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Non-text or mixed body (§4.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<Content>>,
    /// Modality of the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<String>,
    /// Granularity of this hit (§7.7.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Abstraction level this hit came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u32>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// The hit's vector, when `includeVectors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<WireVector>,
    /// Per-stage score breakdown (`dense`, `sparse`, `rerank`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<BTreeMap<String, f64>>,
    /// Where the hit comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citation: Option<Citation>,
    /// Graph/tree lineage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// Trust and safety signals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// Chunk position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<ChunkRef>,
}

impl Hit {
    /// A hit with only `id` and `score`.
    pub fn new(id: impl Into<RequestId>, score: f64) -> Self {
        Self {
            id: id.into(),
            score,
            confidence: None,
            text: None,
            content: None,
            modality: None,
            unit: None,
            level: None,
            meta: None,
            vector: None,
            scores: None,
            citation: None,
            provenance: None,
            trust: None,
            chunk: None,
        }
    }

    /// Sets `text`.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets one `meta` key.
    pub fn with_meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.meta.get_or_insert_with(Meta::new).insert(key.into(), value.into());
        self
    }

    /// The stringified id used to identify the hit across engines (§16.3).
    pub fn key(&self) -> String {
        match &self.id {
            RequestId::String(s) => s.clone(),
            RequestId::Number(n) => n.to_string(),
        }
    }
}

/// `retrieve` usage telemetry (§7.7, §17.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Effective recall-stage candidate count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    /// How many candidates were reranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranked: Option<u64>,
    /// Server-side latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Tokens packed under `tokenBudget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// What the server actually did differently from what was asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::nullable")]
    pub notes: Vec<String>,
    /// Unknown usage keys.
    #[serde(flatten)]
    pub extra: Meta,
}

/// `retrieve` result (§7.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrieveResult {
    /// Ranked hits, best first, at most `k`.
    pub hits: Vec<Hit>,
    /// Cursor for the next page (§10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Snapshot actually served (§7.7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_version: Option<String>,
    /// Telemetry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The rewritten query, when `rewrite` ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_query: Option<String>,
    /// Side-band data (§4.4).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl RetrieveResult {
    /// A result with these hits and nothing else.
    pub fn from_hits(hits: Vec<Hit>) -> Self {
        Self { hits, ..Self::default() }
    }

    /// Appends a note to `usage.notes`.
    pub fn note(&mut self, note: impl Into<String>) {
        self.usage.get_or_insert_with(Usage::default).notes.push(note.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_null_is_absent_and_unknown_fields_ignored() {
        let p: RetrieveParams =
            serde_json::from_value(json!({"query":"q","k":3,"mode":null,"x-acme":1,"_meta":{"a":1}})).unwrap();
        assert_eq!(p.mode, None);
        assert!(p.is_strict());
        assert_eq!(p.meta.unwrap()["a"], 1);
    }

    #[test]
    fn option_objects_are_objects_not_arrays_of_their_fields() {
        for field in ["fusion", "mmr", "recency", "rerank"] {
            for bad in [json!([]), json!([1]), json!(["published"])] {
                let r = serde_json::from_value::<RetrieveParams>(json!({"query":"q","k":3, field: bad}));
                assert!(r.is_err(), "{field}: {bad} accepted");
            }
            let r = serde_json::from_value::<RetrieveParams>(json!({"query":"q","k":3, field: null}));
            assert!(
                r.is_ok_and(|p| p.fusion.is_none() && p.mmr.is_none() && p.recency.is_none() && p.rerank.is_none())
            );
        }
        assert!(serde_json::from_value::<RetrieveParams>(json!({"query":"q","k":3,"fusion": 7})).is_err());
        // An error inside the object keeps its path.
        let raw = json!({"query":"q","k":3,"recency":{"field": 5}}).to_string();
        let err = serde_path_to_error::deserialize::<_, RetrieveParams>(&mut serde_json::Deserializer::from_str(&raw))
            .expect_err("a number for a field name");
        assert_eq!(err.path().to_string(), "recency.field");
        let p: RetrieveParams =
            serde_json::from_value(json!({"query":"q","k":3,"recency":{"field":"published","halfLifeDays":30}}))
                .unwrap();
        assert_eq!(p.recency.map(|r| r.field), Some("published".to_owned()));
    }

    #[test]
    fn rerank_false_or_stage() {
        let p: RetrieveParams = serde_json::from_value(json!({"query":"q","k":3,"rerank":false})).unwrap();
        assert_eq!(p.rerank_stage(), None);
        let p: RetrieveParams =
            serde_json::from_value(json!({"query":"q","k":3,"rerank":{"method":"llm","topN":5}})).unwrap();
        assert_eq!(p.rerank_stage().unwrap().top_n, Some(5));
    }

    #[test]
    fn rerank_fusion_round_trips_and_refuses_unknown_values() {
        let p: RetrieveParams =
            serde_json::from_value(json!({"query":"q","k":3,"rerank":{"fusion":"none","x-a":1}})).unwrap();
        assert_eq!(p.rerank_stage().unwrap().fusion, Some(RerankFusion::None));
        assert_eq!(serde_json::to_value(&p.rerank).unwrap(), json!({"fusion":"none"}));
        let p: RetrieveParams = serde_json::from_value(json!({"query":"q","k":3,"rerank":true})).unwrap();
        assert_eq!(p.rerank, Some(RerankOption::Enabled(true)));
        let err = serde_json::from_value::<RetrieveParams>(json!({"query":"q","k":3,"rerank":{"fusion":"mean"}}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `mean`"), "{err}");
        assert!(serde_json::from_value::<RetrieveParams>(json!({"query":"q","k":3,"rerank":"yes"})).is_err());
        let names: Vec<&str> = RerankFusion::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(serde_json::to_value(RerankFusion::ALL).unwrap(), json!(names));
    }

    #[test]
    fn hit_skips_absent_fields() {
        let h = Hit::new("a", 1.5).with_meta("engine", "bm25");
        assert_eq!(serde_json::to_value(&h).unwrap(), json!({"id":"a","score":1.5,"meta":{"engine":"bm25"}}));
        assert_eq!(Hit::new(7i64, 0.0).key(), "7");
    }
}
