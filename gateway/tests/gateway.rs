//! The gateway as a process: `rcp-gateway serve` over stdio in front of fixture engines and
//! `rcp-bm25` shards, driven by `rcp_client::Client`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rcp_wire::ErrorCode;
use rcp_wire::capabilities::Capability;
use serde_json::{Value, json};

const DOCS_A: [&str; 4] = ["--doc", "a1:wing lift drag", "--doc", "a2:wing tip"];
const DOCS_B: [&str; 4] = ["--doc", "b1:wing flutter", "--doc", "b2:engine thrust"];

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rcp-gateway-test").tempdir().expect("tempdir")
}

#[tokio::test]
async fn catalog_lists_engines_from_their_own_initialize() {
    let dir = tempdir();
    let mut exposed = fixture("a", &DOCS_A);
    exposed["expose"] = json!(true);
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            exposed,
            fixture("b", &["--filter-field", "lang", "--doc", "b1:wing"]),
            json!({"id": "dead", "command": ["/nonexistent/engine"]}),
        ],
    );
    let gw = gateway(&reg, &[]).await;
    let caps = gw.capabilities();
    assert_eq!(caps.catalog.as_ref().and_then(|c| c.engines), Some(3));
    assert!(gw.supports(Capability::Retrieve));
    assert!(caps.filter.is_none(), "a does not filter, so the federation cannot promise filters");
    assert_eq!(gw.server_info().unwrap().server.name, "gateway-rcp");
    let list = gw.request::<rcp_wire::request::CatalogList>(&Default::default()).await.expect("catalog/list");
    let ids: Vec<&str> = list.engines.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(list.engines[0].server.name, "a");
    assert!(list.engines[0].capabilities.retrieve.is_some());
    let endpoint = list.engines[0].endpoint.as_ref().expect("a is exposed");
    assert_eq!(endpoint.transport, "stdio");
    assert!(list.engines[1].endpoint.is_none(), "b is not exposed");
    assert!(list.engines[1].capabilities.filter.is_some(), "b's own capabilities, not the federation's");
    assert_eq!(list.meta.as_ref().unwrap()["unavailable"], json!(["dead"]));
}

#[tokio::test]
async fn fan_out_survives_a_dead_and_a_slow_engine() {
    let dir = tempdir();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            fixture("a", &DOCS_A),
            fixture("b", &DOCS_B),
            fixture("slow", &["--sleep-ms", "5000", "--doc", "s1:wing"]),
            json!({"id": "dead", "command": ["/nonexistent/engine"]}),
        ],
    );
    let gw = gateway(&reg, &["--engine-timeout-ms", "700"]).await;
    let started = Instant::now();
    let r = gw.call("retrieve", json!({"query": "wing", "k": 5})).await.expect("retrieve");
    assert!(
        started.elapsed() < Duration::from_millis(3000),
        "the slow engine stalled the query: {:?}",
        started.elapsed()
    );
    let got = ids(&r);
    for id in ["a1", "a2", "b1"] {
        assert!(got.contains(&id.to_owned()), "{id} missing from {got:?}");
    }
    assert!(!got.contains(&"s1".to_owned()));
    let n = notes(&r);
    assert!(n.iter().any(|n| n.contains("'slow' failed") && n.contains("no answer within")), "{n:?}");
    assert!(n.iter().any(|n| n.contains("'dead' failed")), "{n:?}");
    assert_eq!(r["_meta"]["degraded"], json!(["slow", "dead"]));
    assert_eq!(r["hits"][0]["meta"]["engine"].as_str().map(|e| e == "a" || e == "b"), Some(true));

    // minScore is on the gateway's own (fused) scale.
    let second = r["hits"][1]["score"].as_f64().unwrap();
    let r = gw.call("retrieve", json!({"query": "wing", "k": 5, "minScore": second})).await.unwrap();
    let hits = r["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.iter().all(|h| h["score"].as_f64().unwrap() >= second), "{r}");
}

#[tokio::test]
async fn a_dead_engine_is_reconnected() {
    let dir = tempdir();
    let reg = write_registry(dir.path(), "rcp.json", vec![fixture("a", &["--exit-after", "1", "--doc", "a1:wing"])]);
    let gw = gateway(&reg, &["--reconnect-after-ms", "0"]).await;
    let r = gw.call("retrieve", json!({"query": "wing", "k": 3})).await.unwrap();
    assert_eq!(ids(&r), ["a1"]);
    // The engine exits instead of answering: the only engine failed.
    let e = gw.call("retrieve", json!({"query": "wing", "k": 3})).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BACKEND_UNAVAILABLE), "{e}");
    // The next query finds the transport closed and spawns the engine again.
    let r = gw.call("retrieve", json!({"query": "wing", "k": 3})).await.unwrap();
    assert_eq!(ids(&r), ["a1"], "{r}");
}

