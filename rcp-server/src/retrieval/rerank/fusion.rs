//! How the rerank stage merges the reranker's ranking with the first stage's
//! (`rerank.fusion`, [`RerankFusion`]): the score of each rescored candidate, from its
//! first-stage score (its position in the recalled list is its first-stage rank) and the
//! reranker's score. Pure functions of the two lists, so the benchmarks run the same code.

use rcp_wire::fusion::min_max;
use rcp_wire::retrieve::RerankFusion;

use super::Funnel;

impl Funnel {
    /// The RRF constant of [`RerankFusion::Rrf`] (the §16.3 default).
    pub const RRF_K: f64 = 60.0;

    /// The reranker's weight in [`RerankFusion::Convex`]: the midpoint, chosen before
    /// measuring; on Cranfield 0.3 and 0.7 each lose to the first stage at some depth where 0.5
    /// does not (`docs/benchmarks.md`).
    pub const CONVEX_ALPHA: f64 = 0.5;

    /// The fusion used when the request names none: the convex combination, the one
    /// configuration that did not lose to its first stage on Cranfield over BM25, dense or RRF
    /// lists at any candidate depth measured (10 to 100; RRF of ranks lost over the RRF list at
    /// depths 10, 50 and 100; `docs/benchmarks.md`).
    pub const DEFAULT_FUSION: RerankFusion = RerankFusion::Convex;

    /// Candidates the stage rescores when the request sets no `rerank.topN`: `max(k, 20)`,
    /// within `candidateK` and `rerank.maxCandidates`. On Cranfield the fused ranking of the
    /// top 20 gains nearly all that the top 100 gains, and 20 cross-encoder pairs take about
    /// 0.7 s on 2 cores where 100 take 3.6 s or more (`docs/benchmarks.md`).
    pub const DEFAULT_TOP_N: usize = 20;

    /// The merged score of each rescored candidate under `fusion`, in candidate order:
    /// `first[i]` is candidate `i`'s first-stage score (candidates in first-stage order),
    /// `rerank[i]` its reranker score (NaN ranks last). Higher is better.
    pub fn fused_scores(fusion: RerankFusion, first: &[f64], rerank: &[f64]) -> Vec<f64> {
        match fusion {
            RerankFusion::Rrf => Self::rrf_scores(Self::RRF_K, rerank),
            RerankFusion::Convex => Self::convex_scores(Self::CONVEX_ALPHA, first, rerank),
            RerankFusion::None => rerank.iter().map(|&s| if s.is_nan() { f64::MIN } else { s }).collect(),
        }
    }

    /// Reciprocal rank fusion with constant `k`: `1/(k + first-stage rank) + 1/(k + reranker
    /// rank)`, ranks from 1; candidate `i`'s first-stage rank is `i + 1`, its reranker rank its
    /// position by `rerank` (equal scores keep first-stage order, NaN last).
    pub fn rrf_scores(k: f64, rerank: &[f64]) -> Vec<f64> {
        let mut by_rerank: Vec<usize> = (0..rerank.len()).collect();
        by_rerank.sort_by(|&a, &b| descending(rerank[a], rerank[b]));
        let mut fused: Vec<f64> = (0..rerank.len()).map(|i| 1.0 / (k + (i + 1) as f64)).collect();
        for (rank, &i) in by_rerank.iter().enumerate() {
            fused[i] += 1.0 / (k + (rank + 1) as f64);
        }
        fused
    }

    /// `alpha · r + (1 − alpha) · f`, where `r` and `f` are the reranker's and the first stage's
    /// scores min-max normalised to `[0, 1]` over the candidates (a list whose scores are all
    /// equal normalises to 1; a NaN to 0). In `[0, 1]`.
    pub fn convex_scores(alpha: f64, first: &[f64], rerank: &[f64]) -> Vec<f64> {
        let (f, r) = (min_max(first), min_max(rerank));
        f.iter().zip(&r).map(|(f, r)| alpha * r + (1.0 - alpha) * f).collect()
    }
}

/// Orders NaN below every number, higher first.
fn descending(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => b.total_cmp(&a),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    }
}
