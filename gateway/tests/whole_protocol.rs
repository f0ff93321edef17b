//! The gateway carries the whole protocol (§16.4): in front of `rcp-bm25 serve`, `rcp-dense
//! serve --graph` and `rcp-rerank serve --sparse-embed` it advertises the union of their
//! capabilities, and each answers a real call through it with the engines' own results.

mod common;

use std::path::Path;
use std::process::Command;

use common::{AERO_DOCS, bm25_bin, dense_bin, fixture, gateway, rerank_bin, write_registry};
use rcp_client::{Client, ClientOptions};
use serde_json::{Value, json};

/// A dense data directory over `AERO_DOCS`, indexed with the real model.
fn dense_dir(dir: &Path, name: &str) -> std::path::PathBuf {
    let corpus = dir.join("corpus.jsonl");
    // `topic` and `year` as the built-in corpus of rcp-bm25 types them, so the two engines
    // share a filter field set.
    let lines: Vec<String> = AERO_DOCS
        .iter()
        .enumerate()
        .map(|(i, (id, text))| {
            let topic = id.split('-').next().unwrap_or_default();
            json!({"_id": id, "text": text, "topic": topic, "year": 1990 + i as i64}).to_string()
        })
        .collect();
    std::fs::write(&corpus, lines.join("\n")).expect("write corpus");
    let data = dir.join(name);
    let status = Command::new(dense_bin())
        .args(["index", "--fetch-model", "--data-dir"])
        .arg(&data)
        .arg(&corpus)
        .status()
        .expect("run rcp-dense index");
    assert!(status.success(), "rcp-dense index");
    data
}

fn dense_cmd(data: &Path) -> Vec<String> {
    vec![
        dense_bin(),
        "serve".into(),
        "--graph".into(),
        "--quarantine-threshold".into(),
        "1".into(),
        "--data-dir".into(),
        data.to_string_lossy().into_owned(),
    ]
}

fn rerank_cmd() -> Vec<String> {
    let status = Command::new(rerank_bin()).arg("fetch-model").status().expect("run rcp-rerank fetch-model");
    assert!(status.success(), "rcp-rerank fetch-model");
    vec![rerank_bin(), "serve".into(), "--sparse-embed".into(), "--encoder-sessions".into(), "1".into()]
}

async fn direct(cmd: &[String]) -> Client {
    Client::connect_stdio(cmd, ClientOptions::default()).await.expect("connect to the engine")
}