#[tokio::test]
async fn modes_are_united_and_routed_to_the_engines_that_offer_them() {
    let dir = tempdir();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![fixture("a", &DOCS_A), fixture("b", &["--mode", "dense", "--doc", "b1:wing"])],
    );
    let gw = gateway(&reg, &[]).await;
    let modes = gw.capabilities().retrieve.and_then(|r| r.modes);
    assert_eq!(modes, Some(vec![rcp_wire::Mode::Sparse, rcp_wire::Mode::Dense]));
    let r = gw.call("retrieve", json!({"query": "wing", "k": 5, "mode": "dense"})).await.unwrap();
    assert_eq!(ids(&r), ["b1"]);
    assert!(notes(&r).iter().any(|n| n.contains("engine 'a' skipped: does not offer mode 'dense'")), "{:?}", notes(&r));
    let r = gw.call("retrieve", json!({"query": "wing", "k": 5})).await.unwrap();
    assert_eq!(ids(&r).len(), 3, "without a mode every engine answers");
}

#[tokio::test]
async fn every_engine_failing_is_backend_unavailable_and_a_required_failure_fails_the_query() {
    let dir = tempdir();
    let reg = write_registry(dir.path(), "all.json", vec![fixture("x", &["--fail"]), fixture("y", &["--fail"])]);
    let gw = gateway(&reg, &[]).await;
    let e = gw.call("retrieve", json!({"query": "wing", "k": 3})).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BACKEND_UNAVAILABLE), "{e}");

    let mut required = fixture("r", &["--fail"]);
    required["required"] = json!(true);
    let reg = write_registry(dir.path(), "req.json", vec![fixture("a", &DOCS_A), required]);
    let gw = gateway(&reg, &[]).await;
    let e = gw.call("retrieve", json!({"query": "wing", "k": 3})).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BACKEND_UNAVAILABLE), "{e}");
    assert!(e.to_string().contains("required engine 'r'"), "{e}");
}

#[tokio::test]
async fn hop_budget_is_decremented_and_depth_zero_is_not_forwarded() {
    let dir = tempdir();
    let ev = dir.path().join("events");
    let ev_s = ev.to_string_lossy().into_owned();
    let reg = write_registry(dir.path(), "hop.json", vec![fixture("a", &["--events", &ev_s, "--doc", "a1:wing"])]);
    let gw = gateway(&reg, &["--id", "gw-1"]).await;

    let r = gw.call_with_timeout("retrieve", json!({"query": "wing", "k": 3}), Duration::from_secs(20)).await.unwrap();
    assert_eq!(ids(&r), ["a1"]);
    let meta_line = events(&ev).into_iter().find(|l| l.starts_with("a meta ")).expect("a saw the request");
    let meta: Value = serde_json::from_str(meta_line.trim_start_matches("a meta ")).unwrap();
    assert_eq!(meta["federation"], json!({"depth": 2, "path": ["gw-1"]}), "default budget 3, decremented");
    let forwarded = meta["deadlineMs"].as_u64().expect("deadline forwarded");
    assert!(forwarded < 20_000 && forwarded > 0, "strictly smaller deadline: {forwarded}");

    let before = events(&ev).len();
    let r = gw
        .call("retrieve", json!({"query": "wing", "k": 3, "_meta": {"federation": {"depth": 0, "path": ["upstream"]}}}))
        .await
        .unwrap();
    assert!(ids(&r).is_empty());
    assert!(notes(&r).iter().any(|n| n.contains("depth exhausted")), "{:?}", notes(&r));
    assert_eq!(events(&ev).len(), before, "nothing forwarded at depth 0");

    let r = gw
        .call("retrieve", json!({"query": "wing", "k": 3, "_meta": {"federation": {"depth": 2, "path": ["x"]}}}))
        .await
        .unwrap();
    assert_eq!(ids(&r), ["a1"]);
    let last = events(&ev).into_iter().rev().find(|l| l.starts_with("a meta ")).unwrap();
    let meta: Value = serde_json::from_str(last.trim_start_matches("a meta ")).unwrap();
    assert_eq!(meta["federation"], json!({"depth": 1, "path": ["x", "gw-1"]}));
}

