//! Ranking sanity on Cranfield: the `index` command builds the index from the BEIR corpus,
//! `serve` answers judged queries, and judged-relevant documents rank in the top 10.

mod common;

use std::process::Command;

use common::{bin, cranfield_dir, ids, load_queries, serve_dir, tempdir};
use serde_json::json;

#[test]
fn judged_relevant_documents_rank_in_the_top_10() {
    let Some(cran) = cranfield_dir() else { return };
    let dir = tempdir();
    let out = Command::new(bin())
        .arg("index")
        .arg("--data-dir")
        .arg(dir.path())
        .arg(cran.join("corpus.jsonl"))
        .output()
        .expect("run index");
    assert!(out.status.success(), "index failed: {}", String::from_utf8_lossy(&out.stderr));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("indexed 1400 documents (0 skipped)"), "{summary}");
    assert!(summary.contains("docs/s"), "{summary}");

    let (queries, qrels) = load_queries(&cran);
    let mut e = serve_dir(dir.path(), &[]);
    let judged: Vec<&(String, String)> = queries.iter().filter(|(id, _)| qrels.contains_key(id)).take(40).collect();
    let mut found = 0;
    for (qid, text) in &judged {
        let r = e.ok("retrieve", json!({"query": text, "k": 10, "includeText": false}));
        if ids(&r).iter().any(|d| qrels[qid].contains(d)) {
            found += 1;
        }
    }
    assert!(
        found * 10 >= judged.len() * 7,
        "only {found}/{} judged queries have a relevant doc in the top 10",
        judged.len()
    );

    // Two hand-checked examples: the titles name exactly what the queries ask for.
    let r = e.ok("retrieve", json!({"query": "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft", "k": 10}));
    assert!(ids(&r).iter().any(|d| qrels["1"].contains(d)), "{:?}", ids(&r));
    assert_eq!(r["hits"][0]["citation"]["source"], "corpus.jsonl");
}
