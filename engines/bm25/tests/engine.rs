//! Writes, pagination, snapshots, streaming and bad input, over real stdio.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{add, ids, serve, serve_dir, tempdir};
use rcp_testkit::code;
use serde_json::{Value, json};

#[test]
fn capabilities_declare_l2_and_bm25_scores() {
    let mut e = serve(&[]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["_meta"]["conformance"], "L2");
    let caps = &info["capabilities"];
    assert_eq!(caps["retrieve"]["modes"], json!(["sparse"]));
    assert_eq!(caps["retrieve"]["scoreScale"], "bm25");
    assert_eq!(caps["retrieve"]["scoreFloor"], 0.0);
    assert_eq!(caps["retrieve"]["snapshots"], true);
    assert_eq!(caps["retrieve"]["deterministic"], true);
    assert_eq!(caps["index"]["writable"], true);
    for key in ["filter", "citations", "pagination", "streaming", "log"] {
        assert!(caps.get(key).is_some(), "{key} advertised");
    }
    assert!(caps["retrieve"].get("mmr").is_none(), "mmr is not implemented, so not advertised");

    let r = e.ok("retrieve", json!({"query": "How does an inverted index work?", "k": 3}));
    let top = &r["hits"][0];
    assert_eq!(top["id"], "bm25-2");
    assert_eq!(top["unit"], "document");
    assert_eq!(top["citation"]["title"], "Inverted indexes");
    assert_eq!(top["citation"]["source"], "builtin");
    assert_eq!(top["trust"]["level"], "trusted");
    assert_eq!(top["scores"]["sparse"], top["score"]);
    assert!(top["text"].as_str().unwrap().contains("inverted index"));
    assert!(r["usage"]["candidates"].as_u64().unwrap() >= 1);
    assert!(r["usage"].get("latencyMs").is_some());
    assert!(r["indexVersion"].is_string());

    let r = e.ok("retrieve", json!({"query": "inverted index", "k": 3, "includeText": false, "minScore": 1000.0}));
    assert!(r["hits"].as_array().unwrap().is_empty());
    let r = e.ok("retrieve", json!({"query": "inverted index", "k": 3, "includeText": false}));
    assert!(r["hits"][0].get("text").is_none());
}

#[test]
fn upsert_replaces_delete_counts_and_minted_ids_are_fresh() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &["--create", "--field", "lang:keyword"]);
    let r = add(&mut e, &[("a", "zebra stripes", json!({"lang": "en"})), ("b", "zebra crossing", json!({}))]);
    assert_eq!(r["ids"], json!(["a", "b"]));
    add(&mut e, &[("a", "giraffe necks", json!({"lang": "fr"}))]);
    let zebra = e.ok("retrieve", json!({"query": "zebra", "k": 10}));
    assert_eq!(ids(&zebra), ["b"], "the old version of 'a' is gone");
    let giraffe = e.ok("retrieve", json!({"query": "giraffe", "k": 10}));
    assert_eq!(ids(&giraffe), ["a"]);
    assert_eq!(giraffe["hits"][0]["meta"]["lang"], "fr");
    assert_eq!(giraffe["hits"][0]["trust"]["level"], "community", "index/add documents are never trusted");
    assert_eq!(giraffe["hits"][0]["citation"]["source"], "index/add");

    // Positional ids; minted ones are distinct from each other and from existing ids.
    let r = e.ok(
        "index/add",
        json!({"documents": [{"text": "okapi one"}, {"id": "c", "text": "okapi two"}, {"text": "okapi three"}]}),
    );
    let got: Vec<&str> = r["ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[1], "c");
    assert_ne!(got[0], got[2]);
    assert!(!["a", "b", "c"].contains(&got[0]));
    assert_eq!(ids(&e.ok("retrieve", json!({"query": "okapi", "k": 10}))).len(), 3);

    // Duplicate ids in one batch are rejected by the framework; nothing is written.
    let err = e.err("index/add", json!({"documents": [{"id": "d", "text": "x"}, {"id": "d", "text": "y"}]}));
    assert_eq!(code(&err), -32602);

    // Delete is idempotent and counts exactly.
    assert_eq!(e.ok("index/delete", json!({"ids": ["a", "nope"]}))["deleted"], 1);
    assert_eq!(e.ok("index/delete", json!({"ids": ["a", "nope"]}))["deleted"], 0);
    assert_eq!(e.ok("index/delete", json!({"ids": ["b", "c", "b"]}))["deleted"], 2);
    assert!(ids(&e.ok("retrieve", json!({"query": "zebra giraffe", "k": 10}))).is_empty());
}