#[tokio::test]
async fn gateways_nest_and_a_registry_cycle_terminates_with_a_note() {
    let dir = tempdir();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let gw_entry = |id: &str, reg: &std::path::Path| json!({"id": id, "command": gateway_cmd(reg, &["--id", &format!("gw-{id}")])});
    write_registry(dir.path(), "a.json", vec![fixture("fa", &DOCS_A), gw_entry("b", &b)]);
    write_registry(dir.path(), "b.json", vec![fixture("fb", &DOCS_B), gw_entry("a", &a)]);
    let started = Instant::now();
    let gw = gateway(&a, &["--id", "gw-a"]).await;
    let r = gw.call_with_timeout("retrieve", json!({"query": "wing", "k": 10}), Duration::from_secs(30)).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let got = ids(&r);
    for id in ["a1", "a2", "b1"] {
        assert!(got.contains(&id.to_owned()), "{id} missing from {got:?} (b1 comes through the nested gateway)");
    }
    let n = notes(&r);
    assert!(
        n.iter().any(|n| n.contains("engine 'b': engine 'a' skipped") && n.contains("cycle")),
        "the nested gateway's cycle note is relayed: {n:?}"
    );
    let list = gw.request::<rcp_wire::request::CatalogList>(&Default::default()).await.unwrap();
    assert_eq!(list.engines.iter().find(|e| e.id == "b").map(|e| e.server.name.as_str()), Some("gw-b"));
    assert!(list.engines.iter().find(|e| e.id == "b").unwrap().capabilities.catalog.is_some());
}

#[tokio::test]
async fn cancelling_a_gateway_call_cancels_the_downstream_call() {
    let dir = tempdir();
    let ev = dir.path().join("events");
    let ev_s = ev.to_string_lossy().into_owned();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![fixture("slow", &["--sleep-ms", "10000", "--events", &ev_s, "--doc", "s1:wing"])],
    );
    let gw = gateway(&reg, &["--engine-timeout-ms", "30000"]).await;
    // The client's deadline passes: it sends notifications/cancel to the gateway (§7.14).
    let e = gw.call_with_timeout("retrieve", json!({"query": "wing", "k": 3}), Duration::from_millis(800)).await;
    assert!(e.is_err());
    assert!(
        wait_for_event(&ev, Duration::from_secs(5), |l| l == "slow cancelled"),
        "the engine never saw the cancellation: {:?}",
        events(&ev)
    );
}

#[tokio::test]
async fn progress_of_engines_is_relayed() {
    let dir = tempdir();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![fixture("s", &["--sleep-ms", "200", "--doc", "s1:wing"]), fixture("a", &DOCS_A)],
    );
    let gw = gateway(&reg, &[]).await;
    let mut streaming =
        gw.retrieve_streaming(rcp_wire::RetrieveParams::new("wing", 3)).expect("gateway advertises streaming");
    let result = streaming.result.await.expect("retrieve");
    assert_eq!(result.hits.len(), 3);
    let mut stages = Vec::new();
    while let Ok(p) = streaming.progress.try_recv() {
        stages.push(p.stage.unwrap_or_default());
    }
    assert!(stages.iter().any(|s| s == "s:sleeping"), "relayed engine progress: {stages:?}");
    assert!(stages.iter().any(|s| s == "fan-out"), "{stages:?}");
}

/// Two `rcp-bm25` shards of one collection, written through the gateway.
async fn sharded(dir: &std::path::Path) -> (std::path::PathBuf, Vec<&'static str>) {
    let bm25 = bm25_bin();
    let shard = |id: &str| {
        let data = dir.join(id);
        json!({"id": id, "collection": "docs",
               "command": [bm25.clone(), "serve", "--data-dir", data.to_string_lossy(), "--create", "--field", "topic:keyword"]})
    };
    let reg = write_registry(dir, "shards.json", vec![shard("s0"), shard("s1")]);
    (reg, vec!["s0", "s1"])
}

