//! `hit.confidence` (§7.7.2) for cosines of this model: a fixed map that depends on the model
//! only, so engines that rank by this model's cosine report comparable confidences. The map's
//! shape, [`PlattMap`], is the one every model's confidence uses (the rerankers' maps are in
//! `rcp_rerank::calibration`).

/// A Platt map from a model's score to the probability that the hit is relevant:
/// `1 / (1 + exp(-slope · (score − midpoint)))`, fitted per model on judged pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlattMap {
    /// Steepness per unit of score.
    pub slope: f64,
    /// The score that maps to 0.5.
    pub midpoint: f64,
}

impl PlattMap {
    /// The probability of `score`, in `[0, 1]` (a NaN score maps to NaN; callers pass finite
    /// scores).
    pub fn apply(&self, score: f64) -> f64 {
        1.0 / (1.0 + (-self.slope * (score - self.midpoint)).exp())
    }
}

/// all-MiniLM-L6-v2's map (see [`confidence`] for its provenance).
pub const MINILM: PlattMap = PlattMap { slope: CONFIDENCE_SLOPE, midpoint: CONFIDENCE_MIDPOINT };

/// The midpoint of the confidence map: the cosine that maps to confidence 0.5.
pub const CONFIDENCE_MIDPOINT: f64 = 0.7960;
/// The steepness of the confidence map (per unit of cosine).
pub const CONFIDENCE_SLOPE: f64 = 9.4897;

/// `hit.confidence` (§7.7.2) from a cosine: the logistic
/// `1 / (1 + exp(-9.4897 · (cos − 0.7960)))`, strictly increasing in the cosine, read as the
/// probability that the hit is relevant.
///
/// **Provenance.** A Platt map fitted on Cranfield (225 queries, 1,400 aeronautics abstracts):
/// every hit of each query's top 100 from `rcp-dense` is one pair (its cosine; relevant when the
/// qrels grade it at all), 22,500 pairs of which 1,189 (5.3%) are relevant. Expected calibration
/// error (10 bins) 0.3421 for the hand-set map this replaced (midpoint 0.5, slope 10), 0.0052 for
/// the Platt map under 5-fold cross-validation by query; Brier 0.1880 → 0.0467, log-loss
/// 0.5585 → 0.1838. These are the parameters fitted on every pair. Reproduce with
/// `target/debug/calibrate_cranfield --dense "rcp-dense serve --data-dir DIR"` (bench crate;
/// figures in docs/benchmarks.md). A collection whose share of relevant hits differs will see
/// the probabilities shifted by that base rate; the map stays a function of the model's cosine
/// only, never of the corpus or the result set, so confidences stay comparable across calls
/// and across the engines that rank by this model (rcp-dense, rcp-pg).
pub fn confidence(cosine: f64) -> f64 {
    MINILM.apply(cosine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_is_a_monotone_map_centred_on_the_midpoint() {
        assert!((confidence(CONFIDENCE_MIDPOINT) - 0.5).abs() < 1e-12);
        // The fitted map: a related-looking cosine (0.7) is still more likely not relevant on
        // Cranfield; 0.9 mostly is.
        assert!(confidence(0.2) < 0.01 && confidence(0.7) < 0.3 && confidence(0.9) > 0.7);
        assert!(confidence(0.3) < confidence(0.31));
    }
}
