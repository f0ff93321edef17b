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
///
/// Read liberally: a peer that answers with only a `results` array of `{index, score}` (as
/// some public SDKs do) gets `scores` rebuilt by index and, when absent, `order` from
/// `results` best first (see [`RerankResult::from_entries`]). Written as the spec says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "RerankWire")]
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

/// The most passages a `scores` array is rebuilt for from a `results` array (§7.6), so a
/// peer's stray index cannot make the reader allocate without bound.
pub const MAX_REBUILT_PASSAGES: usize = 1 << 20;

/// A `rerank` result as read off the wire, where `scores` may be missing.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RerankWire {
    #[serde(default)]
    scores: Option<Vec<f64>>,
    #[serde(default)]
    order: Option<Vec<usize>>,
    #[serde(default)]
    results: Option<Vec<RerankEntry>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

/// A `rerank` result that cannot be read (§7.6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RerankResultError {
    /// Neither `scores` nor `results` was sent.
    #[error("missing field `scores`")]
    MissingScores,
    /// A `results` entry's index is [`MAX_REBUILT_PASSAGES`] or more.
    #[error("rerank results index {index} out of range")]
    IndexOutOfRange {
        /// The offending index.
        index: usize,
    },
}

impl TryFrom<RerankWire> for RerankResult {
    type Error = RerankResultError;

    fn try_from(w: RerankWire) -> Result<Self, Self::Error> {
        let rebuilt = match (w.scores, &w.results) {
            (Some(scores), _) => Self { scores, order: w.order, ..Default::default() },
            (None, Some(results)) => {
                let mut rebuilt = Self::from_entries(results)?;
                rebuilt.order = w.order.or(rebuilt.order);
                rebuilt
            }
            (None, None) => return Err(RerankResultError::MissingScores),
        };
        Ok(Self { results: w.results, usage: w.usage, meta: w.meta, ..rebuilt })
    }
}

impl RerankResult {
    /// `scores` and `order` rebuilt from `{index, score}` entries (§7.6): `scores` is as long
    /// as the highest index + 1, and a passage with no entry (cut by `topN`) scores
    /// `f64::NEG_INFINITY`, below every scored one; `order` lists the entries best first.
    /// An index of [`MAX_REBUILT_PASSAGES`] or more is refused rather than allocated for.
    pub fn from_entries(entries: &[RerankEntry]) -> Result<Self, RerankResultError> {
        let len = entries.iter().map(|e| e.index.saturating_add(1)).max().unwrap_or(0);
        if len > MAX_REBUILT_PASSAGES {
            return Err(RerankResultError::IndexOutOfRange { index: len - 1 });
        }
        let mut scores = vec![f64::NEG_INFINITY; len];
        for e in entries {
            scores[e.index] = e.score;
        }
        let mut ranked: Vec<&RerankEntry> = entries.iter().collect();
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
        let order = ranked.into_iter().map(|e| e.index).collect();
        Ok(Self { scores, order: Some(order), ..Default::default() })
    }

    /// Extends `scores` to `passages` entries with `f64::NEG_INFINITY` (unscored), for a
    /// result rebuilt from a `results` array that left passages out; a longer `scores` is
    /// left as it is.
    pub fn cover(&mut self, passages: usize) {
        if self.scores.len() < passages {
            self.scores.resize(passages, f64::NEG_INFINITY);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scores_are_read_as_sent() {
        let r: RerankResult = serde_json::from_value(json!({"scores": [0.1, 0.9], "order": [1, 0]})).unwrap();
        assert_eq!((r.scores, r.order, r.results), (vec![0.1, 0.9], Some(vec![1, 0]), None));
    }

    #[test]
    fn a_results_array_alone_rebuilds_scores_by_index_and_order_best_first() {
        let raw = json!({"results": [{"index": 2, "score": 0.5}, {"index": 0, "score": 0.9}]});
        let mut r: RerankResult = serde_json::from_value(raw).unwrap();
        assert_eq!(r.scores, vec![0.9, f64::NEG_INFINITY, 0.5]);
        assert_eq!(r.order, Some(vec![0, 2]));
        assert_eq!(r.results.as_ref().map(Vec::len), Some(2));
        r.cover(4);
        assert_eq!(r.scores.len(), 4);
        assert_eq!(r.scores[3], f64::NEG_INFINITY);
        let r: RerankResult = serde_json::from_value(json!({"results": []})).unwrap();
        assert!(r.scores.is_empty());
    }

    #[test]
    fn an_index_out_of_any_range_is_refused() {
        let e = serde_json::from_value::<RerankResult>(json!({"results": [{"index": 1u64 << 40, "score": 1.0}]}));
        assert!(e.is_err());
    }

    #[test]
    fn a_result_with_neither_scores_nor_results_is_refused() {
        let e = serde_json::from_value::<RerankResult>(json!({"order": [0]})).unwrap_err();
        assert!(e.to_string().contains("scores"), "{e}");
    }

    #[test]
    fn written_as_the_spec_says() {
        let r = RerankResult { scores: vec![0.5], order: Some(vec![0]), ..Default::default() };
        assert_eq!(serde_json::to_value(&r).unwrap(), json!({"scores": [0.5], "order": [0]}));
    }
}