fn ids(r: &Value, key: &str) -> Vec<String> {
    r[key]
        .as_array()
        .map(|a| a.iter().map(|h| h["id"].as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_serves_every_capability_its_engines_have() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dense_dir(dir.path(), "dense");
    // The engines asked directly run on a copy: a data directory has one server.
    let copy = dir.path().join("dense-copy");
    let status = Command::new("cp").arg("-r").arg(&data).arg(&copy).status().expect("cp");
    assert!(status.success());
    let rerank = rerank_cmd();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            json!({"id": "bm25", "command": [bm25_bin(), "serve"]}),
            json!({"id": "dense", "command": dense_cmd(&data)}),
            json!({"id": "rerank", "command": rerank}),
        ],
    );
    let gw = gateway(&reg, &["--engine-timeout-ms", "60000", "--connect-timeout-ms", "60000"]).await;
    let keys = gw.capabilities().keys();
    for key in [
        "retrieve",
        "embed",
        "rerank",
        "sparseEmbed",
        "multiVector",
        "transform",
        "graph",
        "memory",
        "session",
        "feedback",
        "index",
        "filter",
        "streaming",
        "citations",
        "catalog",
        "pagination",
        "log",
    ] {
        assert!(keys.iter().any(|k| k == key), "'{key}' not advertised: {keys:?}");
    }
    let info = gw.call("info", json!({})).await.expect("info");
    assert_eq!(info["capabilities"]["x-federation"]["provenance"]["graph"], json!(["dense"]), "{info}");
    assert_eq!(info["capabilities"]["x-federation"]["provenance"]["transform"], json!(["bm25"]), "{info}");

    let dense = direct(&dense_cmd(&copy)).await;
    // Graph neighbours of a dense document: the dense engine's own answer.
    let ask = json!({"op": "neighbors", "seedIds": ["wing-1"], "k": 5});
    let via = gw.call("graph", ask.clone()).await.expect("graph through the gateway");
    let own = dense.call("graph", ask).await.expect("graph from rcp-dense");
    assert!(!ids(&own, "nodes").is_empty(), "{own}");
    assert_eq!(ids(&via, "nodes"), ids(&own, "nodes"), "via {via}\nown {own}");
    assert_eq!(via["edges"].as_array().map(Vec::len), own["edges"].as_array().map(Vec::len));

    // An embedding of the dense model's dimension, equal to the engine's own.
    assert_eq!(gw.capabilities().embed.map(|e| e.dimension), Some(384));
    let ask = json!({"inputs": ["swept wing lift"]});
    let via = gw.call("embed", ask.clone()).await.expect("embed through the gateway");
    let own = dense.call("embed", ask).await.expect("embed from rcp-dense");
    assert_eq!(via["vectors"], own["vectors"]);
    assert_eq!(via["vectors"][0].as_array().map(Vec::len), Some(384));
    assert!(via["_meta"]["notes"].to_string().contains("served by engine 'dense'"), "{via}");

    // A rerank ordered exactly as the reranking engine orders it.
    let reranker = direct(&rerank_cmd()).await;
    let passages: Vec<&str> = AERO_DOCS.iter().map(|(_, t)| *t).collect();
    let ask = json!({"query": "heating during re-entry", "passages": passages, "method": "cross-encoder"});
    let via = gw.call("rerank", ask.clone()).await.expect("rerank through the gateway");
    let own = reranker.call("rerank", ask).await.expect("rerank from rcp-rerank");
    assert_eq!(via["order"], own["order"], "via {via}\nown {own}");
    assert_eq!(via["scores"], own["scores"]);
    // Learned-sparse and late-interaction encodings come from the reranking engine too.
    let sparse = gw.call("embed/sparse", json!({"inputs": ["wing lift"]})).await.expect("embed/sparse");
    assert!(sparse["sparse"][0]["indices"].as_array().is_some_and(|i| !i.is_empty()), "{sparse}");
    let multi = gw.call("embed/multi", json!({"inputs": ["wing lift"]})).await.expect("embed/multi");
    assert!(multi["matrices"][0].as_array().is_some_and(|m| !m.is_empty()), "{multi}");
    // query/transform from bm25.
    let t = gw.call("query/transform", json!({"query": "wing lift", "method": "multi-query", "n": 2})).await;
    assert!(t.as_ref().is_ok_and(|t| t["queries"].as_array().is_some_and(|q| !q.is_empty())), "{t:?}");
    // memory from dense.
    let built = gw.call("memory/build", json!({})).await.expect("memory/build");
    let memory_id = built["memoryId"].as_str().expect("memoryId").to_owned();
    assert!(memory_id.starts_with("dense:"), "{built}");
    let recall = gw.call("memory/recall", json!({"query": "re-entry heating", "memoryId": memory_id})).await;
    assert!(recall.as_ref().is_ok_and(|r| r["clues"].as_array().is_some_and(|c| !c.is_empty())), "{recall:?}");

    // Feedback on a fused hit is stored by the engine that produced it.
    let fused = gw.call("retrieve", json!({"query": "heat shield ablation re-entry", "k": 5})).await.expect("retrieve");
    let hit = fused["hits"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["id"] == "heat-2"))
        .unwrap_or_else(|| panic!("heat-2 not found: {fused}"));
    assert_eq!(hit["meta"]["engine"], "dense", "{hit}");
    let fb = gw
        .call(
            "feedback",
            json!({"signals": [{"hitId": "heat-2", "poisonSuspected": true}, {"hitId": "never-served", "used": true}]}),
        )
        .await
        .expect("feedback");
    assert_eq!(fb["accepted"], 1, "{fb}");
    assert_eq!(fb["_meta"]["engines"], json!({"dense": 1}), "{fb}");
    assert_eq!(fb["_meta"]["unrouted"], json!(["never-served"]), "{fb}");
    let listed =
        Command::new(dense_bin()).args(["quarantine", "list"]).arg("--data-dir").arg(&data).output().expect("list");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.lines().any(|l| l.starts_with("heat-2\t")), "the dense engine stored it: {listed:?}");
    drop(gw);
}

