//! `memory/build` and `memory/recall` (§7.17) through the real binary (`serve --graph`): clues
//! that lead to the query's topic, inline memories, bad input, persistence across restarts,
//! staleness after writes, and a damaged memory file. Every frame is checked against the
//! schema by the testkit.

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::serve;
use rcp_testkit::code;
use serde_json::{Value, json};

/// The seed ids of every clue, in order.
fn seeds(r: &Value) -> Vec<Vec<String>> {
    r["clues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seedIds"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .collect()
}

fn weights(r: &Value) -> Vec<f64> {
    r["clues"].as_array().unwrap().iter().map(|c| c["weight"].as_f64().unwrap()).collect()
}

#[test]
fn clues_lead_to_the_query_topic_and_bad_input_is_refused() {
    let mut e = serve(&["--graph"]);
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    assert_eq!(caps["memory"], json!({"scopes": ["global", "session"], "clues": true}));

    // Recall before any build builds the live index's memory.
    let r = e.ok("memory/recall", json!({"query": "memory safety, ownership and borrowing in Rust", "n": 3}));
    let clues = r["clues"].as_array().unwrap();
    assert!(!clues.is_empty() && clues.len() <= 3, "{r}");
    let w = weights(&r);
    assert_eq!(w[0], 1.0);
    assert!(w.windows(2).all(|p| p[0] >= p[1] && p[1] >= 0.0), "{w:?}");
    assert!(seeds(&r)[0][0].starts_with("rust-"), "seeds are the members nearest the query: {r}");
    // Draft hits: the clues' entry points, each once, best cosine first, as retrieve scores them.
    let hits = r["hits"].as_array().unwrap();
    let named: HashSet<String> = seeds(&r).concat().into_iter().collect();
    let hit_ids: Vec<&str> = hits.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(hit_ids.iter().copied().collect::<HashSet<_>>().len(), hit_ids.len(), "{r}");
    assert_eq!(hit_ids.iter().map(|&h| h.to_owned()).collect::<HashSet<_>>(), named, "{r}");
    assert!(hit_ids[0].starts_with("rust-"), "{r}");
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|p| p[0] >= p[1]), "{scores:?}");
    assert_eq!(hits[0]["scores"]["dense"], hits[0]["score"]);
    assert!(hits[0]["text"].as_str().is_some_and(|t| !t.is_empty()));
    let top =
        e.ok("retrieve", json!({"query": "memory safety, ownership and borrowing in Rust", "k": 1}))["hits"][0].clone();
    assert_eq!(top["id"], hits[0]["id"], "the nearest entry point is the nearest document");
    assert!((top["score"].as_f64().unwrap() - scores[0]).abs() < 1e-3, "{top} vs {}", hits[0]);
    // Every seed is a stored document: a graph walk from it is answered.
    for s in seeds(&r).concat() {
        e.ok("graph", json!({"op": "neighbors", "seedIds": [s], "k": 2}));
    }
    // The first clue's surrogate query retrieves the topic.
    let q = clues[0]["query"].as_str().unwrap();
    assert!(q.starts_with("memory safety, ownership and borrowing in Rust "), "{q}");
    let hits = e.ok("retrieve", json!({"query": q, "k": 1}))["hits"].clone();
    assert!(hits[0]["id"].as_str().unwrap().starts_with("rust-"), "{hits}");

    let built = e.ok("memory/build", json!({"scope": "global"}));
    assert_eq!(built["memoryId"], "index");
    assert!(built["tokens"].as_u64().unwrap() > 0);
    let again = e.ok(
        "memory/recall",
        json!({"query": "memory safety, ownership and borrowing in Rust", "n": 3, "memoryId": "index"}),
    );
    assert_eq!(again, r, "an unchanged index recalls from the same memory");

    // An inline memory: its own documents, its own ids.
    let built = e.ok("memory/build", json!({"documents": common::topical_documents()}));
    let id = built["memoryId"].as_str().unwrap().to_owned();
    assert_ne!(id, "index");
    let r = e.ok("memory/recall", json!({"query": "baking bread and cooking pasta", "memoryId": id, "n": 1}));
    assert_eq!(r["clues"].as_array().unwrap().len(), 1);
    assert!(seeds(&r)[0].iter().all(|s| s.starts_with("cook-")), "{r}");
    let r = e.ok("memory/recall", json!({"query": "shock waves on a supersonic wing", "memoryId": id, "n": 1}));
    assert!(seeds(&r)[0].iter().all(|s| s.starts_with("wing-")), "{r}");
    // Updating it replaces its documents.
    let docs = json!([{"id": "a", "text": "Jazz improvisation over chord changes."}, {"id": "b", "text": "Playing bebop saxophone solos."}]);
    assert_eq!(e.ok("memory/build", json!({"documents": docs, "memoryId": id}))["memoryId"], id.as_str());
    let r = e.ok("memory/recall", json!({"query": "music", "memoryId": id}));
    let ids: HashSet<String> = seeds(&r).concat().into_iter().collect();
    assert_eq!(ids, HashSet::from(["a".to_owned(), "b".to_owned()]));

    // Bad input: precise errors, and the server keeps serving.
    let field = |err: &Value| (code(err), err["data"]["field"].as_str().map(str::to_owned));
    let err = e.err("memory/recall", json!({"query": "  "}));
    assert_eq!(field(&err), (-32602, Some("query".into())));
    let err = e.err("memory/recall", json!({"query": "rust", "n": 0}));
    assert_eq!(code(&err), -32602);
    assert_eq!(code(&e.err("memory/recall", json!({"query": "rust", "memoryId": "no-such-memory"}))), -32015);
    assert_eq!(code(&e.err("memory/build", json!({"memoryId": "no-such-memory"}))), -32015);
    let err = e.err("memory/build", json!({"scope": "tenant"}));
    assert_eq!((code(&err), err["data"]["option"].as_str()), (-32005, Some("scope")));
    let err = e.err("memory/build", json!({"documents": []}));
    assert_eq!(field(&err), (-32602, Some("documents".into())));
    let err = e.err("memory/build", json!({"documents": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}));
    assert_eq!(field(&err), (-32602, Some("documents[1].id".into())));
    let err = e.err("memory/build", json!({"documents": [{"text": "a"}], "memoryId": "index"}));
    assert_eq!(field(&err), (-32602, Some("memoryId".into())));
    let err = e.err("memory/build", json!({"memoryId": id}));
    assert_eq!(field(&err), (-32602, Some("documents".into())));
    let many: Vec<Value> = (0..1025).map(|i| json!({"text": format!("d{i}")})).collect();
    let err = e.err("memory/build", json!({"documents": many}));
    assert_eq!(field(&err), (-32602, Some("documents".into())));
    assert!(!e.ok("memory/recall", json!({"query": "rust"}))["clues"].as_array().unwrap().is_empty());
}

