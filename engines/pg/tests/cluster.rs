//! Many processes, one index; and a database that goes away and comes back.

mod common;

use common::{FIELDS, database, docs, ids, serve};
use rcp_testkit::code;
use rcp_testkit::pg::PgCluster;
use serde_json::{Value, json};

#[test]
fn two_processes_read_each_others_writes_at_once() {
    let Some(url) = database("two") else { return };
    let mut a = serve(&url, &FIELDS);
    let mut b = serve(&url, &FIELDS);
    a.ok("index/add", json!({"documents": docs()}));
    // Acknowledged by A means committed: B's next query sees it.
    let seen = b.ok("retrieve", json!({"query": "sourdough bread crust", "k": 1, "mode": "sparse"}));
    assert_eq!(ids(&seen), vec!["bread"]);
    // Interleaved writes from both: each sees the other's, versions are shared and gap-free.
    for i in 0..5 {
        let (w, r) = if i % 2 == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };
        let id = format!("note-{i}");
        w.ok("index/add", json!({"documents": [{"id": id, "text": format!("quasar number {i} observed")}]}));
        let got = r.ok("retrieve", json!({"query": format!("quasar number {i}"), "k": 1, "mode": "sparse"}));
        assert_eq!(ids(&got), vec![id]);
        assert_eq!(got["indexVersion"], json!((i + 2).to_string()));
    }
    b.ok("index/delete", json!({"ids": ["bread"]}));
    let gone = a.ok("retrieve", json!({"query": "sourdough bread crust", "k": 5, "mode": "hybrid"}));
    assert!(!ids(&gone).contains(&"bread".to_owned()), "{gone}");
    // Concurrent writes from both processes to one document serialise; the last write wins
    // everywhere and the collection statistics stay exact.
    let ida = json!(9001);
    let idb = json!(9002);
    a.send(&json!({"jsonrpc": "2.0", "id": ida, "method": "index/add", "params": {"documents": [{"id": "x", "text": "alpha alpha"}]}}));
    b.send(&json!({"jsonrpc": "2.0", "id": idb, "method": "index/add", "params": {"documents": [{"id": "x", "text": "beta beta"}]}}));
    assert!(a.response_for(&ida, std::time::Duration::from_secs(60))["result"].is_object());
    assert!(b.response_for(&idb, std::time::Duration::from_secs(60))["result"].is_object());
    let c = common::cluster().expect("cluster");
    let db = url.rsplit('/').next().expect("db name");
    let state = c.psql(db, "SELECT doc_count FROM rcp_state").expect("psql");
    let actual = c.psql(db, "SELECT count(*) FROM rcp_documents").expect("psql");
    assert_eq!(state.trim(), actual.trim(), "doc_count drifted");
    let df = c
        .psql(db, "SELECT count(*) FROM rcp_terms t WHERE t.df <> (SELECT count(*) FROM rcp_documents d WHERE d.tsv @@ to_tsquery('simple', quote_literal(t.lexeme)))")
        .expect("psql");
    assert_eq!(df.trim(), "0", "document frequencies drifted");
    let postings = c
        .psql(
            db,
            "SELECT (SELECT count(*) FROM rcp_postings) = (SELECT coalesce(sum(length(tsv)), 0) FROM rcp_documents)",
        )
        .expect("psql");
    assert_eq!(postings.trim(), "t", "postings drifted");
}

