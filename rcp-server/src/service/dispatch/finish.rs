//! Result finishing: what the framework guarantees about every handler's answer whatever the
//! engine returned — at most `k` unique hits (§7.7), finite numbers, vector counts, dimensions
//! and encodings (§7.3.1), rerank order (§7.6), and notes.

use std::collections::HashSet;

use rcp_wire::rerank::{RerankEntry, RerankResult};
use rcp_wire::retrieve::WireVector;
use rcp_wire::vectors::encode_f32_base64;
use rcp_wire::{Hit, Meta, RcpError, RetrieveResult};
use serde_json::Value;
use tokio::time::Instant;

/// About how many bytes a `retrieve` result serialises to: its texts plus a few hundred bytes
/// of fields per hit.
pub(crate) fn retrieve_size(res: &RetrieveResult) -> usize {
    res.hits.iter().map(|h| h.text.as_ref().map_or(0, String::len) + 320).sum::<usize>() + 256
}

/// Maps NaN and infinities to the nearest finite value, so every score is valid JSON.
pub(crate) fn finite(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        f64::MIN
    } else if x == f64::INFINITY {
        f64::MAX
    } else {
        x
    }
}

/// `_meta.notes` for results without a `usage` object, or `None` when there is nothing to say.
pub(crate) fn notes_meta(notes: Vec<String>) -> Option<Meta> {
    if notes.is_empty() {
        return None;
    }
    let mut m = Meta::new();
    m.insert("notes".into(), Value::from(notes));
    Some(m)
}

/// Fails with `-32603` unless the engine answered `expected` items (`what`: "scores", ...).
pub(crate) fn check_count(got: usize, expected: usize, what: &str, per: &str) -> Result<(), RcpError> {
    if got == expected {
        return Ok(());
    }
    Err(RcpError::internal(format!("engine returned {got} {what} for {expected} {per}")))
}

/// Checks count, dimension and finiteness, then applies the encoding (§7.3.1).
pub(crate) fn encode_vectors(
    vectors: Vec<Vec<f32>>,
    expected: usize,
    dimension: usize,
    encoding: &str,
    what: &str,
) -> Result<(Vec<WireVector>, Option<String>), RcpError> {
    check_count(vectors.len(), expected, what, "inputs")?;
    if let Some(i) = vectors.iter().position(|v| v.len() != dimension) {
        return Err(RcpError::internal(format!(
            "{what}[{i}] has {} components, expected {dimension}",
            vectors[i].len()
        )));
    }
    if let Some(i) = vectors.iter().position(|v| v.iter().any(|x| !x.is_finite())) {
        return Err(RcpError::internal(format!("{what}[{i}] contains a non-finite component")));
    }
    Ok(if encoding == "f32-base64" {
        (vectors.iter().map(|v| WireVector::Base64(encode_f32_base64(v))).collect(), Some(encoding.to_owned()))
    } else {
        (vectors.into_iter().map(WireVector::Json).collect(), None)
    })
}

/// Keeps the first hit of each id, then the first `k` hits.
pub(crate) fn dedup_truncate(hits: &mut Vec<Hit>, k: usize) {
    let mut seen = HashSet::new();
    hits.retain(|h| seen.insert(h.key()));
    hits.truncate(k);
}

/// Enforces what every `retrieve` result must satisfy: at most `k` hits, unique ids, finite
/// numbers, `confidence` in `[0,1]`, notes and latency (§7.7).
pub(crate) fn finish_retrieve(res: &mut RetrieveResult, k: usize, notes: Vec<String>, started: Instant) {
    dedup_truncate(&mut res.hits, k);
    for h in &mut res.hits {
        h.score = finite(h.score);
        h.confidence = h.confidence.filter(|c| c.is_finite()).map(|c| c.clamp(0.0, 1.0));
        if let Some(s) = h.scores.as_mut() {
            s.retain(|_, v| v.is_finite());
        }
    }
    if !notes.is_empty() {
        let usage = res.usage.get_or_insert_with(Default::default);
        for n in notes {
            if !usage.notes.contains(&n) {
                usage.notes.push(n);
            }
        }
    }
    let usage = res.usage.get_or_insert_with(Default::default);
    if usage.latency_ms.is_none() {
        usage.latency_ms = Some(millis(started));
    }
}

/// Builds a `rerank` result from per-passage scores: finite scores in input order, `order` and
/// `results` by descending score (ties by input position), cut to `topN` (§7.6).
pub(crate) fn finish_rerank(
    scores: Vec<f64>,
    top_n: Option<usize>,
    notes: Vec<String>,
    started: Instant,
) -> RerankResult {
    let scores: Vec<f64> = scores.into_iter().map(finite).collect();
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    if let Some(n) = top_n {
        order.truncate(n);
    }
    let results = order.iter().map(|&i| RerankEntry { index: i, score: scores[i] }).collect();
    let usage = rcp_wire::Usage {
        reranked: Some(scores.len() as u64),
        latency_ms: Some(millis(started)),
        notes,
        ..Default::default()
    };
    RerankResult { scores, order: Some(order), results: Some(results), usage: Some(usage), meta: None }
}

fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_become_finite() {
        assert_eq!(finite(f64::NAN), f64::MIN);
        assert_eq!(finite(f64::NEG_INFINITY), f64::MIN);
        assert_eq!(finite(f64::INFINITY), f64::MAX);
        assert_eq!(finite(0.5), 0.5);
    }

    #[test]
    fn retrieve_results_are_deduplicated_truncated_and_annotated() {
        let mut res = RetrieveResult::from_hits(vec![
            Hit::new("a", f64::NAN),
            Hit::new("a", 2.0),
            Hit::new("b", 1.0),
            Hit::new("c", 0.5),
        ]);
        finish_retrieve(&mut res, 2, vec!["k clamped".into(), "k clamped".into()], Instant::now());
        let ids: Vec<String> = res.hits.iter().map(Hit::key).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(res.hits[0].score, f64::MIN);
        let usage = res.usage.unwrap_or_default();
        assert_eq!(usage.notes, ["k clamped"]);
        assert!(usage.latency_ms.is_some());
    }

    #[test]
    fn rerank_orders_by_score_then_position() {
        let r = finish_rerank(vec![0.1, f64::NAN, 0.9, 0.9], Some(3), Vec::new(), Instant::now());
        assert_eq!(r.order, Some(vec![2, 3, 0]));
        assert_eq!(r.scores[1], f64::MIN);
        assert_eq!(r.usage.and_then(|u| u.reranked), Some(4));
    }

    #[test]
    fn vectors_are_checked_then_encoded() {
        let ok = encode_vectors(vec![vec![1.0, 2.0]], 1, 2, "json", "vectors");
        assert!(matches!(ok, Ok((ref v, None)) if v.len() == 1));
        let b64 = encode_vectors(vec![vec![1.0, 2.0]], 1, 2, "f32-base64", "vectors");
        assert!(matches!(b64, Ok((_, Some(ref e))) if e == "f32-base64"));
        assert!(encode_vectors(vec![vec![1.0]], 1, 2, "json", "vectors").is_err());
        assert!(encode_vectors(vec![vec![f32::NAN, 0.0]], 1, 2, "json", "vectors").is_err());
        assert!(encode_vectors(Vec::new(), 1, 2, "json", "vectors").is_err());
    }

    #[test]
    fn notes_go_to_meta_only_when_present() {
        assert!(notes_meta(Vec::new()).is_none());
        assert!(notes_meta(vec!["x".into()]).is_some_and(|m| m.contains_key("notes")));
    }
}
