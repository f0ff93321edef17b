//! `rcp-dense serve --rerank colbert` over real pipes (the built-in corpus): the framework's
//! rerank stage of `retrieve` (§7.7) behind the dense recall stage, with the real ColBERT
//! model; the first-stage cosine is kept beside the reranker's score.
#![cfg(feature = "rerank")]

use rcp_rerank::COLBERT_MODEL;
use rcp_testkit::code;
use serde_json::{Value, json};

mod common;
use common::serve;

const QUERY: &str = "how do sparse and dense retrieval differ";

fn ids(r: &Value) -> Vec<String> {
    r["hits"].as_array().into_iter().flatten().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect()
}

#[test]
fn dense_candidates_are_reranked_by_colbert_and_keep_their_cosine() {
    let dir = COLBERT_MODEL.default_dir();
    COLBERT_MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision ColBERT");
    let mut e = serve(&["--rerank", "colbert", "--colbert-model-dir", dir.to_str().expect("utf-8")]);
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    assert_eq!(caps["retrieve"]["rerankBuiltin"], json!(true), "{caps}");
    assert_eq!(caps["rerank"]["methods"], json!(["colbert"]), "{caps}");
    let plain = e.ok("retrieve", json!({"query": QUERY, "k": 6, "rerank": false}));
    assert!(plain["usage"].get("reranked").is_none(), "{plain}");
    // `fusion: "none"`: the reranker's order and score alone (the default fuses it with recall's).
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 3, "candidateK": 6, "rerank": {"topN": 6, "fusion": "none"}}));
    assert_eq!((&r["usage"]["reranked"], r["hits"].as_array().map(Vec::len)), (&json!(6), Some(3)), "{r}");
    let first = ids(&plain);
    assert!(ids(&r).iter().all(|id| first.contains(id)), "the best 3 come from the 6 candidates: {r} {plain}");
    let mut last = f64::INFINITY;
    for h in r["hits"].as_array().into_iter().flatten() {
        assert_eq!(h["score"], h["scores"]["rerank"], "{h}");
        let maxsim = h["score"].as_f64().expect("a score");
        assert!(maxsim <= last, "ordered by MaxSim: {r}");
        last = maxsim;
        let cosine = h["scores"]["dense"].as_f64().expect("the dense score kept");
        assert!((-1.0..=1.0).contains(&cosine), "{h}");
    }
    // The cross-encoder is not loaded: -32005 naming the option.
    let err = e.err("retrieve", json!({"query": QUERY, "k": 1, "rerank": {"method": "cross-encoder"}}));
    assert_eq!((code(&err), &err["data"]["option"]), (-32005, &json!("rerank.method")), "{err}");
}