fn modified(file: &Path) -> std::time::SystemTime {
    std::fs::metadata(file).unwrap().modified().unwrap()
}

#[test]
fn the_memory_persists_follows_writes_and_damage_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let args = ["--data-dir", dir, "--create", "--graph"];
    let file = tmp.path().join("memory.rcpm");
    let before;
    {
        let mut e = serve(&args);
        e.ok("index/add", json!({"documents": common::topical_documents()}));
        assert!(!file.exists(), "the memory is built on demand");
        assert_eq!(e.ok("memory/build", json!({}))["memoryId"], "index");
        before = e.ok("memory/recall", json!({"query": "heat transfer in boundary layers", "n": 2}));
        assert!(seeds(&before)[0].iter().all(|s| s.starts_with("heat-")), "{before}");
    }
    assert!(file.is_file());
    let saved = modified(&file);
    {
        // Loaded as saved: the same clues, and no rebuild (the file is not rewritten).
        let mut e = serve(&args);
        assert_eq!(e.ok("memory/recall", json!({"query": "heat transfer in boundary layers", "n": 2})), before);
        assert_eq!(modified(&file), saved);
        // A write makes it stale: the next recall rebuilds it without the deleted documents.
        assert_eq!(e.ok("index/delete", json!({"ids": ["heat-0", "heat-1", "heat-2", "heat-3"]}))["deleted"], 4);
        let r = e.ok("memory/recall", json!({"query": "heat transfer in boundary layers", "n": 10}));
        assert!(!r.to_string().contains("heat-"), "{r}");
        assert_ne!(modified(&file), saved, "the rebuilt memory was saved");
        e.ok(
            "index/add",
            json!({"documents": [{"id": "heat-9", "text": "Convective heat transfer from a heated flat plate."}]}),
        );
    }
    // Damage: logged and rebuilt on open, never served in part.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xFF;
    std::fs::write(&file, &bytes).unwrap();
    let mut e = serve(&args);
    let rebuilt = std::fs::read(&file).unwrap();
    assert_ne!(rebuilt, bytes, "the rebuilt memory was saved on open");
    assert!(rcp_dense::memory::file::decode(&rebuilt).is_ok());
    let r = e.ok("memory/recall", json!({"query": "heat transfer in boundary layers", "n": 10}));
    let named = seeds(&r).concat();
    assert!(!named.is_empty() && named.iter().all(|s| s != "heat-0" && s != "heat-1"), "{r}");
}

