//! BEIR collections and IR metrics.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A test collection: queries and graded judgements (`qrels`).
#[derive(Debug, Clone)]
pub struct Collection {
    /// The corpus file (`corpus.jsonl`).
    pub corpus: PathBuf,
    /// `(query id, text)` in file order.
    pub queries: Vec<(String, String)>,
    /// query id → (doc id → grade > 0).
    pub qrels: HashMap<String, HashMap<String, u32>>,
}

/// The default location of Cranfield beside the workspace (`RCP_CRANFIELD` overrides).
pub fn cranfield_dir() -> PathBuf {
    std::env::var("RCP_CRANFIELD")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cranfield"))
}

impl Collection {
    /// Loads `corpus.jsonl`, `queries.jsonl` and `qrels.tsv` from a BEIR directory.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        let mut queries = Vec::new();
        for (i, line) in read("queries.jsonl")?.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| format!("queries.jsonl:{}: {e}", i + 1))?;
            let id = match &v["_id"] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(format!("queries.jsonl:{}: no _id", i + 1)),
            };
            let text = v["text"].as_str().ok_or_else(|| format!("queries.jsonl:{}: no text", i + 1))?.to_owned();
            queries.push((id, text));
        }
        let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
        for (i, line) in read("qrels.tsv")?.lines().enumerate() {
            let cols: Vec<&str> = line.split('\t').collect();
            if i == 0 && cols.first() == Some(&"query-id") || cols.len() < 3 {
                continue;
            }
            let grade: i64 = cols[2].trim().parse().map_err(|e| format!("qrels.tsv:{}: {e}", i + 1))?;
            if grade > 0 {
                qrels.entry(cols[0].to_owned()).or_default().insert(cols[1].to_owned(), grade as u32);
            }
        }
        Ok(Self { corpus: dir.join("corpus.jsonl"), queries, qrels })
    }
}

/// nDCG@k with gain `2^g - 1` and discount `log2(rank + 1)`; 0 when nothing is relevant.
pub fn ndcg_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let gain = |g: u32| 2f64.powi(g as i32) - 1.0;
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| judged.get(id).map_or(0.0, |g| gain(*g) / ((i + 2) as f64).log2()))
        .sum();
    let mut ideal: Vec<u32> = judged.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, g)| gain(*g) / ((i + 2) as f64).log2()).sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

/// Recall@k: judged-relevant documents found in the top k over all judged-relevant ones.
pub fn recall_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    if judged.is_empty() {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|id| judged.contains_key(*id)).count();
    found as f64 / judged.len() as f64
}

/// MRR@k: reciprocal rank of the first relevant document within the top k.
pub fn mrr_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    ranked.iter().take(k).position(|id| judged.contains_key(id)).map_or(0.0, |p| 1.0 / (p + 1) as f64)
}

/// Mean nDCG@10, Recall@100 and MRR@10 over every query of the collection (queries without
/// judgements count as 0, as the reference figures do).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    /// Mean nDCG@10.
    pub ndcg10: f64,
    /// Mean Recall@100.
    pub recall100: f64,
    /// Mean MRR@10.
    pub mrr10: f64,
    /// Number of queries averaged.
    pub queries: usize,
}

/// Scores rankings (query id → ranked doc ids) against the collection's judgements.
pub fn evaluate(c: &Collection, rankings: &HashMap<String, Vec<String>>) -> Scores {
    let empty = HashMap::new();
    let (mut n, mut r, mut m) = (0.0, 0.0, 0.0);
    for (qid, _) in &c.queries {
        let judged = c.qrels.get(qid).unwrap_or(&empty);
        let ranked = rankings.get(qid).map(Vec::as_slice).unwrap_or(&[]);
        n += ndcg_at(ranked, judged, 10);
        r += recall_at(ranked, judged, 100);
        m += mrr_at(ranked, judged, 10);
    }
    let q = c.queries.len().max(1) as f64;
    Scores { ndcg10: n / q, recall100: r / q, mrr10: m / q, queries: c.queries.len() }
}

/// The `p`-th percentile (0–100) of `samples` (sorted in place), nearest-rank.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    samples[rank.min(samples.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(d, g)| ((*d).to_owned(), *g)).collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn ndcg_hand_computed() {
        let j = judged(&[("a", 3), ("b", 1)]);
        assert!((ndcg_at(&ids(&["a", "b"]), &j, 10) - 1.0).abs() < 1e-12);
        // b first: dcg = 1/log2(2) + 7/log2(3); idcg = 7 + 1/log2(3)
        let expected = (1.0 + 7.0 / 3f64.log2()) / (7.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ids(&["b", "a"]), &j, 10) - expected).abs() < 1e-12);
        assert_eq!(ndcg_at(&ids(&["x"]), &j, 10), 0.0);
    }

    #[test]
    fn recall_mrr_percentile() {
        let j = judged(&[("a", 1), ("b", 2)]);
        assert_eq!(recall_at(&ids(&["x", "a"]), &j, 100), 0.5);
        assert_eq!(mrr_at(&ids(&["x", "y", "b"]), &j, 10), 1.0 / 3.0);
        assert_eq!(mrr_at(&ids(&["x", "y", "b"]), &j, 2), 0.0);
        let mut s = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&mut s, 50.0), 3.0);
        assert_eq!(percentile(&mut s, 99.0), 5.0);
    }

    #[test]
    fn cranfield_loads_when_present() {
        let dir = cranfield_dir();
        if !dir.exists() {
            return;
        }
        let c = Collection::load(&dir).unwrap();
        assert_eq!(c.queries.len(), 225);
        assert!(c.qrels.len() > 200);
    }
}
