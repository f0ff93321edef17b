//! `rcpctl --registry` through the federation core: `graph` and `memory recall` asked of every
//! capable engine and merged, `memory build`, `transform`, `embed` and `rerank` routed to one
//! engine (by priority, or `--engine ID`), `feedback` routed back by the core (namespaced ids
//! by their namespace; shared ids, which a new process has no record of, listed as unrouted
//! with the reason). Stderr names the engines that served; stdout keeps the result.
//!
//! Engines: two `graph_engine` examples (graph, memory, feedback over a fixed twelve-document
//! graph), the client's `fixture_engine` (retrieve and a two-dimensional `embed`, model
//! `fixture/len`), its `loose_engine` (a word-overlap `rerank` and an `embed` of another
//! model: cheap, no model to download, where rcp-rerank needs an ONNX model provisioned) and
//! `rcp-bm25` (RM3 `transform`).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn rcp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcpctl"))
        .args(args)
        .env_remove("RUST_LOG")
        // The loose engine's unreadable rerank metadata is warned about; keep stderr to ours.
        .env("RCP_LOG", "error")
        .output()
        .expect("run rcp")
}

fn graph_engine() -> String {
    rcp_testkit::example_bin("graph_engine").display().to_string()
}

/// An example of this package (built by `cargo test`).
fn client_example(name: &str) -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join(name);
    assert!(bin.exists(), "{} not built (cargo test builds examples)", bin.display());
    bin.display().to_string()
}

