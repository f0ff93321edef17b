//! `rcp-bm25 serve --rerank cross-encoder` over real pipes (the built-in corpus): the inline
//! rerank stage of `retrieve` (§7.7) with the real cross-encoder, its opt-out, its errors, and a
//! missing model refused at start with the command that provisions it.
#![cfg(feature = "rerank")]

use std::process::Command;

use rcp_rerank::MODEL;
use rcp_testkit::{Engine, code};
use serde_json::json;

mod common;
use common::{bin, ids};

const QUERY: &str = "how do sparse and dense retrieval differ";

fn serve(extra: &[&str]) -> Engine {
    let dir = MODEL.default_dir();
    MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the cross-encoder");
    let mut args = vec!["serve", "--rerank", "cross-encoder", "--rerank-model-dir", dir.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    Engine::spawn(bin(), &args)
}

#[test]
fn retrieve_reranks_the_candidates_with_the_cross_encoder() {
    let mut e = serve(&[]);
    let init = e.initialize();
    let caps = &init["capabilities"];
    assert_eq!(caps["retrieve"]["rerankBuiltin"], json!(true), "{init}");
    assert_eq!(caps["rerank"]["methods"], json!(["cross-encoder"]), "{init}");
    // Small funnels keep the test quick on a loaded machine: 5 candidates, all rescored.
    let plain = e.ok("retrieve", json!({"query": QUERY, "k": 5, "rerank": false}));
    assert!(plain["usage"].get("reranked").is_none(), "{plain}");
    // `fusion: "none"`: the reranker's order and score alone (the default fuses it with BM25's).
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 3, "candidateK": 5, "rerank": {"topN": 5, "fusion": "none"}}));
    assert_eq!((&r["usage"]["reranked"], r["hits"].as_array().map(Vec::len)), (&json!(5), Some(3)), "{r}");
    let reranked = ids(&r);
    let first = ids(&plain);
    assert!(reranked.iter().all(|id| first.contains(id)), "the best 3 come from the 5 candidates: {r} {plain}");
    let scores: Vec<f64> =
        r["hits"].as_array().into_iter().flatten().map(|h| h["score"].as_f64().unwrap_or(0.0)).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "ordered by the reranker: {r}");
    for h in r["hits"].as_array().into_iter().flatten() {
        assert_eq!(h["score"], h["scores"]["rerank"], "{h}");
        assert!(h["scores"]["sparse"].as_f64().is_some_and(|s| s > 0.0), "the BM25 score kept: {h}");
    }
    // The same request again gives the same answer (one pair per run: no batch effects).
    let again =
        e.ok("retrieve", json!({"query": QUERY, "k": 3, "candidateK": 5, "rerank": {"topN": 5, "fusion": "none"}}));
    assert_eq!(ids(&again), reranked);
    // colbert is not loaded: -32005 naming the option.
    let err = e.err("retrieve", json!({"query": QUERY, "k": 1, "candidateK": 5, "rerank": {"method": "colbert"}}));
    assert_eq!((code(&err), &err["data"]["option"]), (-32005, &json!("rerank.method")), "{err}");
    let err = e.err("retrieve", json!({"query": QUERY, "k": 3, "rerank": {"topN": 2}}));
    assert_eq!(code(&err), -32602, "{err}");
}

#[test]
fn a_missing_model_stops_serve_naming_the_provisioning_command() {
    let empty = tempfile::tempdir().expect("tempdir");
    let out = Command::new(bin())
        .args(["serve", "--rerank", "cross-encoder", "--rerank-model-dir"])
        .arg(empty.path())
        .output()
        .expect("run serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rcp-rerank fetch-model") && err.contains("--rerank-fetch-model"), "{err}");
}
