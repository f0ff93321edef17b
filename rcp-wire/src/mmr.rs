//! Maximal Marginal Relevance diversification (`retrieve.mmr`, §7.7; `retrieve.mmr`
//! capability, §6.1).
//!
//! MMR greedily selects, at each step, the candidate `i` maximising
//!
//! ```text
//! λ · rel(i) − (1 − λ) · max_{j ∈ S} sim(i, j)
//! ```
//!
//! where `S` is the set already selected (the penalty is `0` while `S` is empty).
//! `λ = 1` is pure relevance order, `λ = 0` maximal diversity. Ties go to the lower index,
//! so the result is deterministic; callers usually pass candidates in relevance order, which
//! makes "lower index" mean "more relevant".

use std::collections::HashMap;

use crate::fusion::min_max;
use crate::retrieve::{Hit, WireVector};

/// What [`diversify`] measured the likeness of two hits by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Likeness {
    /// The cosine of their vectors: every hit carried a JSON `vector` of one dimension.
    Vectors,
    /// The cosine of their texts' word counts (lowercased letter/digit runs): some hit had no
    /// vector, or the vectors differ in dimension (engines of different embedding spaces).
    Words,
}

/// MMR over ranked hits (§7.7 `mmr`), whatever engines they came from: relevance is each hit's
/// `score` min-max normalised over `hits` (so `λ` weighs it against a similarity in `[0, 1]`
/// whatever the scale, fused or not), and the likeness of two hits the cosine of their vectors
/// when every hit carries one of a single dimension, else the cosine of their texts' word
/// counts (the similarity of Carbonell and Goldstein's original MMR; a hit without text is like
/// nothing). Returns at most `k` indices into `hits`, in selection order, and what was used.
pub fn diversify(hits: &[Hit], lambda: f64, k: usize) -> (Vec<usize>, Likeness) {
    let relevance = min_max(&hits.iter().map(|h| h.score).collect::<Vec<f64>>());
    let vectors: Option<Vec<&[f32]>> = hits
        .iter()
        .map(|h| match &h.vector {
            Some(WireVector::Json(v)) if !v.is_empty() => Some(v.as_slice()),
            _ => None,
        })
        .collect();
    if let Some(vectors) = vectors
        && vectors.windows(2).all(|w| w[0].len() == w[1].len())
    {
        return (mmr(&relevance, &vectors, lambda, k), Likeness::Vectors);
    }
    let counts: Vec<WordCounts> = hits.iter().map(|h| WordCounts::of(h.text.as_deref().unwrap_or(""))).collect();
    (mmr_with(&relevance, lambda, k, |i, j| counts[i].cosine(&counts[j])), Likeness::Words)
}

/// A text's lowercased letter/digit runs and how often each occurs, with the vector's norm.
struct WordCounts {
    counts: HashMap<String, f64>,
    norm: f64,
}

impl WordCounts {
    fn of(text: &str) -> Self {
        let mut counts: HashMap<String, f64> = HashMap::new();
        for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_lowercase()).or_default() += 1.0;
        }
        let norm = counts.values().map(|c| c * c).sum::<f64>().sqrt();
        Self { counts, norm }
    }

    fn cosine(&self, other: &Self) -> f64 {
        if self.norm == 0.0 || other.norm == 0.0 {
            return 0.0;
        }
        let (small, large) = if self.counts.len() <= other.counts.len() { (self, other) } else { (other, self) };
        let dot: f64 = small.counts.iter().filter_map(|(w, c)| large.counts.get(w).map(|d| c * d)).sum();
        dot / (self.norm * other.norm)
    }
}

/// Cosine similarity of two vectors (§7.7 `mmr`), computed in `f64`.
///
/// Returns `0.0` when the lengths differ, either vector is empty or has zero norm, or the
/// result is not finite, so a malformed vector never poisons a ranking.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let denom = na.sqrt() * nb.sqrt();
    let c = dot / denom;
    if denom == 0.0 || !c.is_finite() { 0.0 } else { c }
}

/// MMR over dense vectors with cosine similarity (§7.7 `mmr`).
///
/// `relevance[i]` is candidate `i`'s relevance to the query (any monotonic scale, e.g. the
/// query–document cosine); `vectors[i]` its vector. Only the first
/// `min(relevance.len(), vectors.len())` candidates are considered. Returns at most `k`
/// selected indices, in selection order. `lambda` is clamped to `[0, 1]` (`NaN` becomes 0.5,
/// the §7.7 default); validating it is the caller's job.
pub fn mmr<T, V>(relevance: &[T], vectors: &[V], lambda: f64, k: usize) -> Vec<usize>
where
    T: Copy + Into<f64>,
    V: AsRef<[f32]>,
{
    let n = relevance.len().min(vectors.len());
    mmr_with(&relevance[..n], lambda, k, |i, j| cosine(vectors[i].as_ref(), vectors[j].as_ref()))
}

