//! Durability (§7.10): `index/add` is durable when answered. A server killed with SIGKILL in
//! the middle of a stream of pipelined writes restarts on an index that opens and holds
//! every acknowledged document.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{ids, serve_dir, tempdir};
use rcp_testkit::kill9;
use serde_json::{Value, json};

const REQUESTS: usize = 400;
const KILL_AFTER: usize = 40;

#[test]
fn kill_9_mid_stream_loses_no_acknowledged_write() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), &["--create", "--field", "batch:int"]);
    // Pipeline every request up front: the server is busy writing when it dies.
    for i in 0..REQUESTS {
        let docs = json!([
            {"id": format!("k{i}-a"), "text": format!("durable record {i}"), "meta": {"batch": i}},
            {"id": format!("k{i}-b"), "text": format!("durable record {i} twin"), "meta": {"batch": i}},
        ]);
        e.send(&json!({"jsonrpc": "2.0", "id": i, "method": "index/add", "params": {"documents": docs}}));
    }
    let mut acked: HashSet<String> = HashSet::new();
    let mut answers = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers < KILL_AFTER && Instant::now() < deadline {
        let Some(r) = e.recv_response(Duration::from_secs(10)) else { break };
        answers += 1;
        if let Some(got) = r["result"]["ids"].as_array() {
            acked.extend(got.iter().map(|v| v.as_str().unwrap().to_owned()));
        }
    }
    kill9(&mut e);
    assert!(answers >= KILL_AFTER, "only {answers} answers before the deadline");
    assert!(acked.len() >= 2 * KILL_AFTER - 2, "most answers were acknowledgements");

    // Restart on the same directory: it opens, and every acknowledged write is there.
    let mut e = serve_dir(dir.path(), &[]);
    let r = e.ok("retrieve", json!({"query": "durable record", "k": 1000}));
    let present: HashSet<String> = ids(&r).into_iter().collect();
    let lost: Vec<&String> = acked.iter().filter(|id| !present.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged but lost after kill -9: {lost:?}");
    // Batches are atomic: a document's twin is present exactly when it is.
    for id in &present {
        let twin =
            id.strip_suffix("-a").map(|s| format!("{s}-b")).or_else(|| id.strip_suffix("-b").map(|s| format!("{s}-a")));
        assert!(present.contains(&twin.unwrap()), "half a batch survived: {id}");
    }
    // And the index is writable again.
    let r = e.ok("index/add", json!({"documents": [{"id": "after", "text": "durable record after restart"}]}));
    assert_eq!(r["ids"], json!(["after"]));
    let filter = json!({"field": "batch", "op": "lt", "value": 5});
    let r: Value = e.ok("retrieve", json!({"query": "durable", "k": 100, "filter": filter}));
    assert!(ids(&r).len() <= 10);
}
