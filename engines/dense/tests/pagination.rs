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

/// On an index searched approximately (no exact scan, a sparse graph), pages of one ranking are
/// cut from one candidate set, so five pages of 10 are exactly one request's 50 hits. Before
/// the cursor recorded the first page's depth, each later page searched deeper and gathered
/// another candidate set (on Cranfield, 3 of 50 hits differed).
#[test]
fn pages_partition_one_ranking_on_an_approximate_index() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let approximate = ["--full-scan-threshold", "0", "--hnsw-m", "4", "--ef-construction", "8", "--ef-search", "8"];
    let mut args = vec!["--data-dir", dir.to_str().expect("utf-8 path"), "--create"];
    args.extend(approximate);
    let mut e = serve(&args);
    let subjects = ["wing", "shock", "boundary layer", "heat transfer", "flutter", "nozzle", "turbulence", "panel"];
    let verbs = ["measured in", "predicted for", "computed over", "observed near", "reduced by"];
    let settings = ["supersonic flow", "a swept wing", "hypersonic inlets", "thin shells", "cooled plates", "jets"];
    let mut documents = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        for (j, v) in verbs.iter().enumerate() {
            for (l, t) in settings.iter().enumerate() {
                for n in 0..4 {
                    let text = format!("The {s} {v} {t}, series {n} of case {i}{j}{l}.");
                    documents.push(json!({"id": format!("d{i}-{j}-{l}-{n}"), "text": text}));
                }
            }
        }
    }
    // In batches: each call is answered within the test engine's 10 s even on a loaded machine.
    for batch in documents.chunks(120) {
        e.ok("index/add", json!({"documents": batch}));
    }
    let q = "shock waves on a supersonic wing";
    // A candidate set of 60: the old depth rule searched 60, 70, ... 100 deep page after page.
    let whole = ids(&e.ok("retrieve", json!({"query": q, "k": 50, "candidateK": 60})));
    assert_eq!(whole.len(), 50);
    let mut paged = Vec::new();
    let mut gathered = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..5 {
        let mut p = json!({"query": q, "k": 10, "candidateK": 60});
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let page = e.ok("retrieve", p);
        paged.extend(ids(&page));
        gathered.push(page["usage"]["candidates"].as_u64().expect("usage.candidates"));
        cursor = page["nextCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(paged, whole, "five pages of 10 and one request of 50");
    // The same candidate set for every page: as many candidates gathered each time.
    assert_eq!(gathered, [60; 5], "every page searched the first page's depth");
}
