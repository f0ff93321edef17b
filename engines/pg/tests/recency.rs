//! `recency` (§7.7) is honoured in every mode: two near-identical documents published in 1990
//! and 2026 swap places when the request asks for a 30-day half-life on the declared date field.

mod common;

use common::{FIELDS, database, ids, serve};
use serde_json::json;

#[test]
fn a_recent_document_overtakes_an_older_near_identical_one_in_every_mode() {
    let Some(url) = database("recency") else { return };
    let mut e = serve(&url, &FIELDS);
    let query = "Lift and drag of a thin wing in supersonic flight";
    e.ok(
        "index/add",
        json!({"documents": [
            {"id": "old", "text": query, "meta": {"published": "1990-03-01"}},
            {"id": "new", "text": "Lift and drag of a wing in supersonic flight.", "meta": {"published": "2026-11-20T00:00:00Z"}},
            {"id": "soup", "text": "A tomato soup recipe with basil and garlic."}
        ]}),
    );
    for mode in ["sparse", "dense", "hybrid"] {
        let plain = e.ok("retrieve", json!({"query": query, "k": 2, "mode": mode}));
        assert_eq!(ids(&plain), ["old", "new"], "{mode} without recency: {plain}");
        let recent = e.ok(
            "retrieve",
            json!({"query": query, "k": 2, "mode": mode, "recency": {"field": "published", "halfLifeDays": 30}}),
        );
        assert_eq!(ids(&recent), ["new", "old"], "{mode} with recency: {recent}");
        // Pages of a recency ranking follow the same order.
        let first = e.ok(
            "retrieve",
            json!({"query": query, "k": 1, "mode": mode, "recency": {"field": "published", "halfLifeDays": 30}}),
        );
        assert_eq!(ids(&first), ["new"], "{mode}: {first}");
        let cursor = first["nextCursor"].as_str().expect("a next page").to_owned();
        let second = e.ok(
            "retrieve",
            json!({"query": query, "k": 1, "mode": mode, "cursor": cursor, "recency": {"field": "published", "halfLifeDays": 30}}),
        );
        assert_eq!(ids(&second), ["old"], "{mode}: {second}");
    }
    let err = e.err("retrieve", json!({"query": query, "k": 2, "recency": {"field": "year"}}));
    assert_eq!(err["code"], -32602, "{err}");
}
