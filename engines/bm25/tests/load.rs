//! The engine under a pipelined flood, over real stdio: with one CPU thread and no queue the
//! framework paces the pipe (it stops reading stdin while the lane is full) instead of refusing,
//! every search is answered, and the process gains at most that one thread, however many
//! searches are in flight.

mod common;

use std::time::Duration;

use common::serve;
use rcp_testkit::{PeakSampler, code};
use serde_json::json;

fn threads(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_flood_of_searches_is_bounded_by_the_cpu_executor() {
    let mut e = serve(&["--cpu-threads", "1", "--cpu-queue", "0"]);
    let pid = e.pid();
    let idle = threads(pid);
    let sampler = PeakSampler::start(idle, Duration::from_millis(1), move || threads(pid));

    const N: usize = 300;
    let flood: Vec<String> = (0..N)
        .map(|i| {
            json!({"jsonrpc":"2.0","id":i,"method":"retrieve","params":{"query":"search index retrieval vectors","k":100}})
                .to_string()
        })
        .collect();
    e.send_raw(&flood.join("\n"));
    for _ in 0..N {
        let r = e.recv_response(Duration::from_secs(30)).expect("every request is answered");
        assert!(r.get("result").is_some(), "a pipe is paced, never refused (code {}): {r}", code(&r["error"]));
    }
    let peak = sampler.stop();
    assert!(peak <= idle + 1, "threads went from {idle} to {peak} with one CPU thread configured");
    // The engine still serves once the flood is over.
    e.ok("retrieve", json!({"query": "inverted index", "k": 3}));
}
