//! `recency` (§7.7) is honoured: two near-identical documents published in 1990 and 2026 swap
//! places when the request asks for a 30-day half-life on the declared date field.

mod common;

use common::serve;
use serde_json::{Value, json};

fn ids(res: &Value) -> Vec<String> {
    res["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("id").to_owned()).collect()
}

#[test]
fn a_recent_document_overtakes_an_older_near_identical_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data");
    let path = path.to_str().expect("utf-8 path");
    let mut e = serve(&["--data-dir", path, "--create", "--field", "published:date"]);
    let query = "Lift and drag of a thin wing in supersonic flight.";
    e.ok(
        "index/add",
        json!({"documents": [
            {"id": "old", "text": query, "meta": {"published": "1990-03-01"}},
            {"id": "new", "text": "Lift and drag of thin wings in supersonic flight.", "meta": {"published": "2026-11-20T00:00:00Z"}},
            {"id": "undated", "text": "Lift and drag of a thin wing in supersonic flight!"}
        ]}),
    );
    let plain = e.ok("retrieve", json!({"query": query, "k": 3}));
    assert_eq!(ids(&plain)[0], "old", "without recency the exact text ranks first: {plain}");
    let recent =
        e.ok("retrieve", json!({"query": query, "k": 3, "recency": {"field": "published", "halfLifeDays": 30}}));
    assert_eq!(ids(&recent), ["new", "old", "undated"], "{recent}");
    // The score is the decayed one; `scores.dense` keeps the cosine.
    let top = &recent["hits"][0];
    assert!(top["score"].as_f64().unwrap() < top["scores"]["dense"].as_f64().unwrap(), "{top}");
    // Without a half-life the framework's default (30 days) applies, and says so.
    let defaulted = e.ok("retrieve", json!({"query": query, "k": 3, "recency": {"field": "published"}}));
    assert_eq!(ids(&defaulted), ids(&recent));
    assert!(defaulted["usage"]["notes"].to_string().contains("halfLifeDays defaulted to 30"), "{defaulted}");
    // A field that is not a declared date field is refused.
    let err = e.err("retrieve", json!({"query": query, "k": 3, "recency": {"field": "nope"}}));
    assert_eq!(err["code"], -32602, "{err}");
}
