//! `hit.confidence` (§7.7.2) from the rerankers' scores: one Platt map per model
//! ([`PlattMap`], the shape `rcp_embedder::calibration` uses for the embedding model), fitted on
//! Cranfield's qrels, so a hit the inline rerank stage rescored carries the probability that it
//! is relevant as its reranker judges it.
//!
//! **Provenance.** Every (query, document) pair each model scored in one
//! `rerank_cranfield --scores` run over Cranfield (225 queries; the candidates of the RRF, BM25
//! and dense top-100 lists), relevant when the qrels grade it at all; fitted by Newton's method
//! on the log-loss with Platt's smoothed targets, cross-validated 5-fold by query
//! (`calibrate_cranfield --scores FILE --method METHOD`; the figures are in
//! docs/benchmarks.md). The shipped parameters are the fit on every pair. As with the embedding
//! model, a collection whose share of relevant candidates differs sees the probabilities
//! shifted by that base rate; the map depends on the model's score only.

pub use rcp_embedder::calibration::PlattMap;

use crate::colbert::Colbert;
use crate::cross_encoder::CrossEncoder;

/// The cross-encoder's map, over its logit: 34,026 pairs, 1,301 relevant (3.8%). ECE (10
/// bins) 0.1230 for the logit read as a probability (`σ(logit)`), 0.0034 for this map
/// cross-validated; Brier 0.1036 → 0.0333, log-loss 0.3772 → 0.1357. A logit of 8.38 is an
/// even chance on Cranfield: the MS MARCO model's own reading is far too confident there.
/// Fitted at the model's full 512-token window: a narrower `--rerank-window` shifts the
/// logits of long passages, and the map was not refitted for it.
pub const CROSS_ENCODER: PlattMap = PlattMap { slope: 0.2965, midpoint: 8.3756 };

/// ColBERT's map, over its MaxSim (a sum of 32 cosines): 28,299 pairs, 1,268 relevant (4.5%).
/// ECE 0.0039 cross-validated, Brier 0.0395, log-loss 0.1570 (a MaxSim has no probability
/// reading of its own to compare with). Fitted on the float matrices' MaxSim; the stored int8
/// matrices move a MaxSim by less than 0.05, under 0.07 in this map's logit.
pub const COLBERT: PlattMap = PlattMap { slope: 1.3487, midpoint: 28.3446 };

/// The map of a reranking method (§7.6), if one is shipped.
pub fn map(method: &str) -> Option<PlattMap> {
    match method {
        CrossEncoder::METHOD => Some(CROSS_ENCODER),
        Colbert::METHOD => Some(COLBERT),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_has_an_increasing_map() {
        for method in [CrossEncoder::METHOD, Colbert::METHOD] {
            let m = map(method).unwrap();
            assert!(m.slope > 0.0, "{method}: {m:?}");
            assert!((m.apply(m.midpoint) - 0.5).abs() < 1e-12);
            assert!(m.apply(m.midpoint - 1.0) < m.apply(m.midpoint + 1.0));
        }
        assert!(map("bm25").is_none());
    }
}
