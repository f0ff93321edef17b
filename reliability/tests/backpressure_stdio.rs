//! `rcp-bm25 serve` over real stdio under one deep pipe (issue #42): the 225 Cranfield
//! queries, ten times over, as 2,250 `retrieve` k=100 written without waiting for any answer.
//! The pipe pushes back instead of refusing: every request gets its result, none `-32011`, and
//! the server's peak RSS (`VmHWM`) stays within 64 MiB of its idle RSS.
//!
//! The figure is printed; reproduce it with
//! `cargo test -p rcp-reliability --test backpressure_stdio -- --nocapture`
//! (add `--release` for the release binary). Skipped when the Cranfield collection is absent.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::{Engine, workspace_bin};
use serde_json::{Value, json};

/// Times the 225 queries are sent.
const ROUNDS: usize = 10;

/// The most the server's peak RSS may exceed its idle RSS.
const BOUND_KIB: u64 = 64 * 1024;

/// A `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn queries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("queries.jsonl"))
        .expect("queries.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_deep_stdio_pipe_is_answered_in_full_within_64_mib() {
    let Some(cranfield) = rcp_testkit::cranfield() else {
        eprintln!("skipped: no Cranfield collection");
        return;
    };
    let bin: PathBuf = workspace_bin("rcp-bm25", "rcp-bm25");
    let dir = tempfile::Builder::new().prefix("rcp-backpressure").tempdir().expect("tempdir");
    let data = dir.path().join("index");
    let data = data.to_str().expect("utf-8 path");
    let indexed = Command::new(&bin)
        .args(["index", "--data-dir", data])
        .arg(cranfield.join("corpus.jsonl"))
        .stdin(Stdio::null())
        .output()
        .expect("run rcp-bm25 index");
    assert!(indexed.status.success(), "index: {}", String::from_utf8_lossy(&indexed.stderr));

    let mut e = Engine::spawn(&bin, &["serve", "--data-dir", data]);
    e.initialize();
    let queries = queries(&cranfield);
    assert!(!queries.is_empty());
    // Warm: one search, so idle is a server that has answered before.
    e.ok("retrieve", json!({"query": queries[0], "k": 100}));
    std::thread::sleep(Duration::from_millis(300));
    let pid = e.pid();
    let idle = status_kib(pid, "VmRSS:");

    let n = queries.len() * ROUNDS;
    let flood: Vec<String> = (0..n)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "retrieve",
                   "params": {"query": queries[i % queries.len()], "k": 100}})
            .to_string()
        })
        .collect();
    let started = Instant::now();
    // One write: the engine's stdin pipe fills and this thread waits while the engine holds
    // back; its stdout is read meanwhile by the harness's own thread.
    e.send_raw(&flood.join("\n"));
    let mut answered = BTreeSet::new();
    let mut refused = 0;
    for _ in 0..n {
        let r = e.recv_response(Duration::from_secs(60)).expect("every request is answered");
        if r.get("result").is_some() {
            assert!(answered.insert(r["id"].as_u64().expect("id")), "answered twice: {}", r["id"]);
        } else {
            assert_eq!(r["error"]["code"], -32011, "{r}");
            refused += 1;
        }
    }
    let took = started.elapsed();
    let peak = status_kib(pid, "VmHWM:");
    let grown = peak.saturating_sub(idle);
    println!(
        "rcp-bm25 serve, one stdio client pipelining {n} retrieve k=100: {} results, {refused} refused, \
         {:.1} s; idle RSS {:.1} MiB, peak {:.1} MiB (+{:.1} MiB)",
        answered.len(),
        took.as_secs_f64(),
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        grown as f64 / 1024.0
    );
    assert_eq!((answered.len(), refused), (n, 0), "a pipe is paced, never refused");
    assert!(grown <= BOUND_KIB, "peak RSS grew by {grown} KiB over idle ({idle} KiB); the bound is {BOUND_KIB} KiB");
}
