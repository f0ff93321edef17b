//! rcp-gateway against hostile federated requests: hop metadata that would be copied once per
//! engine is refused before it is copied (`-32602` naming the field and `error.data.limit`),
//! with the gateway's peak RSS bounded relative to its idle RSS; client input an engine
//! refuses comes back as that refusal, never as an outage to retry.

use std::path::Path;
use std::time::Duration;

use rcp_testkit::{Engine, workspace_bin};
use rcp_testkit::{MemField, status_kb};
use serde_json::{Value, json};

/// Peak RSS above idle the gateway may reach while refusing a hostile request.
const RSS_BUDGET_KB: u64 = 64 * 1024;

/// A gateway over stdio in front of `engines` rcp-bm25 engines (the demo corpus), initialised.
fn gateway(dir: &Path, engines: usize) -> Engine {
    let bm25 = workspace_bin("rcp-bm25", "rcp-bm25");
    let entries: Vec<Value> = (0..engines)
        .map(|i| json!({"id": format!("e{i}"), "transport": "stdio", "command": [bm25, "serve"]}))
        .collect();
    let registry = dir.join("rcp.json");
    std::fs::write(&registry, json!({"engines": entries}).to_string()).expect("registry");
    let bin = workspace_bin("rcp-gateway", "rcp-gateway");
    let mut gw = Engine::spawn(&bin, &["serve", "--registry", registry.to_str().expect("utf-8"), "--id", "gw"]);
    gw.initialize();
    gw
}

fn call(gw: &mut Engine, id: i64, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": "retrieve", "params": params});
    gw.send(&frame);
    gw.response_for(&json!(id), Duration::from_secs(120))
}

#[test]
fn a_huge_federation_path_is_refused_before_it_is_copied_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gw = gateway(dir.path(), 2);
    let warm = call(&mut gw, 1, json!({"query": "wing", "k": 3}));
    assert!(warm["result"]["hits"].as_array().is_some_and(|h| !h.is_empty()), "{warm}");
    let idle = status_kb(gw.pid(), MemField::Rss);
    assert!(idle > 0, "the gateway's RSS is readable");

    // 1.5M entries in a 7.5 MB frame: the old gateway copied them per engine (1.3 GB peak).
    let path = vec!["a"; 1_500_000];
    let r = call(&mut gw, 2, json!({"query": "wing", "k": 3, "_meta": {"federation": {"depth": 3, "path": path}}}));
    let err = &r["error"];
    assert_eq!(err["code"], -32602, "{r}");
    assert!(err["data"]["field"].as_str().is_some_and(|f| f.starts_with("_meta")), "{err}");
    assert!(err["data"]["limit"].as_u64().is_some(), "the limit is named: {err}");
    let peak = status_kb(gw.pid(), MemField::Peak);
    assert!(peak < idle + RSS_BUDGET_KB, "peak RSS {peak} KiB, idle {idle} KiB: more than +64 MiB");

    // A small frame whose path is merely longer than any honest one: refused by the hop rule.
    let r = call(&mut gw, 3, json!({"query": "wing", "k": 3, "_meta": {"federation": {"path": vec!["a"; 33]}}}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["field"], "_meta.federation.path", "{r}");
    assert_eq!(r["error"]["data"]["limit"], 32, "{r}");
    let r = call(&mut gw, 4, json!({"query": "wing", "k": 3, "_meta": {"collections": vec!["c"; 300]}}));
    assert_eq!(
        (&r["error"]["data"]["field"], &r["error"]["data"]["limit"]),
        (&json!("_meta.collections"), &json!(256))
    );

    // And the gateway still serves.
    let r = call(&mut gw, 5, json!({"query": "wing", "k": 3, "_meta": {"federation": {"depth": 2, "path": ["up"]}}}));
    assert!(r["result"]["hits"].as_array().is_some_and(|h| !h.is_empty()), "{r}");
    eprintln!("gateway: idle {idle} KiB, peak {peak} KiB while refusing a 1.5M-entry path");
}

#[test]
fn a_query_every_engine_refuses_is_invalid_params_not_an_outage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gw = gateway(dir.path(), 2);
    let terms: Vec<String> = (0..5_000).map(|i| format!("term{i}")).collect();
    let r = call(&mut gw, 1, json!({"query": terms.join(" "), "k": 3}));
    let err = &r["error"];
    assert_eq!(err["code"], -32602, "client input is not an outage: {r}");
    assert_eq!(err["data"]["field"], "query", "{err}");
    assert_ne!(err["data"]["retryable"], true, "{err}");
    assert!(err["message"].as_str().is_some_and(|m| m.contains("engine 'e")), "names the engine: {err}");
}
