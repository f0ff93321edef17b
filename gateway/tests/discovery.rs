//! Dynamic discovery (§16.1) against the gateway: `Federation::discover` follows the endpoints
//! `catalog/list` exposes, within the hop budget, and queries through an aggregator whose
//! engines it cannot all reach.

mod common;

use common::*;
use rcp_client::federation::{Federation, FederationOptions};
use rcp_client::{EngineSpec, Transport};
use rcp_wire::RetrieveParams;
use serde_json::{Value, json};

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rcp-gateway-discovery").tempdir().expect("tempdir")
}

fn exposed(mut entry: Value) -> Value {
    entry["expose"] = json!(true);
    entry
}

fn gateway_spec(id: &str, registry: &std::path::Path) -> EngineSpec {
    EngineSpec::new(id, Transport::Stdio { command: gateway_cmd(registry, &[]) })
}

fn ids(specs: &[EngineSpec]) -> Vec<&str> {
    specs.iter().map(|e| e.id.as_str()).collect()
}

fn options(depth: u32) -> FederationOptions {
    FederationOptions { depth, ..FederationOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposed_engines_are_federated_directly() {
    let dir = tempdir();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![exposed(fixture("a", &["--doc", "a1:wing lift"])), exposed(fixture("b", &["--doc", "b1:wing flutter"]))],
    );
    let (fed, notes) = Federation::discover(gateway_spec("gw", &reg), options(3)).await.expect("discover");
    assert_eq!(ids(&fed.registry().engines), ["gw/a", "gw/b"], "{notes:?}");
    assert!(notes.is_empty(), "{notes:?}");
    let out = fed.retrieve(RetrieveParams::new("wing", 5)).await.expect("retrieve");
    let engines: Vec<&str> = out.result.hits.iter().filter_map(|h| h.meta.as_ref()?.get("engine")?.as_str()).collect();
    assert!(engines.contains(&"gw/a") && engines.contains(&"gw/b"), "each engine asked directly: {engines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_without_an_endpoint_keeps_the_aggregator_in_between() {
    let dir = tempdir();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![exposed(fixture("a", &["--doc", "a1:wing lift"])), fixture("hidden", &["--doc", "h1:wing"])],
    );
    let (fed, notes) = Federation::discover(gateway_spec("gw", &reg), options(3)).await.expect("discover");
    assert_eq!(ids(&fed.registry().engines), ["gw"]);
    assert!(notes.iter().any(|n| n.contains("hidden")), "{notes:?}");
    let out = fed.retrieve(RetrieveParams::new("wing", 5)).await.expect("retrieve");
    assert_eq!(out.result.hits.len(), 2, "both engines answer through the gateway: {:?}", out.result.hits);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_aggregators_are_followed_within_the_hop_budget() {
    let dir = tempdir();
    let inner = write_registry(dir.path(), "inner.json", vec![exposed(fixture("a", &["--doc", "a1:wing lift"]))]);
    let inner_entry = exposed(json!({"id": "inner", "transport": "stdio", "command": gateway_cmd(&inner, &[])}));
    let outer =
        write_registry(dir.path(), "outer.json", vec![inner_entry, exposed(fixture("b", &["--doc", "b1:wing"]))]);
    let (fed, _) = Federation::discover(gateway_spec("gw", &outer), options(3)).await.expect("discover");
    assert_eq!(ids(&fed.registry().engines), ["gw/inner/a", "gw/b"], "two aggregators deep");
    let (fed, _) = Federation::discover(gateway_spec("gw", &outer), options(1)).await.expect("discover");
    assert_eq!(ids(&fed.registry().engines), ["gw/inner", "gw/b"], "the budget stops at the inner aggregator");
}
