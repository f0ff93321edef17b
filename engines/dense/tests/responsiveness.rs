//! Responsiveness while a large `index/add` embeds: `ping` is answered within 100 ms.
//!
//! A test binary of its own, so no other engine process of this crate's tests competes for the
//! two cores while it measures.

mod common;

use std::time::{Duration, Instant};

use common::serve;
use serde_json::{Value, json};

fn dir_arg(dir: &std::path::Path) -> &str {
    dir.to_str().expect("utf-8 path")
}

#[test]
fn ping_stays_responsive_during_a_large_index_add() {
    let tmp = tempfile::tempdir().unwrap();
    // A debug build embeds slowly: allow the add more than the default 60 s deadline.
    let mut e = serve(&["--data-dir", dir_arg(tmp.path()), "--create", "--deadline-ms", "600000"]);
    let docs: Vec<Value> = (0..2000)
        .map(|i| json!({"id": format!("bulk-{i}"), "text": format!("Bulk document number {i} talks about topic {} in some detail.", i % 37)}))
        .collect();
    let add_id = json!("bulk");
    e.send(&json!({"jsonrpc": "2.0", "id": add_id, "method": "index/add", "params": {"documents": docs, "_meta": {"progressToken": "p1"}}}));
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    let mut pings = 0;
    let result = loop {
        pings += 1;
        let id = json!(format!("ping-{pings}"));
        let sent = Instant::now();
        e.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        let r = e.response_for(&id, Duration::from_secs(5));
        assert!(r.get("result").is_some(), "{r}");
        worst = worst.max(sent.elapsed());
        // Progress notifications (kept in `e.notifications`) and the add's answer arrive in between.
        if let Some(done) = e.recv_response(Duration::from_millis(50)) {
            assert_eq!(done.get("id"), Some(&add_id), "{done}");
            break done;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "index/add took too long");
    };
    assert_eq!(result["result"]["ids"].as_array().map(Vec::len), Some(2000), "{result}");
    assert!(pings >= 5, "the add finished too quickly to measure ({pings} pings)");
    eprintln!("{pings} pings during index/add, slowest {worst:?}");
    assert!(worst < Duration::from_millis(100), "a ping took {worst:?} during index/add");
    let progress = e.notifications.iter().filter(|n| n["method"] == "notifications/progress").count();
    assert!(progress >= 2, "expected progress frames during the add");
}
