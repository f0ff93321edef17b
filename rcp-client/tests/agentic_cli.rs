//! `rcpctl graph`, `rcpctl feedback` and `rcpctl memory` against the `graph_engine` example over stdio
//! (a fixed twelve-document graph): each op printed for people and as JSON, signals counted,
//! a memory built and recalled, and commands an engine cannot serve refused before any call
//! with what to do instead.

use std::process::{Command, Output};

use serde_json::Value;

fn rcp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcpctl"))
        .args(args)
        .env_remove("RCP_LOG")
        .env_remove("RUST_LOG")
        .output()
        .expect("run rcp")
}

/// The engine serving graph, memory and feedback, as an `--stdio` command.
fn engine() -> String {
    rcp_testkit::example_bin("graph_engine").display().to_string()
}

fn ok(args: &[&str]) -> String {
    let out = rcp(args);
    assert!(out.status.success(), "rcp {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(args: &[&str]) -> Value {
    let mut with = args.to_vec();
    with.push("--json");
    serde_json::from_str(&ok(&with)).unwrap_or_else(|e| panic!("rcp {args:?} --json is not JSON: {e}"))
}

fn err(args: &[&str]) -> String {
    let out = rcp(args);
    assert!(!out.status.success(), "rcp {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn graph_neighbors_prints_nodes_and_edges() {
    let e = engine();
    let args = ["graph", "--stdio", &e, "--op", "neighbors", "--seed", "bm25", "--hops", "1"];
    let v = json(&args);
    let nodes: Vec<&str> = v["nodes"].as_array().expect("nodes").iter().filter_map(|n| n["id"].as_str()).collect();
    assert_eq!(nodes[0], "bm25", "the seed scores highest: {v}");
    assert!(nodes.contains(&"tfidf") && nodes.contains(&"inverted-index"), "its direct links: {v}");
    assert!(!nodes.contains(&"dense"), "dense is two hops away: {v}");
    for edge in v["edges"].as_array().expect("edges") {
        for end in ["src", "dst"] {
            assert!(nodes.contains(&edge[end].as_str().unwrap_or_default()), "edge {edge} joins listed nodes");
        }
    }
    let text = ok(&args);
    assert!(text.contains("edges (") && text.contains("bm25 — tfidf"), "{text}");
    // Two hops reach further.
    let v = json(&["graph", "--stdio", &e, "--op", "neighbors", "--seed", "bm25", "--hops", "2"]);
    assert!(v["nodes"].as_array().expect("nodes").iter().any(|n| n["id"] == "dense"), "{v}");
}

#[test]
fn graph_local_global_drift_and_communities() {
    let e = engine();
    let v = json(&["graph", "--stdio", &e, "--op", "local", "--query", "graph community summaries", "-k", "3"]);
    let hits = v["hits"].as_array().expect("hits");
    assert!(!hits.is_empty() && hits.len() <= 3, "{v}");
    assert!(hits.iter().all(|h| h["provenance"]["nodes"].is_array()), "local hits carry their path: {v}");
    let text = ok(&["graph", "--stdio", &e, "--op", "drift", "--query", "lexical ranking"]);
    assert!(text.contains("follow-ups:"), "{text}");
    let v = json(&["graph", "--stdio", &e, "--op", "global", "--query", "dense vectors"]);
    assert!(v["summary"].is_string() && !v["communities"].as_array().expect("communities").is_empty(), "{v}");
    let v = json(&["graph", "--stdio", &e, "--op", "communities", "--level", "0"]);
    let cs = v["communities"].as_array().expect("communities");
    assert!(cs.len() >= 3 && cs.iter().all(|c| c["level"] == 0 && c["summary"].is_string()), "{v}");
    let text = ok(&["graph", "--stdio", &e, "--op", "communities"]);
    assert!(text.lines().next().is_some_and(|l| l.contains("level") && l.contains("summary")), "{text}");
}

#[test]
fn graph_errors_say_what_to_do() {
    let e = engine();
    let msg = err(&["graph", "--stdio", &e, "--op", "neighbors", "--seed", "no-such-node"]);
    assert!(msg.contains("seedIds") && msg.contains("no-such-node"), "{msg}");
    let msg = err(&["graph", "--stdio", &e, "--op", "sideways"]);
    assert!(msg.contains("possible values") && msg.contains("neighbors"), "{msg}");
    // An engine without graph: refused before any call, naming the capability.
    let tiny = rcp_testkit::example_bin("tiny_engine").display().to_string();
    let msg = err(&["graph", "--stdio", &tiny, "--op", "communities"]);
    assert!(msg.contains("graph"), "{msg}");
}

#[test]
fn feedback_sends_one_signal_per_hit() {
    let e = engine();
    let args =
        ["feedback", "--stdio", &e, "--session", "s1", "--used", "bm25", "--cited", "bm25", "--reward", "tfidf=0.5"];
    assert_eq!(ok(&args).trim(), "accepted 2 of 2 signals");
    let v = json(&args);
    assert_eq!((v["sent"].as_u64(), v["accepted"].as_u64()), (Some(2), Some(2)), "{v}");
    let msg = err(&["feedback", "--stdio", &e, "--reward", "bm25=3"]);
    assert!(msg.contains("[-1, 1]"), "{msg}");
    let msg = err(&["feedback", "--stdio", &e]);
    assert!(msg.contains("no signal to send"), "{msg}");
}

#[test]
fn memory_build_then_recall() {
    let e = engine();
    let v = json(&["memory", "build", "--stdio", &e]);
    assert!(v["memoryId"].as_str().is_some_and(|id| !id.is_empty()) && v["tokens"].as_u64() > Some(0), "{v}");
    let v = json(&["memory", "recall", "--stdio", &e, "postings lists of terms", "-n", "2"]);
    let clues = v["clues"].as_array().expect("clues");
    assert!(!clues.is_empty() && clues.len() <= 2, "{v}");
    assert_eq!(clues[0]["seedIds"][0], "inverted-index", "{v}");
    // Inline documents from a file, then a scope the engine does not offer.
    let file = std::env::temp_dir().join(format!("rcp-agentic-cli-{}.jsonl", std::process::id()));
    std::fs::write(&file, "{\"id\": \"w1\", \"text\": \"Wing lift grows with the angle of attack.\"}\n")
        .expect("write");
    let text = ok(&["memory", "build", "--stdio", &e, "--documents", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
    assert!(text.starts_with("memory mem-") && text.contains("tokens"), "{text}");
    let msg = err(&["memory", "build", "--stdio", &e, "--scope", "galaxy"]);
    assert!(msg.contains("scope") && msg.contains("global"), "{msg}");
}
