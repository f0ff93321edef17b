//! ColBERT's document matrices stored at indexing (`rcp-dense index --colbert`) and read by
//! `serve --rerank colbert`: a rerank of stored documents encodes no passage (the matrix file
//! does not grow), a document added later is encoded at its first rerank and kept, and a
//! peer's own `rerank` passages are never kept.
#![cfg(feature = "rerank")]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{bin, model_dir, serve};
use rcp_rerank::{COLBERT_MODEL, MATRIX_FILE};
use serde_json::{Value, json};

const QUERY: &str = "supersonic flow over a wing";

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn rerank_scores(r: &Value) -> Vec<(String, f64)> {
    r["hits"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| (h["id"].as_str().unwrap_or_default().to_owned(), h["scores"]["rerank"].as_f64().unwrap_or(f64::NAN)))
        .collect()
}

#[test]
fn matrices_stored_at_indexing_are_used_and_only_the_engines_documents_are_kept() {
    let colbert_dir = COLBERT_MODEL.default_dir();
    COLBERT_MODEL.locate_or_fetch(&colbert_dir, &mut |m| eprintln!("provision: {m}")).expect("provision ColBERT");
    let colbert_dir = colbert_dir.to_str().expect("utf-8 path");
    let tmp = tempfile::tempdir().expect("tempdir");
    let corpus = tmp.path().join("corpus.jsonl");
    let docs = common::topical_documents();
    let lines: Vec<String> = docs.as_array().expect("documents").iter().map(|d| d.to_string()).collect();
    std::fs::write(&corpus, lines.join("\n")).expect("write corpus");
    let data = tmp.path().join("data");
    let data_str = data.to_str().expect("utf-8 path");
    let out = Command::new(bin())
        .args(["index", "--data-dir", data_str, "--colbert", "--colbert-model-dir", colbert_dir])
        .arg(&corpus)
        .env("RCP_MODEL_DIR", model_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run index");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("ColBERT: encoded 12 documents"), "{stderr}");
    let file = data.join(MATRIX_FILE);
    let indexed = size(&file);
    assert!(indexed > 12 * 388, "twelve matrices of a few token rows each: {indexed} bytes");

    let mut e = serve(&["--data-dir", data_str, "--rerank", "colbert", "--colbert-model-dir", colbert_dir]);
    let asked = json!({"query": QUERY, "k": 4, "candidateK": 12, "rerank": {"topN": 12, "fusion": "none"}});
    let first = e.ok("retrieve", asked.clone());
    assert_eq!(first["usage"]["reranked"], json!(12), "{first}");
    assert_eq!(size(&file), indexed, "every candidate's matrix was stored at indexing: none encoded again");
    assert!(rerank_scores(&first)[0].0.starts_with("wing-"), "{first}");

    // A peer's passages are scored, never kept.
    e.ok("rerank", json!({"query": QUERY, "passages": ["A passage no document holds."], "method": "colbert"}));
    assert_eq!(size(&file), indexed, "a rerank call's passages are not kept");

    // A document added while serving is encoded at its first rerank and kept.
    e.ok("index/add", json!({"documents": [{"id": "wing-new", "text": "Shock waves on a supersonic wing."}]}));
    let second =
        e.ok("retrieve", json!({"query": QUERY, "k": 13, "candidateK": 13, "rerank": {"topN": 13, "fusion": "none"}}));
    assert_eq!(second["usage"]["reranked"], json!(13), "{second}");
    let grown = size(&file);
    assert!(grown > indexed, "the new document's matrix was kept");
    let third =
        e.ok("retrieve", json!({"query": QUERY, "k": 13, "candidateK": 13, "rerank": {"topN": 13, "fusion": "none"}}));
    assert_eq!(size(&file), grown, "kept once");
    assert_eq!(rerank_scores(&second), rerank_scores(&third), "a stored matrix scores as the fresh one did");
    drop(e);

    // A restart reads the file back: nothing to encode, same scores.
    let mut e = serve(&["--data-dir", data_str, "--rerank", "colbert", "--colbert-model-dir", colbert_dir]);
    let again =
        e.ok("retrieve", json!({"query": QUERY, "k": 13, "candidateK": 13, "rerank": {"topN": 13, "fusion": "none"}}));
    assert_eq!(rerank_scores(&again), rerank_scores(&third));
    assert_eq!(size(&file), grown);
}