#[test]
fn sslmode_require_refuses_a_server_without_tls_and_the_url_is_not_logged() {
    let Some(url) = database("tls") else { return };
    let secret = url.replace("postgres@", "postgres:hunter2@");
    let out = std::process::Command::new(common::bin())
        .args(["migrate", "--connect-timeout", "0", "--database-url"])
        .arg(format!("{secret}?sslmode=require"))
        .output()
        .expect("run rcp-pg migrate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a plain-text server was accepted under sslmode=require: {stderr}");
    assert!(stderr.to_lowercase().contains("tls") || stderr.contains("ssl"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the password was printed: {stderr}");
    // The same URL without the requirement works (TLS is only preferred).
    let ok = std::process::Command::new(common::bin())
        .args(["migrate", "--database-url"])
        .arg(&secret)
        .output()
        .expect("run rcp-pg migrate");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(!String::from_utf8_lossy(&ok.stderr).contains("hunter2"));
}

#[test]
fn a_database_outage_is_retryable_and_the_pool_recovers() {
    if common::cluster().is_none() {
        return;
    }
    // A private cluster: stopping the shared one would break the other tests.
    let own = PgCluster::start().expect("start a private cluster");
    let url = own.create_database("outage").expect("create database");
    let mut e = serve(&url, &FIELDS);
    e.ok("index/add", json!({"documents": docs()}));
    assert_eq!(ids(&e.ok("retrieve", json!({"query": "bread crust", "k": 1, "mode": "sparse"}))), vec!["bread"]);

    own.stop().expect("stop the database");
    for (method, params) in [
        ("retrieve", json!({"query": "bread crust", "k": 1})),
        ("index/add", json!({"documents": [{"id": "late", "text": "written while the database was down"}]})),
        ("index/delete", json!({"ids": ["wing"]})),
    ] {
        let err = e.err(method, params);
        assert_eq!(code(&err), -32010, "{method}: {err}");
        assert!(err["data"]["retryAfterMs"].as_u64().is_some_and(|ms| ms > 0), "{method}: {err}");
    }
    // The server is still up and answering what needs no database.
    assert!(e.ok("ping", json!({})).is_object());

    own.start_again().expect("restart the database");
    let mut last = None;
    for _ in 0..50 {
        let r = e.call("retrieve", json!({"query": "bread crust", "k": 1, "mode": "sparse"}));
        if r.get("result").is_some() {
            last = Some(r["result"].clone());
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let r = last.expect("the pool reconnects once the database is back");
    assert_eq!(ids(&r), vec!["bread"]);
    // Nothing acknowledged was lost; the refused write was not applied.
    let late = e.ok("retrieve", json!({"query": "written while the database was down", "k": 3, "mode": "sparse"}));
    assert!(!ids(&late).contains(&"late".to_owned()));
    e.ok("index/add", json!({"documents": [{"id": "late", "text": "written after the database came back"}]}));
    let late = e.ok("retrieve", json!({"query": "database came back", "k": 1, "mode": "sparse"}));
    assert_eq!(ids(&late), vec!["late"]);
}

#[test]
fn searches_go_to_a_read_replica_and_writes_to_the_primary() {
    if common::cluster().is_none() {
        return;
    }
    let primary = PgCluster::start().expect("start a private primary");
    let url = primary.create_database("replicated").expect("create database");
    let replica = primary.start_replica().expect("start a streaming replica");
    let read_url = url.replace(&format!(":{}/", primary.port()), &format!(":{}/", replica.port()));
    let mut e = serve(&url, &["--read-database-url", &read_url]);
    e.ok("index/add", json!({"documents": docs()}));
    // The write reaches the replica within the replication lag. Until the replica has replayed
    // the schema the engine created on the primary, a search there is an error (the relation
    // does not exist yet): that is the lag too, so the loop waits through it.
    let mut seen = Vec::new();
    let mut last = Value::Null;
    for _ in 0..100 {
        last = e.call("retrieve", json!({"query": "sourdough bread crust", "k": 1, "mode": "sparse"}));
        seen = last.get("result").map(ids).unwrap_or_default();
        if !seen.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(seen, vec!["bread"], "last answer: {last}");
    // With the primary down, searches still come from the replica; writes are refused as retryable.
    primary.stop().expect("stop the primary");
    let r = e.ok("retrieve", json!({"query": "sourdough bread crust", "k": 1, "mode": "hybrid"}));
    assert_eq!(ids(&r), vec!["bread"]);
    let err = e.err("index/add", json!({"documents": [{"id": "w", "text": "needs the primary"}]}));
    assert_eq!(code(&err), -32010, "{err}");
}
