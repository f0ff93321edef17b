//! `query/transform` and `retrieve.rewrite` (§7.7, §7.8) over stdio: RM3 expansion terms come
//! from the top documents of the original query, the expanded query ranks with them, results
//! are schema-valid, and methods that are not implemented are refused with `-32005`.

mod common;

use common::{add, ids, serve_dir, tempdir};
use rcp_testkit::Engine;
use serde_json::{Value, json};

/// A data dir served with a small corpus: three documents on glaciers that share the words
/// "moraine" and "crevasse", one document with those words but not "glacier", one on
/// volcanoes, and 40 unrelated documents so that the shared words stay rare (RM3 ignores
/// terms in more than 10% of the documents).
fn glacier_engine(dir: &std::path::Path) -> Engine {
    let mut e = serve_dir(dir, &["--create"]);
    let mut docs: Vec<(String, String)> = vec![
        ("g1".into(), "The glacier carved a moraine; a crevasse opened in the glacier ice".into()),
        ("g2".into(), "Glacier retreat leaves a terminal moraine and many a crevasse".into()),
        ("g3".into(), "Walking on a glacier: roped teams, crevasse rescue, moraine camps".into()),
        ("m1".into(), "Moraine ridges and a deep crevasse field above the valley".into()),
        ("v1".into(), "The volcano erupted lava and ash over the valley".into()),
    ];
    for i in 0..40 {
        docs.push((format!("f{i}"), format!("filler record {i} about subject{i} and item{i}")));
    }
    let batch: Vec<(&str, &str, Value)> = docs.iter().map(|(id, t)| (id.as_str(), t.as_str(), json!({}))).collect();
    add(&mut e, &batch);
    e
}

#[test]
fn transform_is_advertised_with_exactly_the_implemented_methods() {
    let dir = tempdir();
    let mut e = serve_dir(&dir.path().join("idx"), &["--create"]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["transform"]["methods"], json!(["rewrite", "multi-query"]));
}

#[test]
fn rewrite_expands_with_terms_of_the_top_documents() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    let r = e.ok("query/transform", json!({"query": "glacier", "method": "rewrite"}));
    let queries = r["queries"].as_array().expect("queries");
    assert_eq!(queries.len(), 1, "{r}");
    let q = queries[0].as_str().expect("a string query");
    assert!(q.starts_with("glacier "), "the original query comes first: {q}");
    assert!(q.contains("moraine") && q.contains("crevasse"), "words shared by the top documents: {q}");
    assert!(!q.contains("volcano") && !q.contains("lava"), "no words from documents the query did not find: {q}");
    assert!(!q.contains("filler"), "no words from other documents: {q}");
}

#[test]
fn inline_rewrite_ranks_with_the_expansion_and_reports_it() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    let plain = e.ok("retrieve", json!({"query": "glacier", "k": 10}));
    assert!(!ids(&plain).contains(&"m1".to_owned()), "m1 lacks the word glacier: {plain}");
    assert!(plain.get("rewrittenQuery").is_none());

    let rewritten = e.ok("retrieve", json!({"query": "glacier", "k": 10, "rewrite": "rewrite"}));
    let found = ids(&rewritten);
    assert!(found.contains(&"m1".to_owned()), "the expansion terms reach m1: {rewritten}");
    assert_eq!(&found[..3].iter().filter(|id| id.starts_with('g')).count(), &3, "{rewritten}");
    let text = rewritten["rewrittenQuery"].as_str().expect("rewrittenQuery");
    assert!(text.contains("moraine"), "{text}");
    let notes = rewritten["usage"]["notes"].to_string();
    assert!(notes.contains("RM3"), "usage.notes says what ran: {notes}");

    let off = e.ok("retrieve", json!({"query": "glacier", "k": 10, "rewrite": false}));
    assert_eq!(ids(&off), ids(&plain));
}

#[test]
fn multi_query_returns_distinct_expansions_and_fuses_them_inline() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    let r = e.ok("query/transform", json!({"query": "glacier", "method": "multi-query", "n": 3}));
    let queries: Vec<&str> = r["queries"].as_array().expect("queries").iter().filter_map(Value::as_str).collect();
    assert!((2..=3).contains(&queries.len()), "{r}");
    assert!(queries.iter().all(|q| q.starts_with("glacier")), "{r}");
    let mut unique = queries.clone();
    unique.dedup();
    assert_eq!(unique.len(), queries.len(), "variants differ: {r}");
    let rewrite = e.ok("query/transform", json!({"query": "glacier", "method": "rewrite"}));
    assert_eq!(rewrite["queries"][0], json!(queries[0]), "the first variant is the full expansion");

    let fused = e.ok("retrieve", json!({"query": "glacier", "k": 5, "rewrite": "multi-query"}));
    let mut found = ids(&fused);
    found.sort();
    assert_eq!(found, ["g1", "g2", "g3", "m1"], "every document any variant matches: {fused}");
    assert!(fused["rewrittenQuery"].as_str().is_some_and(|q| q.lines().count() >= 2), "{fused}");
}

#[test]
fn methods_needing_a_language_model_are_refused() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    for method in ["hyde", "decompose", "step-back", "nonsense"] {
        let err = e.err("query/transform", json!({"query": "glacier", "method": method}));
        assert_eq!(err["code"], -32005, "{method}: {err}");
        assert_eq!(err["data"]["option"], "method", "{method}: {err}");
    }
    let err = e.err("retrieve", json!({"query": "glacier", "k": 3, "rewrite": "hyde"}));
    assert_eq!(err["code"], -32005, "{err}");
    assert_eq!(err["data"]["option"], "rewrite", "{err}");
}

#[test]
fn queries_without_searchable_terms_come_back_as_given() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    let r = e.ok("query/transform", json!({"query": "the of and", "method": "rewrite"}));
    assert_eq!(r["queries"], json!(["the of and"]));
    let res = e.ok("retrieve", json!({"query": "the of", "k": 3, "rewrite": "rewrite"}));
    assert_eq!(ids(&res).len(), 0);
}

#[test]
fn rewritten_rankings_page_with_cursors() {
    let dir = tempdir();
    let mut e = glacier_engine(&dir.path().join("idx"));
    let all = ids(&e.ok("retrieve", json!({"query": "glacier", "k": 4, "rewrite": "rewrite"})));
    let first = e.ok("retrieve", json!({"query": "glacier", "k": 2, "rewrite": "rewrite"}));
    let cursor = first["nextCursor"].as_str().expect("a next page").to_owned();
    let second = e.ok("retrieve", json!({"query": "glacier", "k": 2, "rewrite": "rewrite", "cursor": cursor}));
    assert_eq!([ids(&first), ids(&second)].concat(), all, "pages follow the rewritten ranking");
    // The cursor belongs to the rewritten query: the plain query cannot continue it.
    let err = e.err("retrieve", json!({"query": "glacier", "k": 2, "cursor": first["nextCursor"]}));
    assert_eq!(err["code"], -32602, "{err}");
}
