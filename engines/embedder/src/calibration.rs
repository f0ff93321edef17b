//! `hit.confidence` (§7.7.2) for cosines of this model: a fixed map that depends on the model
//! only, so engines that rank by this model's cosine report comparable confidences.

/// The midpoint of the confidence map: the cosine that maps to confidence 0.5.
pub const CONFIDENCE_MIDPOINT: f64 = 0.5;
/// The steepness of the confidence map (per unit of cosine).
pub const CONFIDENCE_SLOPE: f64 = 10.0;

/// `hit.confidence` (§7.7.2) from a cosine: the logistic
/// `1 / (1 + exp(-10 · (cos − 0.5)))`, strictly increasing in the cosine.
///
/// The midpoint 0.5 is where all-MiniLM-L6-v2 separates related from unrelated text (unrelated
/// pairs score around 0–0.2, paraphrases above 0.7), so confidence is ≈ 0.05 at cos 0.2, 0.5 at
/// 0.5 and ≈ 0.88 at 0.7. It depends on the model only, never on the corpus or the result set,
/// which keeps it comparable across calls.
pub fn confidence(cosine: f64) -> f64 {
    1.0 / (1.0 + (-CONFIDENCE_SLOPE * (cosine - CONFIDENCE_MIDPOINT)).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_is_a_monotone_map_centred_on_the_midpoint() {
        assert!((confidence(CONFIDENCE_MIDPOINT) - 0.5).abs() < 1e-12);
        assert!(confidence(0.2) < 0.06 && confidence(0.7) > 0.87);
        assert!(confidence(0.3) < confidence(0.31));
    }
}