#[test]
fn pagination_covers_the_ranking_exactly_once() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &["--create"]);
    let docs: Vec<Value> = (0..57)
        .map(|i| {
            let words = "alpha ".repeat(1 + i % 7) + &"beta ".repeat(i % 5) + &format!("filler{i}");
            json!({"id": format!("p{i:02}"), "text": words})
        })
        .collect();
    e.ok("index/add", json!({ "documents": docs }));
    let full = e.ok("retrieve", json!({"query": "alpha beta", "k": 100}));
    let full_ids = ids(&full);
    assert_eq!(full_ids.len(), 57);
    assert!(full.get("nextCursor").is_none());

    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = json!({"query": "alpha beta", "k": 10});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let r = e.ok("retrieve", params);
        assert_eq!(r["indexVersion"], full["indexVersion"]);
        paged.extend(ids(&r));
        pages += 1;
        match r.get("nextCursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        if pages == 2 {
            // A write between pages does not disturb the paging: the cursor pins its snapshot.
            add(&mut e, &[("intruder", "alpha alpha alpha beta beta beta", json!({}))]);
        }
    }
    assert_eq!(pages, 6);
    assert_eq!(paged, full_ids, "pages concatenate to the single-shot ranking");
    assert_eq!(paged.iter().collect::<HashSet<_>>().len(), 57);

    // Cursors are bound to their query and must be well-formed.
    let first = e.ok("retrieve", json!({"query": "alpha beta", "k": 10}));
    let c = first["nextCursor"].as_str().unwrap().to_owned();
    let err = e.err("retrieve", json!({"query": "something else", "k": 10, "cursor": c}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("cursor")));
    let err = e.err("retrieve", json!({"query": "alpha", "k": 10, "cursor": "garbage"}));
    assert_eq!(code(&err), -32602);
    let mut parts: Vec<&str> = c.split('.').collect();
    parts[1] = "99999999999";
    let deep = parts.join(".");
    let err = e.err("retrieve", json!({"query": "alpha beta", "k": 10, "cursor": deep}));
    assert_eq!(code(&err), -32602, "a forged deep cursor cannot make the engine collect millions of hits");

    // No declared fields: no filter capability, so a filter is an unsupported option.
    assert!(e.ok("info", json!({}))["capabilities"].get("filter").is_none());
    let err = e.err("retrieve", json!({"query": "alpha", "k": 3, "filter": {"field": "x", "op": "exists"}}));
    assert_eq!(code(&err), -32005);
}

#[test]
fn snapshots_pin_old_versions_and_garbage_versions_fail() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &["--create", "--keep-snapshots", "2"]);
    add(&mut e, &[("v1", "kiwi fruit", json!({}))]);
    let before = e.ok("retrieve", json!({"query": "kiwi", "k": 10}));
    let old = before["indexVersion"].as_str().unwrap().to_owned();
    add(&mut e, &[("v2", "kiwi bird", json!({}))]);
    let now = e.ok("retrieve", json!({"query": "kiwi", "k": 10}));
    assert_eq!(ids(&now).len(), 2);
    assert_ne!(now["indexVersion"], old.as_str());

    let pinned = e.ok("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": old}));
    assert_eq!(ids(&pinned), ["v1"], "the pinned snapshot is served, not the current one");
    assert_eq!(pinned["indexVersion"], old.as_str());
    let _ = e.ok("index/delete", json!({"ids": ["v1"]}));
    let pinned = e.ok("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": old}));
    assert_eq!(ids(&pinned), ["v1"]);

    for garbage in ["nope", "deadbeef-1", "", "x-y-z"] {
        let err = e.err("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": garbage}));
        assert_eq!(code(&err), -32010, "{garbage}");
    }
    // A cursor into a snapshot that is later released.
    let both = now["indexVersion"].as_str().unwrap().to_owned();
    let first = e.ok("retrieve", json!({"query": "kiwi", "k": 1, "indexVersion": both}));
    let cursor = first["nextCursor"].as_str().expect("a second page").to_owned();
    // Old snapshots are released after --keep-snapshots newer commits.
    for i in 0..3 {
        add(&mut e, &[(&format!("x{i}"), "kiwi again", json!({}))]);
    }
    let err = e.err("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": old}));
    assert_eq!(code(&err), -32010);
    // The cursor is ours but expired: -32015 on cursor (restart pagination), not -32602.
    let err = e.err("retrieve", json!({"query": "kiwi", "k": 1, "cursor": cursor}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32015, Some("cursor")), "{err}");
}