/// `scope: "session"` (§7.17): a memory its own session recalls, another session is told does
/// not exist, and a stateless request's (a session that ends with its answer) is gone at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_memory_lives_and_dies_with_its_session() {
    use rcp_client::{Client, ClientOptions};
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["serve", "--graph", "--stateful", "--http", "127.0.0.1:0"]);
    cmd.env("RCP_MODEL_DIR", common::model_dir());
    let server = rcp_testkit::HttpServer::spawn(cmd);
    let a = Client::connect_http(&server.url, ClientOptions::default()).await.expect("session a");
    let b = Client::connect_http(&server.url, ClientOptions::default()).await.expect("session b");
    assert_eq!(a.capabilities().memory.map(|m| m.scopes), Some(vec!["global".into(), "session".into()]));
    let docs = json!([{"id": "w1", "text": "Swept wings delay the drag rise at transonic speed."},
                      {"id": "w2", "text": "Wing sweep and lift at high subsonic Mach numbers."},
                      {"id": "h1", "text": "Heat transfer to a cooled flat plate in hypersonic flow."}]);
    let built = a.call("memory/build", json!({"documents": docs, "scope": "session"})).await.expect("build");
    let id = built["memoryId"].as_str().expect("memoryId").to_owned();
    let mine = a.call("memory/recall", json!({"query": "wing sweep", "memoryId": id})).await.expect("own session");
    assert!(!mine["clues"].as_array().expect("clues").is_empty(), "{mine}");
    let theirs = b.call("memory/recall", json!({"query": "wing sweep", "memoryId": id})).await.expect_err("b");
    assert_eq!(theirs.code(), Some(rcp_wire::ErrorCode::NOT_FOUND), "{theirs}");
    let update = b.call("memory/build", json!({"documents": docs, "memoryId": id, "scope": "session"})).await;
    assert_eq!(update.expect_err("b updates").code(), Some(rcp_wire::ErrorCode::NOT_FOUND));
    // A global memory is everyone's.
    let global = a.call("memory/build", json!({"documents": docs})).await.expect("global");
    let gid = global["memoryId"].as_str().expect("memoryId");
    b.call("memory/recall", json!({"query": "wing", "memoryId": gid})).await.expect("b recalls a global memory");
    // A replacement keeps the scope: neither kind of memory can be taken over by the other.
    let hijack = b.call("memory/build", json!({"documents": docs, "memoryId": gid, "scope": "session"})).await;
    assert_eq!(hijack.expect_err("a global memory made b's").code(), Some(rcp_wire::ErrorCode::NOT_FOUND));
    let publish = a.call("memory/build", json!({"documents": docs, "memoryId": id})).await;
    assert_eq!(publish.expect_err("a session memory made global").code(), Some(rcp_wire::ErrorCode::NOT_FOUND));
    a.call("memory/recall", json!({"query": "wing", "memoryId": id})).await.expect("still a's");
    b.call("memory/recall", json!({"query": "wing", "memoryId": gid})).await.expect("still everyone's");

    // Token-less requests without a session header are stateless: each its own session.
    let http = |body: Value| stateless_post(&server.url, &body);
    let built = http(json!({"jsonrpc": "2.0", "id": 1, "method": "memory/build",
                             "params": {"documents": docs, "scope": "session"}}));
    let sid = built["result"]["memoryId"].as_str().expect("memoryId").to_owned();
    let gone = http(json!({"jsonrpc": "2.0", "id": 2, "method": "memory/recall",
                            "params": {"query": "wing", "memoryId": sid}}));
    assert_eq!(gone["error"]["code"], -32015, "{gone}");
}

/// One token-less HTTP/1.1 POST with no session header: a stateless request (§5.2).
fn stateless_post(url: &str, body: &Value) -> Value {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http url");
    let (addr, path) = rest.split_once('/').expect("a path");
    let body = body.to_string();
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "POST /{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    let (_, payload) = answer.split_once("\r\n\r\n").expect("headers end");
    serde_json::from_str(payload.trim()).unwrap_or_else(|e| panic!("{e}: {answer}"))
}
