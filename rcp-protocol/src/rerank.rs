//! `rerank` (§7.6).

use serde::{Deserialize, Serialize};

use crate::Meta;
use crate::content::{InputItem, QueryInput};
use crate::retrieve::Usage;

/// `rerank` params. `documents` is accepted as a synonym of `passages` for interoperability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RerankParams {
    /// The query.
    pub query: QueryInput,
    /// Candidates to score.
    #[serde(alias = "documents")]
    pub passages: Vec<InputItem>,
    /// `cross-encoder`, `colbert` or `llm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A specific model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Truncate `order` to the best `topN`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u64")]
    pub top_n: Option<u64>,
    /// Reject (`true`, default) or fall back (`false`) on an unadvertised method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// One `{index, score}` entry of the interoperability `results` array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankEntry {
    /// Index into `passages`.
    pub index: usize,
    /// Score of that passage.
    pub score: f64,
}

/// `rerank` result: `scores[i]` belongs to `passages[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RerankResult {
    /// One score per passage, in passage order.
    pub scores: Vec<f64>,
    /// Passage indices, best first (truncated to `topN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<usize>>,
    /// `order` with scores, for peers that read a `results` array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<RerankEntry>>,
    /// Telemetry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
