//! Writes through the real binary: persistence across restarts, upsert and delete semantics,
//! crash recovery after SIGKILL, and cancellation of a large `index/add`.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{bin, model_dir, serve};
use rcp_testkit::{Engine, kill9};
use serde_json::{Value, json};

fn ids(res: &Value) -> Vec<String> {
    res["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_owned()).collect()
}

fn dir_arg(dir: &Path) -> &str {
    dir.to_str().expect("utf-8 path")
}

#[test]
fn writes_persist_across_restarts_with_upsert_and_delete_semantics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_arg(tmp.path());
    let args = ["--data-dir", dir, "--create", "--field", "topic:keyword", "--full-scan-threshold", "0"];
    let docs = json!([
        {"id": "a", "text": "The write-ahead log is fsynced before a write is acknowledged.", "meta": {"topic": "db"}},
        {"id": "b", "text": "Hierarchical navigable small world graphs index vectors.", "meta": {"topic": "ann"}},
        {"id": "c", "text": "Bees make honey from the nectar of flowers.", "meta": {"topic": "nature"}},
    ]);
    let query = |q: &str| json!({"query": q, "k": 3, "includeText": false});
    let before;
    {
        let mut e = serve(&args);
        assert_eq!(e.ok("index/add", json!({"documents": docs}))["ids"], json!(["a", "b", "c"]));
        // Repeating an identical add is observationally identical (§7.10).
        assert_eq!(e.ok("index/add", json!({"documents": docs}))["ids"], json!(["a", "b", "c"]));
        let res = e.ok("retrieve", query("graph index for nearest neighbours"));
        assert_eq!(ids(&res)[0], "b");
        assert_eq!(res["hits"].as_array().unwrap().len(), 3, "no duplicate copies after the repeat");
        assert_eq!(res["hits"][0]["trust"]["level"], "community");

        // Upsert replaces: the new text is found, the old one is gone, one copy only.
        let new_a = "Honey bees dance to tell the hive where the flowers are.";
        e.ok("index/add", json!({"documents": [{"id": "a", "text": new_a, "meta": {"topic": "nature"}}]}));
        let res = e.ok("retrieve", query(new_a));
        assert_eq!(ids(&res)[0], "a");
        assert!(res["hits"][0]["score"].as_f64().unwrap() > 0.99);
        assert_eq!(ids(&res).iter().filter(|i| *i == "a").count(), 1);
        let res = e.ok(
            "retrieve",
            json!({"query": "acknowledged writes", "k": 3, "filter": {"field": "topic", "op": "eq", "value": "db"}}),
        );
        assert!(ids(&res).is_empty(), "the old version of 'a' must not match any more: {res}");

        // Delete is idempotent and counts only what it removed (§7.11).
        assert_eq!(e.ok("index/delete", json!({"ids": ["c", "zzz"]}))["deleted"], 1);
        assert_eq!(e.ok("index/delete", json!({"ids": ["c"]}))["deleted"], 0);
        before = e.ok("retrieve", query("bees and flowers"));
        assert_eq!(ids(&before).len(), 2);
        assert!(!ids(&before).contains(&"c".to_owned()));
        e.ok("shutdown", json!({}));
    }
    let mut e = serve(&args);
    let after = e.ok("retrieve", query("bees and flowers"));
    assert_eq!(after["hits"], before["hits"], "same hits and scores after a restart");
    assert_eq!(e.ok("index/delete", json!({"ids": ["c"]}))["deleted"], 0, "the delete persisted");
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    assert_eq!(caps["filter"]["fields"], json!({"topic": "keyword"}), "fields persist in the data directory");
}