#[tokio::test]
async fn index_add_routes_each_document_to_its_shard_and_retrieve_merges_by_score() {
    let dir = tempdir();
    let (reg, shards) = sharded(dir.path()).await;
    let gw = gateway(&reg, &[]).await;
    assert!(gw.capabilities().index.as_ref().is_some_and(|i| i.writable), "{:?}", gw.capabilities().index);
    assert!(gw.capabilities().filter.is_some(), "both shards filter on topic");
    let docs: Vec<Value> = (0..12)
        .map(|i| json!({"id": format!("d{i}"), "text": format!("wing section {i} {}", "lift ".repeat(i % 4 + 1)), "meta": {"topic": if i % 2 == 0 {"even"} else {"odd"}}}))
        .collect();
    let added = gw.call("index/add", json!({"documents": docs})).await.expect("index/add");
    let want: Vec<String> = (0..12).map(|i| format!("d{i}")).collect();
    assert_eq!(added["ids"], json!(want), "ids come back in request order");

    let r = gw.call("retrieve", json!({"query": "wing lift", "k": 12})).await.unwrap();
    let hits = r["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 12, "{r}");
    let mut seen = std::collections::HashSet::new();
    for h in hits {
        let id = h["id"].as_str().unwrap();
        assert!(seen.insert(id.to_owned()), "duplicate id {id}");
        let owner = shards[rcp_gateway::shard::owner(id, 2)];
        assert_eq!(h["meta"]["shard"], json!(owner), "{id} lives on the shard its hash names");
        assert_eq!(h["meta"]["engine"], json!("docs"), "one collection");
    }
    let on_s0 = hits.iter().filter(|h| h["meta"]["shard"] == "s0").count();
    assert!(on_s0 > 0 && on_s0 < 12, "both shards hold documents: {on_s0}");
    // One collection: the shard merge by score is the ranking (fusion of one list keeps it).
    let ranks: Vec<i64> = hits.iter().map(|h| h["meta"]["engineRank"].as_i64().unwrap()).collect();
    assert_eq!(ranks, (1..=12).collect::<Vec<_>>());
    let scores: Vec<f64> = hits.iter().map(|h| h["meta"]["engineScore"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "merged by raw score: {scores:?}");

    let r = gw
        .call("retrieve", json!({"query": "wing", "k": 12, "filter": {"field": "topic", "op": "eq", "value": "odd"}}))
        .await
        .unwrap();
    assert_eq!(r["hits"].as_array().unwrap().len(), 6);

    let del = gw.call("index/delete", json!({"ids": ["d0", "d1", "d2", "missing"]})).await.unwrap();
    assert_eq!(del["deleted"], json!(3));
    let r = gw.call("retrieve", json!({"query": "wing", "k": 12})).await.unwrap();
    assert_eq!(r["hits"].as_array().unwrap().len(), 9);
}

#[tokio::test]
async fn http_engines_get_their_own_headers_and_bearer_token() {
    let dir = tempdir();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut engine = std::process::Command::new(bm25_bin())
        .args(["serve", "--http", &addr, "--tokens-env", "GW_TEST_ENGINE_TOKENS"])
        .env("GW_TEST_ENGINE_TOKENS", "s3cret")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn rcp-bm25 --http");
    let up = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(up.elapsed() < Duration::from_secs(20), "rcp-bm25 did not listen on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{addr}/rcp");
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            json!({"id": "with-token", "url": url, "tokenEnv": "GW_TEST_TOKEN", "headers": {"x-tenant": "t1"}, "expose": true}),
            json!({"id": "without-token", "url": url}),
        ],
    );
    // The token reaches the gateway through its environment, never its arguments.
    let mut cmd = vec!["env".to_owned(), "GW_TEST_TOKEN=s3cret".to_owned()];
    cmd.extend(gateway_cmd(&reg, &[]));
    let gw = rcp_client::Client::connect_stdio(&cmd, rcp_client::ClientOptions::default()).await.expect("gateway");
    let list = gw.request::<rcp_wire::request::CatalogList>(&Default::default()).await.unwrap();
    assert_eq!(list.engines.len(), 1, "{list:?}");
    assert_eq!(list.engines[0].id, "with-token");
    assert_eq!(list.engines[0].server.name, "rcp-bm25");
    assert_eq!(list.engines[0].endpoint.as_ref().and_then(|e| e.url.clone()), Some(url.clone()));
    assert_eq!(list.meta.as_ref().unwrap()["unavailable"], json!(["without-token"]));
    let r = gw.call("retrieve", json!({"query": "rust", "k": 3})).await.unwrap();
    assert!(!ids(&r).is_empty(), "{r}");
    assert_eq!(r["_meta"]["degraded"], json!(["without-token"]));
    let _ = engine.kill();
    let _ = engine.wait();
}