/// MMR with a caller-supplied pairwise similarity (§7.7 `mmr`), for engines without vectors
/// (e.g. Jaccard over shingles).
///
/// `similarity(i, j)` is called only with `i != j`, both `< relevance.len()`; a `NaN`
/// similarity counts as `0`. Returns at most `k` selected indices, in selection order, ties
/// broken by the lower index. `lambda` is clamped to `[0, 1]` (`NaN` becomes 0.5). A `NaN`
/// relevance ranks below every number.
pub fn mmr_with<T, F>(relevance: &[T], lambda: f64, k: usize, mut similarity: F) -> Vec<usize>
where
    T: Copy + Into<f64>,
    F: FnMut(usize, usize) -> f64,
{
    let lambda = if lambda.is_nan() { 0.5 } else { lambda.clamp(0.0, 1.0) };
    let n = relevance.len();
    let k = k.min(n);
    let mut selected = Vec::with_capacity(k);
    let mut taken = vec![false; n];
    // Max similarity of each candidate to the selected set; meaningful once `selected` is
    // non-empty.
    let mut max_sim = vec![f64::NEG_INFINITY; n];

    while selected.len() < k {
        let mut best: Option<(usize, f64)> = None;
        for i in (0..n).filter(|&i| !taken[i]) {
            // Split terms so λ = 1 (or 0) ignores the other term entirely, even if infinite.
            let rel = if lambda == 0.0 { 0.0 } else { lambda * relevance[i].into() };
            let penalty = if lambda == 1.0 || selected.is_empty() { 0.0 } else { (1.0 - lambda) * max_sim[i] };
            let mut score = rel - penalty;
            if score.is_nan() {
                score = f64::NEG_INFINITY;
            }
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
        let Some((pick, _)) = best else { break };
        taken[pick] = true;
        selected.push(pick);
        if lambda < 1.0 && selected.len() < k {
            for i in (0..n).filter(|&i| !taken[i]) {
                let s = similarity(i, pick);
                let s = if s.is_nan() { 0.0 } else { s };
                max_sim[i] = max_sim[i].max(s);
            }
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diversify_uses_vectors_when_all_hits_have_them_and_words_otherwise() {
        let hit = |id: &str, score: f64, text: &str| Hit::new(id, score).with_text(text);
        // b repeats a; c is new. Scores on a fused scale (tiny): normalised before weighing.
        let hits = vec![
            hit("a", 0.033, "wing lift at low speed"),
            hit("b", 0.032, "Wing lift at low speed."),
            hit("c", 0.016, "boundary layer transition"),
        ];
        assert_eq!(diversify(&hits, 0.5, 2), (vec![0, 2], Likeness::Words));
        assert_eq!(diversify(&hits, 1.0, 2).0, vec![0, 1], "λ = 1 is relevance order");
        let mut with_vectors = hits.clone();
        for (h, v) in with_vectors.iter_mut().zip([[1.0f32, 0.0], [0.0, 1.0], [1.0, 0.0]]) {
            h.vector = Some(WireVector::Json(v.to_vec()));
        }
        // By vectors, c duplicates a and b does not: the texts no longer decide.
        assert_eq!(diversify(&with_vectors, 0.5, 2), (vec![0, 1], Likeness::Vectors));
        // Vectors of two dimensions (two embedding spaces) are not compared.
        with_vectors[2].vector = Some(WireVector::Json(vec![1.0, 0.0, 0.0]));
        assert_eq!(diversify(&with_vectors, 0.5, 2).1, Likeness::Words);
        assert!(diversify(&[], 0.5, 3).0.is_empty());
    }

    #[test]
    fn cosine_basics() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-12);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-12);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-12);
        assert!((cosine(&[3.0, 4.0], &[6.0, 8.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
        assert_eq!(cosine(&[f32::NAN, 1.0], &[1.0, 1.0]), 0.0);
        // f32::MAX components do not overflow into NaN/inf (computed in f64).
        assert!((cosine(&[f32::MAX, f32::MAX], &[f32::MAX, f32::MAX]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn lambda_one_is_pure_relevance_order() {
        let rel = [0.2, 0.9, 0.5, 0.9, 0.1];
        let vecs: Vec<Vec<f32>> = vec![vec![1.0, 0.0]; 5];
        // Ties (0.9 at 1 and 3) go to the lower index.
        assert_eq!(mmr(&rel, &vecs, 1.0, 5), vec![1, 3, 2, 0, 4]);
        assert_eq!(mmr(&rel, &vecs, 1.0, 2), vec![1, 3]);
        // Even an infinite similarity cannot disturb λ = 1.
        assert_eq!(mmr_with(&rel, 1.0, 5, |_, _| f64::INFINITY), vec![1, 3, 2, 0, 4]);
    }

    #[test]
    fn lambda_zero_picks_the_distinct_item_second() {
        // 0 and 1 are near-duplicates, 2 is orthogonal; relevance favours the duplicates.
        let rel = [0.95f32, 0.94, 0.30];
        let v0: &[f32] = &[1.0, 0.0];
        let v1: &[f32] = &[0.99, 0.01];
        let v2: &[f32] = &[0.0, 1.0];
        let picks = mmr(&rel, &[v0, v1, v2], 0.0, 3);
        assert_eq!(picks, vec![0, 2, 1]);
        // With λ = 1 the duplicate comes second.
        assert_eq!(mmr(&rel, &[v0, v1, v2], 1.0, 3), vec![0, 1, 2]);
        // A balanced λ still prefers the distinct item here.
        assert_eq!(mmr(&rel, &[v0, v1, v2], 0.5, 2), vec![0, 2]);
    }

    #[test]
    fn hand_computed_intermediate_lambda() {
        // rel = [1.0, 0.9, 0.6]; sim(0,1) = 0.8, sim(0,2) = 0.1, sim(1,2) = 0.0.
        let sim = |i: usize, j: usize| match (i.min(j), i.max(j)) {
            (0, 1) => 0.8,
            (0, 2) => 0.1,
            _ => 0.0,
        };
        let rel = [1.0, 0.9, 0.6];
        // λ = 0.6: first 0 (0.6). Then 1 -> 0.54 - 0.4*0.8 = 0.22; 2 -> 0.36 - 0.4*0.1 = 0.32.
        assert_eq!(mmr_with(&rel, 0.6, 3, sim), vec![0, 2, 1]);
        // λ = 0.9: then 1 -> 0.81 - 0.1*0.8 = 0.73; 2 -> 0.54 - 0.1*0.1 = 0.53.
        assert_eq!(mmr_with(&rel, 0.9, 3, sim), vec![0, 1, 2]);
    }

    #[test]
    fn exact_ties_go_to_the_lower_index() {
        // Every candidate scores the same at every step.
        assert_eq!(mmr_with(&[0.5, 0.5, 0.5, 0.5], 0.5, 4, |_, _| 0.2), vec![0, 1, 2, 3]);
        assert_eq!(mmr_with(&[0.1, 0.1, 0.1], 0.0, 3, |_, _| 1.0), vec![0, 1, 2]);
    }

    #[test]
    fn k_larger_than_n_and_empty_input() {
        let rel = [0.5, 0.4];
        let vecs = [vec![1.0f32, 0.0], vec![0.0, 1.0]];
        assert_eq!(mmr(&rel, &vecs, 0.5, 10), vec![0, 1]);
        let empty: [f64; 0] = [];
        let no_vecs: [Vec<f32>; 0] = [];
        assert!(mmr(&empty, &no_vecs, 0.5, 5).is_empty());
        assert!(mmr_with(&empty, 0.5, 5, |_, _| 0.0).is_empty());
        assert!(mmr(&rel, &vecs, 0.5, 0).is_empty());
        // Mismatched lengths: only the common prefix is considered.
        assert_eq!(mmr(&[0.1, 0.9, 0.8], &vecs, 1.0, 3), vec![1, 0]);
    }

    #[test]
    fn lambda_is_clamped_and_nan_is_safe() {
        let rel = [0.2, 0.9, 0.5];
        let vecs = vec![vec![1.0f32, 0.0]; 3];
        assert_eq!(mmr(&rel, &vecs, 7.0, 3), mmr(&rel, &vecs, 1.0, 3));
        assert_eq!(mmr(&rel, &vecs, -3.0, 3), mmr(&rel, &vecs, 0.0, 3));
        assert_eq!(mmr(&rel, &vecs, f64::NAN, 3), mmr(&rel, &vecs, 0.5, 3));
        // NaN relevance ranks last; NaN similarity counts as 0; every index is still returned once.
        let picks = mmr_with(&[f64::NAN, 0.3, 0.1], 0.5, 3, |_, _| f64::NAN);
        assert_eq!(picks, vec![1, 2, 0]);
    }

    #[test]
    fn similarity_is_never_called_on_the_diagonal() {
        let rel = [0.9, 0.8, 0.7, 0.6];
        let picks = mmr_with(&rel, 0.3, 4, |i, j| {
            assert_ne!(i, j);
            assert!(i < 4 && j < 4);
            0.5
        });
        let mut sorted = picks.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
    }
}
