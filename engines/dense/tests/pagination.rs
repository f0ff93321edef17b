//! `cursor`/`nextCursor` (§10) on rcp-dense: pages cover the ranking once, and a cursor stays
//! valid across writes (a keyset cursor: no hit ranked before it is repeated or skipped).

mod common;

use std::collections::HashSet;

use common::{serve, topical_documents};
use serde_json::{Value, json};

fn ids(res: &Value) -> Vec<String> {
    res["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("id").to_owned()).collect()
}

#[test]
fn pages_cover_the_ranking_once_and_survive_writes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let mut e = serve(&["--data-dir", dir.to_str().expect("utf-8 path"), "--create"]);
    let init = e.ok("info", json!({}));
    assert!(init["capabilities"]["pagination"].is_object(), "{init}");
    assert!(init["capabilities"]["session"].is_object(), "{init}");
    e.ok("index/add", json!({"documents": topical_documents()}));
    let q = "supersonic wing flow";
    let whole = ids(&e.ok("retrieve", json!({"query": q, "k": 12})));
    assert_eq!(whole.len(), 12);

    // Without writes, pages of 5 are the whole ranking cut in three.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut p = json!({"query": q, "k": 5});
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let page = e.ok("retrieve", p);
        paged.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, whole);

    // Across writes: after the first page, a document that ranks first is added and one of a
    // later page deleted; the next pages neither repeat the first page nor skip a survivor.
    let first = e.ok("retrieve", json!({"query": q, "k": 5}));
    let cursor = first["nextCursor"].as_str().expect("a next page").to_owned();
    e.ok("index/add", json!({"documents": [{"id": "new-top", "text": "Supersonic flow over a swept wing."}]}));
    let gone = whole[8].clone();
    assert_eq!(e.ok("index/delete", json!({"ids": [gone.clone()]}))["deleted"], 1);
    let mut rest = Vec::new();
    let mut next = Some(cursor);
    while let Some(c) = next {
        let page = e.ok("retrieve", json!({"query": q, "k": 5, "cursor": c}));
        rest.extend(ids(&page));
        next = page["nextCursor"].as_str().map(str::to_owned);
    }
    let expected: Vec<String> = whole[5..].iter().filter(|id| **id != gone).cloned().collect();
    assert_eq!(rest, expected, "the pages after the cursor, without the deleted document");
    let seen: HashSet<String> = ids(&first).into_iter().chain(rest).collect();
    assert!(!seen.contains("new-top"), "a document ranked above the cursor belongs to a page already read");

    // A cursor of another request is refused.
    let err = e.err("retrieve", json!({"query": "something else", "k": 5, "cursor": first["nextCursor"]}));
    assert_eq!(err["code"], -32602, "{err}");
}