#[tokio::test(flavor = "multi_thread")]
async fn fused_pages_follow_one_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            fixture("a", &["--doc", "1:wing lift", "--doc", "2:wing", "--doc", "3:lift", "--doc", "4:wing lift drag"]),
            fixture("b", &["--doc", "2:wing", "--doc", "5:wing drag", "--doc", "6:lift"]),
        ],
    );
    let gw = gateway(&reg, &[]).await;
    let all = gw.call("retrieve", json!({"query": "wing lift drag", "k": 6})).await.expect("retrieve");
    let first = gw.call("retrieve", json!({"query": "wing lift drag", "k": 3})).await.expect("page 1");
    let cursor = first["nextCursor"].as_str().expect("a next page").to_owned();
    let second =
        gw.call("retrieve", json!({"query": "wing lift drag", "k": 3, "cursor": cursor})).await.expect("page 2");
    let mut paged = ids(&first, "hits");
    paged.extend(ids(&second, "hits"));
    assert_eq!(paged, ids(&all, "hits"));
    assert!(second.get("nextCursor").is_none(), "six hits in all: {second}");
    // A cursor of another query is refused.
    let wrong = gw.call("retrieve", json!({"query": "wing", "k": 3, "cursor": cursor})).await.unwrap_err();
    assert_eq!(wrong.code(), Some(rcp_wire::ErrorCode::INVALID_PARAMS), "{wrong}");
}