#[test]
fn index_command_builds_a_data_dir_the_server_reloads_without_re_embedding() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus.jsonl");
    let mut f = std::fs::File::create(&corpus).unwrap();
    for i in 0..40 {
        let topic = ["ships", "planes", "trains", "rockets"][i % 4];
        writeln!(f, "{}", json!({"_id": format!("d{i}"), "title": format!("About {topic}"), "text": format!("Document {i} is about {topic} and their engines."), "kind": topic, "n": i})).unwrap();
    }
    drop(f);
    let data = tmp.path().join("idx");
    let model = model_dir();
    let run = || {
        std::process::Command::new(bin())
            .args(["index", "--data-dir", dir_arg(&data), dir_arg(&corpus)])
            .env("RCP_MODEL_DIR", &model)
            .output()
            .unwrap()
    };
    let out = run();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("indexed 40 documents") && log.contains("40 embedded"), "{log}");
    assert!(log.contains("docs/s"), "{log}");
    assert!(log.contains("kind:keyword") && log.contains("n:int"), "{log}");
    // Re-indexing the same corpus embeds nothing.
    let out = run();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("0 embedded, 0 metadata-only, 40 unchanged"), "{log}");
    // A metadata-only change keeps every vector; a changed text is embedded again; an
    // unusable line is skipped with FILE:LINE, and with --strict refused before anything runs.
    let mut f = std::fs::File::create(&corpus).unwrap();
    for i in 0..40 {
        let topic = ["ships", "planes", "trains", "rockets"][i % 4];
        let text = if i == 0 {
            "Document zero was rewritten.".to_owned()
        } else {
            format!("Document {i} is about {topic} and their engines.")
        };
        writeln!(
            f,
            "{}",
            json!({"_id": format!("d{i}"), "title": format!("About {topic}"), "text": text, "kind": topic, "n": i + 1})
        )
        .unwrap();
    }
    writeln!(f, "{{not json").unwrap();
    drop(f);
    let strict = std::process::Command::new(bin())
        .args(["index", "--strict", "--data-dir", dir_arg(&data), dir_arg(&corpus)])
        .env("RCP_MODEL_DIR", &model)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&strict.stderr);
    assert!(
        strict.status.code() == Some(1)
            && log.contains("corpus.jsonl:41")
            && log.contains("nothing of this run was written"),
        "{log}"
    );
    let out = run();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a skipped line makes the exit code 1: {log}");
    assert!(log.contains("corpus.jsonl:41"), "the skipped line is named: {log}");
    assert!(log.contains("1 embedded, 39 metadata-only, 0 unchanged; 1 lines skipped"), "{log}");

    let mut e = serve(&["--data-dir", dir_arg(&data), "--full-scan-threshold", "0"]);
    let res = e.ok(
        "retrieve",
        json!({"query": "rockets", "k": 5, "filter": {"field": "kind", "op": "eq", "value": "rockets"}}),
    );
    assert_eq!(res["hits"].as_array().unwrap().len(), 5);
    for h in res["hits"].as_array().unwrap() {
        assert_eq!(h["meta"]["kind"], "rockets");
        assert_eq!(h["trust"]["level"], "trusted");
        assert_eq!(h["citation"]["title"], "About rockets");
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_and_a_torn_log_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_arg(tmp.path());
    let model = model_dir();
    let env = [("RCP_MODEL_DIR", model.to_str().unwrap())];
    let mut e = Engine::spawn_env(&bin(), &["serve", "--data-dir", dir, "--create"], &env);
    e.initialize();
    let requests = 60;
    for r in 0..requests {
        let docs: Vec<Value> = (0..4)
            .map(|i| json!({"id": format!("r{r}-{i}"), "text": format!("Request {r} document {i} about crash recovery.")}))
            .collect();
        e.send(&json!({"jsonrpc": "2.0", "id": r, "method": "index/add", "params": {"documents": docs}}));
    }
    // Collect acknowledgements for a while, then kill the engine mid-stream.
    let mut acked: Vec<String> = Vec::new();
    let mut answered = 0;
    while answered < requests / 3 {
        let v = e.recv_response(Duration::from_secs(60)).expect("an acknowledgement");
        answered += 1;
        if let Some(res) = v.get("result") {
            acked.extend(res["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_owned()));
        }
    }
    kill9(&mut e);
    assert!(!acked.is_empty());
    // Simulate a write torn by the crash: half a record at the end of the log.
    let mut wal = std::fs::OpenOptions::new().append(true).open(tmp.path().join("wal.log")).unwrap();
    wal.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, 9, 9]).unwrap();
    drop(wal);

    let mut e = serve(&["--data-dir", dir]);
    let unique: HashSet<&String> = acked.iter().collect();
    let res = e.ok("index/delete", json!({"ids": acked}));
    assert_eq!(res["deleted"].as_u64().unwrap() as usize, unique.len(), "every acknowledged id survived");
    // The log is writable after the torn tail was cut off.
    e.ok("index/add", json!({"documents": [{"id": "after", "text": "written after recovery"}]}));
    drop(e);
    let mut e = serve(&["--data-dir", dir]);
    assert_eq!(e.ok("index/delete", json!({"ids": ["after"]}))["deleted"], 1);
}

#[test]
fn a_cancelled_index_add_stops_embedding_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = serve(&["--data-dir", dir_arg(tmp.path()), "--create"]);
    let ids: Vec<String> = (0..3000).map(|i| format!("c-{i}")).collect();
    let docs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "text": format!("Document {id} about wind tunnels and airfoils.")}))
        .collect();
    let add_id = json!("big");
    e.send(&json!({"jsonrpc": "2.0", "id": add_id, "method": "index/add", "params": {"documents": docs}}));
    std::thread::sleep(Duration::from_millis(800));
    let sent = Instant::now();
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": add_id}}));
    let r = e.response_for(&add_id, Duration::from_secs(30));
    assert_eq!(r["error"]["code"], -32006, "{r}");
    // The encoder is free again soon: it stopped between batches instead of finishing 3,000 texts.
    let res = e.ok("embed", json!({"inputs": ["still responsive"]}));
    assert_eq!(res["vectors"].as_array().unwrap().len(), 1);
    assert!(sent.elapsed() < Duration::from_secs(5), "encoder busy for {:?} after the cancel", sent.elapsed());
    assert_eq!(e.ok("index/delete", json!({"ids": ids}))["deleted"], 0, "a cancelled add writes nothing");
}
