//! Shared helpers of the integration tests: the binary, temp data dirs, small corpora.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rcp_testkit::Engine;
use serde_json::{Value, json};

/// The `rcp-bm25` binary under test.
pub(crate) fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rcp-bm25"))
}

/// A fresh temporary directory, removed on drop.
pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rcp-bm25-test").tempdir().expect("tempdir")
}

/// Spawns `rcp-bm25 serve` with `args` and runs `initialize`.
pub(crate) fn serve(args: &[&str]) -> Engine {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut e = Engine::spawn(bin(), &all);
    e.initialize();
    e
}

/// Spawns `serve --data-dir DIR` plus `args`.
pub(crate) fn serve_dir(dir: &Path, args: &[&str]) -> Engine {
    let d = dir.to_str().expect("utf-8 path");
    let mut all = vec!["--data-dir", d];
    all.extend_from_slice(args);
    serve(&all)
}

/// Hit ids of a retrieve result, in order.
pub(crate) fn ids(result: &Value) -> Vec<String> {
    result["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("string id").to_owned()).collect()
}

/// `index/add` of `(id, text, meta)` triples; returns the result.
pub(crate) fn add(e: &mut Engine, docs: &[(&str, &str, Value)]) -> Value {
    let documents: Vec<Value> =
        docs.iter().map(|(id, text, meta)| json!({"id": id, "text": text, "meta": meta})).collect();
    e.ok("index/add", json!({ "documents": documents }))
}

/// The Cranfield directory ([`rcp_testkit::cranfield`]): `None` (the test skips) when there is none.
pub(crate) fn cranfield_dir() -> Option<PathBuf> {
    rcp_testkit::cranfield()
}

/// Query id → ids of the documents judged relevant to it.
pub(crate) type Qrels = HashMap<String, HashSet<String>>;

/// The queries of a BEIR directory (id, text) and its positive judgements.
pub(crate) fn load_queries(dir: &Path) -> (Vec<(String, String)>, Qrels) {
    let queries = std::fs::read_to_string(dir.join("queries.jsonl")).expect("queries.jsonl");
    let queries = queries
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["_id"].as_str().map_or_else(|| v["_id"].to_string(), str::to_owned),
                v["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut qrels = Qrels::new();
    for line in std::fs::read_to_string(dir.join("qrels.tsv")).expect("qrels.tsv").lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() >= 3 && cols[2].trim().parse::<i64>().unwrap_or(0) > 0 {
            qrels.entry(cols[0].to_owned()).or_default().insert(cols[1].to_owned());
        }
    }
    (queries, qrels)
}