#[tokio::test(flavor = "multi_thread")]
async fn distinct_corpora_keep_one_id_of_two_engines_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rcp.json");
    let entries = vec![
        fixture("one", &["--doc", "rust-3:tantivy search engine"]),
        fixture("two", &["--doc", "rust-3:tokio async search runtime"]),
    ];
    std::fs::write(&path, json!({"corpora": "distinct", "engines": entries}).to_string()).expect("write");
    let gw = gateway(&path, &[]).await;
    let r = gw.call("retrieve", json!({"query": "search", "k": 5})).await.expect("retrieve");
    let mut got = ids(&r, "hits");
    got.sort();
    assert_eq!(got, ["one:rust-3", "two:rust-3"], "{r}");
    for h in r["hits"].as_array().into_iter().flatten() {
        let engine = h["meta"]["engine"].as_str().unwrap_or_default();
        assert!(h["id"].as_str().unwrap_or_default().starts_with(engine), "the id's namespace is its engine: {h}");
        let want = if engine == "one" { "tantivy" } else { "tokio" };
        assert!(h["text"].as_str().unwrap_or_default().contains(want), "its own text: {h}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_routed_call_fails_over_within_one_model_and_never_across_models() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events");
    let ev = events.to_string_lossy().into_owned();
    let mut first = fixture("first", &["--embed", "4", "--exit-after", "0", "--events", &ev]);
    first["priority"] = json!(5);
    let mut twin = fixture("twin", &["--embed", "4", "--events", &ev]);
    twin["priority"] = json!(1);
    let other = fixture("other", &["--embed", "8", "--events", &ev]);
    let reg = write_registry(dir.path(), "rcp.json", vec![first, twin, other]);
    let gw = gateway(&reg, &[]).await;
    // The advertised descriptor is the one a plain call reaches: the highest priority.
    let embed = gw.capabilities().embed.expect("embed advertised");
    assert_eq!((embed.dimension, embed.identity.as_str()), (4, "fixture-4"));
    // `first` advertises embed, then dies on its first call: its twin (same model) answers.
    let r = gw.call("embed", json!({"inputs": ["abc"]})).await.expect("embed");
    assert_eq!(r["vectors"][0], json!([3.0, 1.0, 0.0, 0.0]), "{r}");
    let notes = r["_meta"]["notes"].to_string();
    assert!(notes.contains("engine 'first' failed") && notes.contains("served by engine 'twin'"), "{r}");
    assert!(!common::events(&events).iter().any(|l| l == "other embed"), "the 8-d engine is never a failover");
    // An explicit choice within the advertised model is obeyed; one of another model, or of
    // no engine, is refused with the reason (its vectors would not be the advertised ones).
    let r = gw.call("embed", json!({"inputs": ["ab"], "_meta": {"engine": "twin"}})).await.expect("embed");
    assert_eq!(r["vectors"][0], json!([2.0, 1.0, 0.0, 0.0]), "{r}");
    let err = gw.call("embed", json!({"inputs": ["abc"], "_meta": {"engine": "other"}})).await.unwrap_err();
    assert_eq!(err.code(), Some(rcp_wire::ErrorCode::INVALID_PARAMS), "{err}");
    assert!(err.to_string().contains("another model"), "{err}");
    let err = gw.call("embed", json!({"inputs": ["abc"], "_meta": {"engine": "nope"}})).await.unwrap_err();
    assert_eq!(err.code(), Some(rcp_wire::ErrorCode::INVALID_PARAMS), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_ids_are_accepted_back_by_index_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rcp.json");
    let entries = vec![
        json!({"id": "one", "command": [bm25_bin(), "serve"]}),
        json!({"id": "two", "command": [bm25_bin(), "serve"]}),
    ];
    std::fs::write(&path, json!({"corpora": "distinct", "engines": entries}).to_string()).expect("write");
    let gw = gateway(&path, &[]).await;
    let found = |r: &Value| ids(r, "hits").into_iter().filter(|i| i.ends_with(":rust-3")).collect::<Vec<_>>();
    let r = gw.call("retrieve", json!({"query": "tantivy", "k": 10})).await.expect("retrieve");
    let mut both = found(&r);
    both.sort();
    assert_eq!(both, ["one:rust-3", "two:rust-3"], "one built-in corpus in each engine: {r}");
    // Deleting 'one:rust-3' removes the document of collection 'one' only.
    let d = gw.call("index/delete", json!({"ids": ["one:rust-3"]})).await.expect("index/delete");
    assert_eq!(d["deleted"], 1, "{d}");
    let r = gw.call("retrieve", json!({"query": "tantivy", "k": 10})).await.expect("retrieve");
    assert_eq!(found(&r), ["two:rust-3"], "{r}");
    // A bare id is refused: it names no collection.
    let err = gw.call("index/delete", json!({"ids": ["rust-3"]})).await.unwrap_err();
    assert_eq!(err.code(), Some(rcp_wire::ErrorCode::INVALID_PARAMS), "{err}");
    // index/add answers ids in the collection's namespace and accepts them so.
    let a = gw
        .call(
            "index/add",
            json!({"documents": [{"id": "two:gw-1", "text": "a federated write"}], "_meta": {"collection": "two"}}),
        )
        .await
        .expect("index/add");
    assert_eq!(a["ids"], json!(["two:gw-1"]), "{a}");
    let err = gw
        .call("index/add", json!({"documents": [{"id": "one:gw-2", "text": "x"}], "_meta": {"collection": "two"}}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(rcp_wire::ErrorCode::INVALID_PARAMS), "{err}");
}
