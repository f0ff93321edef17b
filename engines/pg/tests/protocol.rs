//! `rcp-pg serve` over stdio against a real PostgreSQL: capabilities, the three modes, every
//! fusion method, filters, pagination, writes and their versions.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{FIELDS, database, docs, ids, serve};
use rcp_testkit::code;
use serde_json::json;

#[test]
fn modes_fusion_filters_pages_and_writes() {
    let Some(url) = database("protocol") else { return };
    let mut e = serve(&url, &FIELDS);
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    let r = &caps["retrieve"];
    assert_eq!(r["modes"], json!(["hybrid", "sparse", "dense"]));
    assert_eq!(r["defaultMode"], "hybrid");
    assert_eq!(r["fusion"], json!(["rrf", "weighted", "convex"]));
    assert_eq!(r["scoreFloor"], -1.0);
    assert_eq!(r["x-scoreScales"]["sparse"], "bm25");
    assert_eq!(
        caps["filter"]["fields"],
        json!({"published": "date", "tags": "keyword", "topic": "keyword", "year": "int"})
    );
    assert_eq!(caps["embed"]["dimension"], 384);

    // An empty index answers with no hits and version 0.
    let empty = e.ok("retrieve", json!({"query": "wing", "k": 3}));
    assert_eq!(ids(&empty), Vec::<String>::new());
    assert_eq!(empty["indexVersion"], "0");

    let added = e.ok("index/add", json!({"documents": docs()}));
    assert_eq!(added["ids"].as_array().unwrap().len(), 6);
    let v1 = e.ok("retrieve", json!({"query": "wing", "k": 1}))["indexVersion"].clone();
    assert_eq!(v1, "1");

    // Each mode ranks the obvious document first, with its own score scale.
    let q = "aircraft wing lift in a propeller slipstream";
    let sparse = e.ok("retrieve", json!({"query": q, "k": 3, "mode": "sparse"}));
    assert_eq!(ids(&sparse)[0], "wing");
    let top = &sparse["hits"][0];
    assert!(top["score"].as_f64().unwrap() > 1.0 && top["scores"]["sparse"] == top["score"], "{top}");
    assert!(top.get("confidence").is_none(), "sparse mode has no cosine to calibrate: {top}");
    // BM25 candidates are documents sharing a query lexeme, nothing else.
    assert!(!ids(&sparse).contains(&"soup".to_owned()), "{sparse}");
    let dense = e.ok("retrieve", json!({"query": "airplane wings generate lift", "k": 3, "mode": "dense"}));
    assert_eq!(ids(&dense)[0], "wing");
    let top = &dense["hits"][0];
    let cos = top["score"].as_f64().unwrap();
    assert!(cos > 0.3 && cos <= 1.0 && top["confidence"].as_f64().unwrap() > 0.0, "{top}");
    for method in ["rrf", "weighted", "convex"] {
        let hybrid = e.ok("retrieve", json!({"query": q, "k": 3, "mode": "hybrid", "fusion": {"method": method}}));
        assert_eq!(ids(&hybrid)[0], "wing", "{method}: {hybrid}");
        let top = &hybrid["hits"][0];
        assert!(top["scores"]["sparse"].is_number() && top["scores"]["dense"].is_number(), "{top}");
        assert_eq!(top["scores"]["fused"], top["score"]);
        assert!(top["confidence"].is_number());
    }
    // Weights and alpha move the fused order: all weight on dense reproduces the dense list.
    let dense_only = e.ok(
        "retrieve",
        json!({"query": "airplane wings generate lift", "k": 3, "fusion": {"method": "weighted", "weights": {"dense": 1.0, "sparse": 0.0}}}),
    );
    assert_eq!(ids(&dense_only), ids(&dense));
    let bad = e.err("retrieve", json!({"query": q, "fusion": {"method": "convex", "alpha": 2.0}}));
    assert_eq!(code(&bad), -32602, "{bad}");

    // Filters, in every mode.
    for mode in ["sparse", "dense", "hybrid"] {
        let f = e.ok(
            "retrieve",
            json!({"query": "wing lift bread search", "k": 10, "mode": mode, "filter": {"field": "topic", "op": "eq", "value": "food"}}),
        );
        let got: HashSet<String> = ids(&f).into_iter().collect();
        assert!(got.is_subset(&HashSet::from(["bread".to_owned(), "soup".to_owned()])), "{mode}: {f}");
        assert!(!got.is_empty(), "{mode}: {f}");
    }
    let f = e.ok(
        "retrieve",
        json!({"query": "anything at all", "k": 10, "mode": "dense", "filter": {"and": [
            {"field": "published", "op": "gte", "value": "1970-01-01"},
            {"field": "tags", "op": "contains", "value": "bread"}]}}),
    );
    assert_eq!(ids(&f), vec!["bread"]);
    let unknown = e.err("retrieve", json!({"query": "x", "filter": {"field": "colour", "op": "eq", "value": "red"}}));
    assert!([-32602, -32005].contains(&code(&unknown)), "{unknown}");

    // Pagination: pages of 2 cover the dense ranking without repeats; the cursor names its request.
    let full = ids(&e.ok("retrieve", json!({"query": "science", "k": 6, "mode": "dense"})));
    let mut paged = Vec::new();
    let mut cursor = None::<String>;
    loop {
        let mut params = json!({"query": "science", "k": 2, "mode": "dense"});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let page = e.ok("retrieve", params);
        paged.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
            _ => break,
        }
    }
    assert_eq!(paged, full);
    let first = e.ok("retrieve", json!({"query": "science", "k": 2, "mode": "dense"}));
    let token = first["nextCursor"].as_str().expect("a next page").to_owned();
    let other = e.err("retrieve", json!({"query": "other query", "k": 2, "mode": "dense", "cursor": token}));
    assert_eq!(code(&other), -32602);
    let garbage = e.err("retrieve", json!({"query": "science", "k": 2, "mode": "dense", "cursor": "not-a-cursor"}));
    assert_eq!(code(&garbage), -32602);

    assert_eq!((code(&other), other["data"]["field"].as_str()), (-32602, Some("cursor")), "{other}");
    assert_eq!(garbage["data"]["field"], "cursor", "{garbage}");

    // Writes: an upsert moves the version and the document; the old cursor is ours but expired
    // (-32015 NotFound: restart pagination), not malformed.
    let changed = json!({"id": "soup", "text": "Wing flutter analysis of a swept aircraft wing.", "meta": {"year": 2024, "topic": "aero"}});
    e.ok("index/add", json!({"documents": [changed]}));
    let stale = e.err("retrieve", json!({"query": "science", "k": 2, "mode": "dense", "cursor": token}));
    assert_eq!((code(&stale), stale["data"]["field"].as_str()), (-32015, Some("cursor")), "{stale}");
    assert!(stale["data"]["detail"].as_str().unwrap_or_default().contains("index changed"), "{stale}");
    let after = e.ok("retrieve", json!({"query": "wing flutter", "k": 2, "mode": "sparse"}));
    assert_eq!(ids(&after)[0], "soup");
    assert_eq!(after["indexVersion"], "2");
    let gone = e.ok("index/delete", json!({"ids": ["soup", "never-was"]}));
    assert_eq!(gone["deleted"], 1);
    let absent = e.ok("index/delete", json!({"ids": ["never-was"]}));
    assert_eq!(absent["deleted"], 0);
    let after = e.ok("retrieve", json!({"query": "wing flutter", "k": 10, "mode": "sparse"}));
    assert!(!ids(&after).contains(&"soup".to_owned()));
    assert_eq!(after["indexVersion"], "3", "a delete of nothing does not move the version");

    // Minted ids, and progress while a large batch embeds.
    let many: Vec<_> =
        (0..40).map(|i| json!({"text": format!("generated note number {i} about turbulence")})).collect();
    let id = json!(777);
    e.send(&json!({"jsonrpc": "2.0", "id": id, "method": "index/add", "params": {"documents": many, "_meta": {"progressToken": "p"}}}));
    let resp = e.response_for(&id, Duration::from_secs(120));
    let minted = resp["result"]["ids"].as_array().expect("ids").clone();
    assert_eq!(minted.len(), 40);
    assert!(minted.iter().all(|i| i.as_str().is_some_and(|s| s.starts_with("doc-"))));
    assert!(e.notifications.iter().any(|n| n["method"] == "notifications/progress"), "no progress frames");
    let found =
        e.ok("retrieve", json!({"query": "generated note number 17 about turbulence", "k": 1, "mode": "sparse"}));
    assert_eq!(found["hits"][0]["id"], minted[17]);
}