/// Writes `registry` to a fresh file named after `name`.
fn registry(name: &str, registry: &Value) -> String {
    let dir = std::env::temp_dir().join(format!("rcp-registry-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path: PathBuf = dir.join(format!("{name}.json"));
    std::fs::write(&path, registry.to_string()).expect("write registry");
    path.display().to_string()
}

/// Two graph engines (`g2` of higher priority) and an engine without graph or memory.
fn graph_registry(name: &str, corpora: &str) -> String {
    let g = graph_engine();
    let fixture = client_example("fixture_engine");
    registry(
        name,
        &json!({"corpora": corpora, "engines": [
            {"id": "g1", "command": [g]},
            {"id": "g2", "priority": 2, "command": [g]},
            {"id": "fx", "command": [fixture, "--doc", "a:wing"]},
        ]}),
    )
}

/// Runs `args`, which must succeed; returns (stdout, stderr).
fn ok(args: &[&str]) -> (String, String) {
    let out = rcp(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "rcp {args:?} failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// Runs `args` with `--json`; returns (the JSON on stdout, stderr).
fn json_out(args: &[&str]) -> (Value, String) {
    let mut with = args.to_vec();
    with.push("--json");
    let (stdout, stderr) = ok(&with);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("rcp {with:?}: not JSON ({e}): {stdout}"));
    (v, stderr)
}

/// Runs `args`, which must fail with exit code 1 (2 for a usage error); returns stderr.
fn err(args: &[&str], code: i32) -> (String, String) {
    let out = rcp(args);
    assert_eq!(out.status.code(), Some(code), "rcp {args:?}: {out:?}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The `id` of each entry of `v[key]`.
fn ids(v: &Value, key: &str) -> Vec<String> {
    let entries = v[key].as_array().unwrap_or_else(|| panic!("no {key}: {v}"));
    entries.iter().map(|x| x["id"].as_str().map_or_else(|| x["id"].to_string(), str::to_owned)).collect()
}

#[test]
fn graph_merges_the_answers_of_every_graph_engine() {
    let reg = graph_registry("graph", "shared");
    // Communities are engine-local: both engines' come back, each id prefixed by its engine.
    let (v, stderr) = json_out(&["graph", "--registry", &reg, "--op", "communities"]);
    let communities = ids(&v, "communities");
    let from = |e: &str| communities.iter().filter(|id| id.starts_with(&format!("{e}:"))).count();
    assert!(from("g1") > 0 && from("g1") == from("g2"), "the same graph twice, kept apart: {v}");
    assert_eq!(from("g1") + from("g2"), communities.len(), "every id names its engine: {v}");
    assert_eq!(v["_meta"]["engines"], json!(["g1", "g2"]), "{v}");
    assert!(stderr.contains("merged the answers of engines 'g1', 'g2'"), "{stderr}");
    let (text, _) = ok(&["graph", "--registry", &reg, "--op", "communities"]);
    assert!(text.lines().any(|l| l.starts_with("g1:")) && text.lines().any(|l| l.starts_with("g2:")), "{text}");

    // Neighbors of a shared id: the nodes of both engines united by id.
    let (v, _) = json_out(&["graph", "--registry", &reg, "--op", "neighbors", "--seed", "bm25", "--hops", "1"]);
    let nodes = ids(&v, "nodes");
    assert_eq!(nodes.iter().filter(|id| *id == "bm25").count(), 1, "united, not doubled: {v}");
    assert!(nodes.contains(&"tfidf".to_owned()), "{v}");

    // Distinct corpora: a namespaced seed goes to its engine only; the other is skipped.
    let reg = graph_registry("graph-distinct", "distinct");
    let (v, stderr) = json_out(&["graph", "--registry", &reg, "--op", "neighbors", "--seed", "g1:bm25"]);
    let nodes = ids(&v, "nodes");
    assert!(!nodes.is_empty() && nodes.iter().all(|id| id.starts_with("g1:")), "{v}");
    assert!(stderr.contains("engine 'g2' skipped: none of the seeds is in its namespace"), "{stderr}");
    let (_, stderr) = err(&["graph", "--registry", &reg, "--op", "neighbors", "--seed", "bm25"], 1);
    assert!(stderr.contains("seedIds[0]") && stderr.contains("not a namespaced id"), "{stderr}");
}

#[test]
fn memory_build_is_routed_and_recall_fans_out() {
    let reg = graph_registry("memory", "shared");
    let (v, stderr) = json_out(&["memory", "build", "--registry", &reg]);
    assert!(v["memoryId"].as_str().is_some_and(|id| id.starts_with("g2:")), "priority picks g2: {v}");
    assert!(stderr.contains("served by engine 'g2'"), "{stderr}");
    let (text, stderr) = ok(&["memory", "build", "--registry", &reg, "--engine", "g1"]);
    assert!(text.starts_with("memory g1:"), "{text}");
    assert!(stderr.contains("served by engine 'g1'"), "{stderr}");

    // Without a memory id, every engine with memory is asked and the clues merged.
    let (v, stderr) = json_out(&["memory", "recall", "--registry", &reg, "postings lists of terms", "-n", "4"]);
    assert_eq!(v["_meta"]["engines"], json!(["g1", "g2"]), "{v}");
    assert!(!v["clues"].as_array().expect("clues").is_empty(), "{v}");
    assert!(stderr.contains("merged the answers of engines 'g1', 'g2'"), "{stderr}");
    // A federated memory id goes back to its engine (each engine holds a "global" memory).
    let (v, stderr) =
        json_out(&["memory", "recall", "--registry", &reg, "postings lists of terms", "--memory-id", "g1:global"]);
    assert_eq!(v["_meta"]["engines"], json!(["g1"]), "{v}");
    assert_eq!(v["clues"][0]["seedIds"][0], "inverted-index", "{v}");
    assert!(stderr.contains("served by engine 'g1'"), "{stderr}");

    let (_, stderr) = err(&["memory", "build", "--registry", &reg, "--engine", "fx"], 1);
    assert!(stderr.contains("engine 'fx' does not advertise memory"), "{stderr}");
    let (_, stderr) = err(&["memory", "build", "--registry", &reg, "--engine", "g1", "--memory-id", "g2:x"], 2);
    assert!(stderr.contains("cannot be used with"), "the memory id names its engine: {stderr}");
}

#[test]
fn feedback_routes_namespaced_ids_and_explains_shared_ones() {
    // Shared ids: a new rcpctl process has served no hits, so nothing can be routed.
    let reg = graph_registry("feedback", "shared");
    let (stdout, stderr) = err(&["feedback", "--registry", &reg, "--used", "bm25", "--reward", "tfidf=0.5"], 1);
    assert!(stdout.contains("accepted 0 of 2 signals") && stdout.contains("not routed (2): bm25, tfidf"), "{stdout}");
    assert!(stderr.contains("share ids") && stderr.contains("--stdio or --http"), "says why and what to do: {stderr}");
    let out = rcp(&["feedback", "--registry", &reg, "--used", "bm25", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["_meta"]["unrouted"], json!(["bm25"]), "{v}");
    assert_eq!((v["sent"].as_u64(), v["accepted"].as_u64()), (Some(1), Some(0)), "{v}");

    // Distinct corpora: <engine>:<id> routes to that engine, without a ledger.
    let reg = graph_registry("feedback-distinct", "distinct");
    let args = ["feedback", "--registry", &reg, "--used", "g1:bm25", "--cited", "g2:tfidf", "--helpful", "fx:a"];
    let (stdout, stderr) = ok(&args);
    assert!(stdout.contains("accepted 2 of 3 signals") && stdout.contains("not routed (1): fx:a"), "{stdout}");
    assert!(stderr.contains("engine 'g1' accepted 1") && stderr.contains("engine 'g2' accepted 1"), "{stderr}");
    assert!(stderr.contains("\"corpora\": \"distinct\""), "{stderr}");
    let (v, _) = json_out(&["feedback", "--registry", &reg, "--used", "g2:bm25"]);
    assert_eq!(v["_meta"]["engines"], json!({"g2": 1}), "{v}");
    assert_eq!((v["sent"].as_u64(), v["accepted"].as_u64()), (Some(1), Some(1)), "{v}");
}

/// Two embedders of one model (`high` of higher priority, embed only) and one of another.
fn embed_registry() -> String {
    let fixture = client_example("fixture_engine");
    registry(
        "embed",
        &json!({"engines": [
            {"id": "low", "command": [fixture, "--name", "low"]},
            {"id": "high", "priority": 5, "command": [fixture, "--name", "high", "--embed-only"]},
            {"id": "loose", "command": [client_example("loose_engine")]},
        ]}),
    )
}

#[test]
fn embed_routes_by_priority_and_engine_overrides() {
    let reg = embed_registry();
    let (v, stderr) = json_out(&["embed", "--registry", &reg, "wing lift", "heat"]);
    assert_eq!(v, json!({"vectors": [[9.0, 1.0], [4.0, 1.0]], "dimension": 2}), "{v}");
    assert!(stderr.contains("served by engine 'high'"), "{stderr}");
    let (text, stderr) = ok(&["embed", "--registry", &reg, "wing lift", "--engine", "low"]);
    assert!(stderr.contains("served by engine 'low'") && !stderr.contains("'high'"), "{stderr}");
    let row = text.lines().nth(1).unwrap_or_default();
    assert!(row.contains("2  [9.0000, 1.0000]") && row.ends_with("wing lift"), "dimension, numbers, text: {text}");
    // An engine of another model would answer vectors the federation does not advertise.
    let (_, stderr) = err(&["embed", "--registry", &reg, "x", "--engine", "loose"], 1);
    assert!(stderr.contains("another model"), "{stderr}");
    let (_, stderr) = err(&["embed", "--registry", &reg, "x", "--engine", "nobody"], 1);
    assert!(stderr.contains("no engine 'nobody'"), "{stderr}");

    // One engine over stdio: the client's embed, unchanged; --engine belongs to --registry.
    let loose = client_example("loose_engine");
    let (text, _) = ok(&["embed", "--stdio", &loose, "a", "bb"]);
    assert!(text.lines().nth(2).is_some_and(|l| l.contains("4  [0.5000, 0.5000, 0.5000, 0.5000]")), "{text}");
    let (_, stderr) = err(&["embed", "--stdio", &loose, "a", "--engine", "low"], 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn rerank_prints_passages_in_the_engines_order() {
    let loose = client_example("loose_engine");
    let passages = ["paris france", "glucose", "eiffel tower paris"];
    let mut args = vec!["rerank", "--stdio", loose.as_str(), "--query", "eiffel tower"];
    args.extend(passages);
    let (text, _) = ok(&args);
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(rows[0].contains("3      2.0000  eiffel tower paris"), "best first, with its score: {text}");
    let (v, _) = json_out(&[&args[..], &["--top-n", "2"]].concat());
    assert_eq!(v["order"], json!([2, 0]), "{v}");

    // Through a registry: routed to the only engine with rerank.
    let reg = embed_registry();
    let mut args = vec!["rerank", "--registry", reg.as_str(), "-q", "eiffel tower"];
    args.extend(passages);
    let (v, stderr) = json_out(&args);
    assert_eq!(v["order"][0], 2, "{v}");
    assert!(stderr.contains("served by engine 'loose'"), "{stderr}");
    let (_, stderr) = err(&[&args[..], &["--method", "colbert"]].concat(), 1);
    assert!(stderr.contains("no engine that answered initialize serves rerank with method 'colbert'"), "{stderr}");
    let (_, stderr) = err(&[&args[..], &["--engine", "high"]].concat(), 1);
    assert!(stderr.contains("engine 'high' does not advertise rerank"), "{stderr}");
    let (_, stderr) = err(&["rerank", "--registry", &reg, "-q", "q"], 2);
    assert!(stderr.contains("<PASSAGE>"), "passages are required: {stderr}");
}

#[test]
fn transform_is_routed_to_one_engine() {
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25").display().to_string();
    let reg = registry(
        "transform",
        &json!({"engines": [
            {"id": "b1", "command": [bm25, "serve"]},
            {"id": "b2", "priority": 3, "command": [bm25, "serve"]},
            {"id": "g", "priority": 9, "command": [graph_engine()]},
        ]}),
    );
    let (text, stderr) = ok(&["transform", "--registry", &reg, "inverted index"]);
    assert!(text.starts_with("inverted index "), "{text}");
    assert!(stderr.contains("served by engine 'b2'"), "the transformer of highest priority: {stderr}");
    let (v, stderr) = json_out(&["transform", "--registry", &reg, "inverted index", "--engine", "b1"]);
    assert!(v["queries"][0].as_str().is_some_and(|q| q.starts_with("inverted index")), "{v}");
    assert!(stderr.contains("served by engine 'b1'"), "{stderr}");
    let (_, stderr) = err(&["transform", "--registry", &reg, "q", "--method", "hyde"], 1);
    assert!(stderr.contains("query/transform with method 'hyde'"), "{stderr}");
}
