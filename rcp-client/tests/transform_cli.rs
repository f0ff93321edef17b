//! `rcpctl transform` against rcp-bm25 over stdio: RM3 `rewrite` and `multi-query` printed one
//! query per line or as JSON, and an unadvertised method refused with the engine's error.

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

/// `rcp-bm25 serve` on its built-in demo corpus, as an `--stdio` command.
fn bm25() -> String {
    let bin = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    format!("{} serve", bin.display())
}

#[test]
fn transform_prints_rewritten_queries() {
    let engine = bm25();
    let out = rcp(&["transform", "--stdio", &engine, "inverted index"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].starts_with("inverted index "), "the original query, then added words: {text}");

    let out = rcp(&["transform", "--stdio", &engine, "inverted index", "--method", "multi-query", "-n", "2", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let queries = v["queries"].as_array().expect("queries");
    assert!((1..=2).contains(&queries.len()), "{v}");
    assert_eq!(queries[0].as_str(), lines.first().copied(), "the first variant is the rewrite");

    let out = rcp(&["transform", "--stdio", &engine, "inverted index", "--method", "hyde"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-32005") || err.contains("not advertised"), "{err}");
}
