//! Hostile metadata written through every engine (rcp-bm25, rcp-dense, rcp-pg) and read back:
//! a string holding U+0000, a key holding it, a lone surrogate escape (`\ud800`), a 1 MiB
//! string, 100 levels of nesting. Each engine either stores the document exactly as sent or
//! refuses it precisely (`-32602` naming a field of the document, or `-32700` for a frame that
//! is not valid JSON) and stores nothing; an acknowledged write is never altered.

use std::path::PathBuf;
use std::time::Duration;

use rcp_testkit::pg::PgCluster;
use rcp_testkit::{Engine, workspace_bin};
use serde_json::{Value, json};

/// The hostile documents: id and metadata.
fn hostile() -> Vec<(&'static str, Value)> {
    let mut deep = json!("bottom");
    for _ in 0..100 {
        deep = json!({"d": deep});
    }
    vec![
        ("nul", json!({"topic": "science", "year": 1999, "note": "a\u{0}b"})),
        ("nulkey", json!({"topic": "science", "a\u{0}b": 1})),
        ("big", json!({"topic": "science", "note": "x".repeat(1 << 20)})),
        ("deep", json!({"topic": "science", "nest": deep})),
        ("plain", json!({"topic": "science", "year": 1999, "note": "ab"})),
    ]
}

fn text(id: &str) -> String {
    format!("hostile metadata probe {id}")
}

/// The hit of document `id` (queried by its own text), if it is stored.
fn stored(e: &mut Engine, id: &str) -> Option<Value> {
    let r = e.ok("retrieve", json!({"query": text(id), "k": 20}));
    r["hits"].as_array().expect("hits").iter().find(|h| h["id"] == id).cloned()
}

fn call(e: &mut Engine, frame: &str, id: i64) -> Value {
    e.send_raw(frame);
    e.response_for(&json!(id), Duration::from_secs(60))
}

/// Writes every hostile document through `e` and reads each back. Returns what happened to
/// each, for the report.
fn write_and_read_back(e: &mut Engine, engine: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for (n, (id, meta)) in hostile().into_iter().enumerate() {
        let n = n as i64 + 1;
        let doc = json!({"id": id, "text": text(id), "meta": meta});
        let frame = json!({"jsonrpc": "2.0", "id": n, "method": "index/add", "params": {"documents": [doc]}});
        let r = call(e, &frame.to_string(), n);
        match (r.get("result"), r.get("error")) {
            (Some(_), _) => {
                let hit = stored(e, id).unwrap_or_else(|| panic!("{engine}: '{id}' acknowledged but not stored"));
                assert_eq!(hit["meta"], meta, "{engine}: '{id}' acknowledged, then read back altered");
                seen.push(format!("{id}: stored exactly"));
            }
            (_, Some(err)) => {
                let field = err["data"]["field"].as_str().unwrap_or_default();
                assert!(
                    err["code"] == -32602 && field.starts_with("documents[0]"),
                    "{engine}: '{id}' refused imprecisely (want -32602 naming the document's field): {err}"
                );
                assert!(stored(e, id).is_none(), "{engine}: '{id}' refused, yet stored");
                seen.push(format!("{id}: refused at {field}"));
            }
            _ => panic!("{engine}: not an answer: {r}"),
        }
    }
    // A lone surrogate cannot be held by any Rust string: refused, never stored as U+FFFD.
    let id = "surrogate";
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"index/add","params":{{"documents":[{{"id":"{id}","text":"{}","meta":{{"note":"a\ud800b"}}}}]}}}}"#,
        text(id)
    );
    let r = call(e, &frame, 99);
    let code = r["error"]["code"].as_i64();
    assert!(matches!(code, Some(-32602 | -32700)), "{engine}: a lone surrogate was not refused: {r}");
    assert!(stored(e, id).is_none(), "{engine}: a lone surrogate was refused, yet stored");
    seen.push(format!("{id}: refused {}", code.unwrap_or_default()));
    assert!(stored(e, "plain").is_some(), "{engine}: the engine stopped serving");
    seen
}

#[test]
fn bm25_stores_hostile_metadata_exactly_or_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bin = workspace_bin("rcp-bm25", "rcp-bm25");
    let mut e = Engine::spawn(&bin, &["serve", "--create", "--data-dir", data.to_str().expect("utf-8")]);
    e.initialize();
    eprintln!("rcp-bm25: {:?}", write_and_read_back(&mut e, "rcp-bm25"));
}

#[test]
fn dense_stores_hostile_metadata_exactly_or_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bin = workspace_bin("rcp-dense", "rcp-dense");
    let mut e =
        Engine::spawn(&bin, &["serve", "--fetch-model", "--create", "--data-dir", data.to_str().expect("utf-8")]);
    e.initialize();
    eprintln!("rcp-dense: {:?}", write_and_read_back(&mut e, "rcp-dense"));
}

fn pg_bin() -> Option<PathBuf> {
    match PgCluster::shared() {
        Ok(_) => Some(workspace_bin("rcp-pg", "rcp-pg")),
        Err(e) if std::process::Command::new("python3").arg("--version").output().is_err() => {
            eprintln!("SKIP: PostgreSQL cannot be provisioned without python3 ({e})");
            None
        }
        Err(e) => panic!("PostgreSQL could not be started: {e}"),
    }
}

#[test]
fn pg_stores_hostile_metadata_exactly_or_refuses_it() {
    let Some(bin) = pg_bin() else { return };
    let url = PgCluster::shared().and_then(|c| c.create_database("hostile")).expect("database");
    let mut e = Engine::spawn(&bin, &["serve", "--fetch-model", "--database-url", &url, "--field", "topic:keyword"]);
    e.initialize();
    let seen = write_and_read_back(&mut e, "rcp-pg");
    eprintln!("rcp-pg: {seen:?}");
    assert!(seen.iter().any(|s| s == "nul: refused at documents[0].meta.note"), "{seen:?}");

    // NUL in a query or a filter operand is the client's input, not a server failure.
    let err = e.err("retrieve", json!({"query": "a\u{0}b", "k": 3}));
    assert_eq!((err["code"].as_i64(), err["data"]["field"].as_str()), (Some(-32602), Some("query")), "{err}");
    let filter = json!({"and": [{"field": "topic", "op": "eq", "value": "science"}, {"field": "topic", "op": "eq", "value": "a\u{0}b"}]});
    let err = e.err("retrieve", json!({"query": "probe", "k": 3, "filter": filter}));
    assert_eq!(
        (err["code"].as_i64(), err["data"]["field"].as_str()),
        (Some(-32602), Some("filter.and[1].value")),
        "{err}"
    );
}
