//! Retrieval evaluation: BEIR test collections and the IR metrics the `rcpctl eval` command and
//! the benchmarks report (nDCG@10, Recall@50, Recall@100, MRR@10).
//!
//! A [`Collection`] is a BEIR directory: `corpus.jsonl`, `queries.jsonl` and graded judgements
//! in `qrels/test.tsv` (or `qrels.tsv`). [`evaluate`] scores rankings (query id → ranked doc
//! ids) against them; queries without judgements count as 0, as the published figures do.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
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

/// Why a collection could not be loaded; names the file and line at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A file could not be read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error, printed in this message (so not also its `source`: a cause chain
        /// would print it twice).
        cause: std::io::Error,
    },
    /// A line is malformed.
    #[error("{file}:{line}: {detail}")]
    Line {
        /// The file (relative to the collection).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
}

impl Collection {
    /// Loads `queries.jsonl` and the judgements (`qrels/test.tsv`, else `qrels.tsv`) of a BEIR
    /// directory; the corpus is only located, not read.
    pub fn load(dir: &Path) -> Result<Self, EvalError> {
        let read = |path: PathBuf| std::fs::read_to_string(&path).map_err(|cause| EvalError::Io { path, cause });
        let mut queries = Vec::new();
        for (i, line) in read(dir.join("queries.jsonl"))?.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |detail: String| EvalError::Line { file: "queries.jsonl".into(), line: i + 1, detail };
            let v: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            let id = match &v["_id"] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(bad("no _id".into())),
            };
            let text = v["text"].as_str().ok_or_else(|| bad("no text".into()))?.to_owned();
            queries.push((id, text));
        }
        let nested = dir.join("qrels").join("test.tsv");
        let (qrels_path, qrels_name) =
            if nested.is_file() { (nested, "qrels/test.tsv") } else { (dir.join("qrels.tsv"), "qrels.tsv") };
        let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
        for (i, line) in read(qrels_path)?.lines().enumerate() {
            let cols: Vec<&str> = line.split('\t').collect();
            if i == 0 && cols.first() == Some(&"query-id") || cols.len() < 3 {
                continue;
            }
            let grade: i64 = cols[2].trim().parse().map_err(|e| EvalError::Line {
                file: qrels_name.into(),
                line: i + 1,
                detail: format!("grade '{}': {e}", cols[2].trim()),
            })?;
            if grade > 0 {
                qrels.entry(cols[0].to_owned()).or_default().insert(cols[1].to_owned(), grade as u32);
            }
        }
        Ok(Self { corpus: dir.join("corpus.jsonl"), queries, qrels })
    }

    /// Keeps the first `n` queries (in file order), for a fast subset.
    pub fn limit(mut self, n: usize) -> Self {
        self.queries.truncate(n);
        self
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

/// Mean nDCG@10, Recall@50, Recall@100 and MRR@10 over every query of a collection (nDCG@10
/// and Recall@50 are what Appendix F says a harness comparing engines SHOULD report).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scores {
    /// Mean nDCG@10.
    #[serde(rename = "ndcg@10")]
    pub ndcg10: f64,
    /// Mean Recall@50.
    #[serde(rename = "recall@50")]
    pub recall50: f64,
    /// Mean Recall@100.
    #[serde(rename = "recall@100")]
    pub recall100: f64,
    /// Mean MRR@10.
    #[serde(rename = "mrr@10")]
    pub mrr10: f64,
    /// Number of queries averaged.
    pub queries: usize,
}

/// Scores rankings (query id → ranked doc ids) against the collection's judgements; queries
/// without judgements or without a ranking count as 0.
pub fn evaluate(c: &Collection, rankings: &HashMap<String, Vec<String>>) -> Scores {
    let empty = HashMap::new();
    let (mut n, mut r50, mut r100, mut m) = (0.0, 0.0, 0.0, 0.0);
    for (qid, _) in &c.queries {
        let judged = c.qrels.get(qid).unwrap_or(&empty);
        let ranked = rankings.get(qid).map(Vec::as_slice).unwrap_or(&[]);
        n += ndcg_at(ranked, judged, 10);
        r50 += recall_at(ranked, judged, 50);
        r100 += recall_at(ranked, judged, 100);
        m += mrr_at(ranked, judged, 10);
    }
    let q = c.queries.len().max(1) as f64;
    Scores { ndcg10: n / q, recall50: r50 / q, recall100: r100 / q, mrr10: m / q, queries: c.queries.len() }
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
    fn recall_and_mrr() {
        let j = judged(&[("a", 1), ("b", 2)]);
        assert_eq!(recall_at(&ids(&["x", "a"]), &j, 100), 0.5);
        assert_eq!(mrr_at(&ids(&["x", "y", "b"]), &j, 10), 1.0 / 3.0);
        assert_eq!(mrr_at(&ids(&["x", "y", "b"]), &j, 2), 0.0);
    }

    #[test]
    fn recall_at_50_counts_only_the_top_50() {
        // Two judged documents: one at rank 1, one at rank 60.
        let at = |rank: usize| match rank {
            1 => "a".to_owned(),
            60 => "b".to_owned(),
            _ => format!("d{rank}"),
        };
        let ranked: Vec<String> = (1..=100).map(at).collect();
        let c = Collection {
            corpus: PathBuf::new(),
            queries: vec![("q".into(), "text".into())],
            qrels: HashMap::from([("q".to_owned(), judged(&[("a", 1), ("b", 1)]))]),
        };
        let s = evaluate(&c, &HashMap::from([("q".to_owned(), ranked)]));
        assert_eq!((s.recall50, s.recall100), (0.5, 1.0));
        let v = serde_json::to_value(s).unwrap();
        assert_eq!((v["recall@50"].as_f64(), v["recall@100"].as_f64()), (Some(0.5), Some(1.0)));
    }

    #[test]
    fn loads_both_qrels_layouts_and_names_bad_lines() {
        let dir = std::env::temp_dir().join(format!("rcp-eval-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("qrels")).unwrap();
        std::fs::write(
            dir.join("queries.jsonl"),
            "{\"_id\":1,\"text\":\"wing\"}\n\n{\"_id\":\"2\",\"text\":\"lift\"}\n",
        )
        .unwrap();
        std::fs::write(dir.join("qrels.tsv"), "query-id\tcorpus-id\tscore\n1\td1\t2\n2\td2\t0\n").unwrap();
        let c = Collection::load(&dir).unwrap();
        assert_eq!(c.queries, vec![("1".into(), "wing".into()), ("2".into(), "lift".into())]);
        assert_eq!(c.qrels.len(), 1, "grade 0 is not relevant");
        std::fs::write(dir.join("qrels").join("test.tsv"), "1\td9\tx\n").unwrap();
        let e = Collection::load(&dir).unwrap_err().to_string();
        assert!(e.starts_with("qrels/test.tsv:1: grade 'x'"), "{e}");
        let rankings = HashMap::from([("1".to_owned(), ids(&["d1"]))]);
        std::fs::write(dir.join("qrels").join("test.tsv"), "1\td1\t1\n").unwrap();
        let s = evaluate(&Collection::load(&dir).unwrap().limit(1), &rankings);
        assert_eq!((s.ndcg10, s.recall50, s.recall100, s.mrr10, s.queries), (1.0, 1.0, 1.0, 1.0, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
