//! `rcp-bm25 serve --scorer splade` over real pipes (issue #25): the learned-sparse scorer's
//! identity, ranking by SPLADE dot product (expansion terms match words a document never
//! wrote), deletes, restart on the same directory, and the refusals (another scorer on the
//! same index, a rewrite).

#![cfg(feature = "splade")]

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{add, ids, serve_dir, tempdir};
use rcp_bm25::splade::{IDENTITY_KEY, MODEL};
use rcp_testkit::code;
use serde_json::{Value, json};

fn model_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = MODEL.default_dir();
        MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision SPLADE");
        dir
    })
}

fn splade_args(extra: &[&'static str]) -> Vec<&'static str> {
    let dir: &'static str = model_dir().to_str().expect("utf-8 path");
    let mut args = vec!["--scorer", "splade", "--splade-model-dir", dir];
    args.extend_from_slice(extra);
    args
}

fn scores(r: &Value) -> Vec<f64> {
    r["hits"].as_array().expect("hits").iter().map(|h| h["score"].as_f64().expect("score")).collect()
}

#[test]
fn ranks_by_learned_sparse_dot_product_and_keeps_deletes_across_restarts() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &splade_args(&["--create", "--field", "year:int"]));
    let cap = e.ok("info", json!({}))["capabilities"]["retrieve"].clone();
    assert_eq!(cap["scoreScale"], json!("dot"), "{cap}");
    assert_eq!(cap["scoreFloor"], json!(0.0), "{cap}");
    assert_eq!(cap[IDENTITY_KEY], json!(MODEL.identity), "{cap}");
    add(
        &mut e,
        &[
            ("paris", "Paris is the capital of France.", json!({"year": 2001})),
            ("plate", "The boundary layer of a flat plate in supersonic flow.", json!({"year": 1999})),
            ("banana", "Bananas are rich in potassium.", json!({"year": 2005})),
        ],
    );
    // "city" is in no document: SPLADE expands the Paris document with it.
    let r = e.ok("retrieve", json!({"query": "which city is the french capital", "k": 3}));
    assert_eq!(ids(&r).first().map(String::as_str), Some("paris"), "{r}");
    let s = scores(&r);
    assert!(s.windows(2).all(|w| w[0] >= w[1]) && s.iter().all(|x| *x >= 0.0), "{s:?}");
    let r = e.ok("retrieve", json!({"query": "boundary layer", "k": 1}));
    assert_eq!(ids(&r), ["plate"], "{r}");
    // Filters wrap the learned-sparse query like the BM25 one.
    let r = e.ok(
        "retrieve",
        json!({"query": "capital of france", "k": 3, "filter": {"field": "year", "op": "gte", "value": 2002}}),
    );
    assert!(!ids(&r).contains(&"paris".to_owned()), "{r}");
    // A rewrite is BM25's RM3: refused here, precisely.
    let err = e.err("retrieve", json!({"query": "capital", "rewrite": {"method": "rewrite"}}));
    assert_eq!(code(&err), -32602, "{err}");

    let r = e.ok("index/delete", json!({"ids": ["paris"]}));
    assert_eq!(r["deleted"], json!(1));
    let r = e.ok("retrieve", json!({"query": "capital of france", "k": 3}));
    assert!(!ids(&r).contains(&"paris".to_owned()), "deleted documents are not served: {r}");
    let before = e.ok("retrieve", json!({"query": "supersonic flow over a plate", "k": 3}));
    drop(e);

    // Restart: the expansions were committed with the documents.
    let mut e = serve_dir(dir.path(), &splade_args(&[]));
    let after = e.ok("retrieve", json!({"query": "supersonic flow over a plate", "k": 3}));
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(scores(&after), scores(&before));
    let r = e.ok("retrieve", json!({"query": "capital of france", "k": 3}));
    assert!(!ids(&r).contains(&"paris".to_owned()), "the delete survived the restart: {r}");
    drop(e);

    // The index is served only with the scorer it was built with.
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--data-dir", dir.path().to_str().expect("utf-8")])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rcp-bm25");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--scorer splade"), "{stderr}");
}