#[test]
fn empty_huge_and_stopword_queries() {
    let mut e = serve(&[]);
    assert_eq!(code(&e.err("retrieve", json!({"query": "", "k": 3}))), -32602);
    assert_eq!(code(&e.err("retrieve", json!({"query": "   ", "k": 3}))), -32602);
    let huge = (0..2000).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let err = e.err("retrieve", json!({"query": huge, "k": 3}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("query")));
    let r = e.ok("retrieve", json!({"query": "the of and", "k": 3}));
    assert!(r["hits"].as_array().unwrap().is_empty());
    assert!(r["usage"]["notes"][0].as_str().unwrap().contains("no searchable terms"));
    // Query syntax is plain text.
    let r = e.ok("retrieve", json!({"query": "title:rust AND (tokio OR \"async\") -ownership^3", "k": 5}));
    assert!(ids(&r).contains(&"rust-2".to_owned()));
    e.ok("ping", json!({}));
}

#[test]
fn streaming_sends_progress_and_partial_hits() {
    let mut e = serve(&[]);
    e.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "retrieve",
                   "params": {"query": "the retrieval of documents and passages", "k": 40, "_meta": {"progressToken": "t1"}}}));
    let r = e.response_for(&json!(7), Duration::from_secs(10));
    let hits = ids(&r["result"]);
    let mut streamed = Vec::new();
    for n in &e.notifications {
        assert_eq!(n["method"], "notifications/progress");
        assert_eq!(n["params"]["progressToken"], "t1");
        if let Some(partial) = n["params"]["partial"]["hits"].as_array() {
            streamed.extend(partial.iter().map(|h| h["id"].as_str().unwrap().to_owned()));
        }
    }
    assert!(e.notifications.len() >= 2);
    assert_eq!(streamed, hits, "partial hits add up to the final list");
}

#[test]
fn recency_prefers_recent_documents() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &["--create", "--field", "published:date"]);
    add(
        &mut e,
        &[
            ("old", "solar panels solar", json!({"published": "2001-01-01"})),
            ("new", "solar panels", json!({"published": "2025-01-01"})),
            ("undated", "solar panels solar solar", json!({})),
        ],
    );
    let plain = e.ok("retrieve", json!({"query": "solar", "k": 10}));
    assert_eq!(ids(&plain)[0], "undated");
    let r =
        e.ok("retrieve", json!({"query": "solar", "k": 10, "recency": {"field": "published", "halfLifeDays": 3650}}));
    assert_eq!(ids(&r), ["new", "old", "undated"]);
    let hit = &r["hits"][0];
    assert!(hit["score"].as_f64().unwrap() < hit["scores"]["sparse"].as_f64().unwrap());
    std::thread::sleep(Duration::from_millis(20));
    let again =
        e.ok("retrieve", json!({"query": "solar", "k": 10, "recency": {"field": "published", "halfLifeDays": 3650}}));
    assert_eq!(again["hits"], r["hits"], "recency decays against the snapshot's clock: same snapshot, same scores");
    let err = e.err("retrieve", json!({"query": "solar", "k": 10, "recency": {"field": "nope"}}));
    assert_eq!(code(&err), -32602);
}
