//! Retrieve options the gateway serves over the fused list (§16.3, issue "the whole of RCP
//! 1.0"): `mmr` diversifies the fused candidates exactly as a client-side fusion of the same
//! engines does, and convex fusion is the default when every engine advertises `scoreFloor`.

mod common;

use common::*;
use rcp_client::federation::{Federation, FederationOptions};
use rcp_client::registry::Registry;
use rcp_wire::RetrieveParams;
use rcp_wire::retrieve::MmrParams;
use serde_json::{Value, json};

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rcp-gateway-options").tempdir().expect("tempdir")
}

/// Engine `a` holds two copies of one passage; `b` holds a different passage on the same topic.
fn engines(extra: &[&str]) -> Vec<Value> {
    let mut a = vec!["--doc", "a1:wing lift at low speed", "--doc", "a2:wing lift at low speed", "--doc", "a3:wing"];
    let mut b = vec!["--doc", "b1:lift of a wing in a gust", "--doc", "b2:thrust"];
    a.extend_from_slice(extra);
    b.extend_from_slice(extra);
    vec![fixture("a", &a), fixture("b", &b)]
}

fn ids_of(hits: &[rcp_wire::Hit]) -> Vec<String> {
    hits.iter().map(rcp_wire::Hit::key).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mmr_is_served_over_the_fused_list_as_a_client_side_fusion_gives_it() {
    let dir = tempdir();
    let reg = write_registry(dir.path(), "rcp.json", engines(&[]));
    let gw = gateway(&reg, &[]).await;
    let rc = gw.capabilities().retrieve.expect("retrieve");
    assert_eq!(rc.mmr, Some(true), "the gateway diversifies the fused list itself");

    let plain = gw.call("retrieve", json!({"query": "wing lift", "k": 3})).await.expect("plain");
    let diverse = gw.call("retrieve", json!({"query": "wing lift", "k": 3, "mmr": {"lambda": 0.3}})).await;
    let diverse = diverse.expect("mmr is served, not -32005");
    assert_eq!(ids(&plain), ["a1", "b1", "a2"], "{plain}");
    // The duplicate a2 gives way to a passage unlike a1.
    assert!(!ids(&diverse).contains(&"a2".to_owned()) && ids(&diverse)[0] == "a1", "{diverse}");
    assert!(notes(&diverse).iter().any(|n| n.contains("likeness measured by their words")), "{diverse}");
    assert!(diverse["hits"].as_array().is_some_and(|h| h.iter().all(|h| h.get("vector").is_none())), "{diverse}");

    // A client fusing the same engines itself gets the same hits.
    let registry = Registry::load(&reg).expect("registry");
    let fed = Federation::new(registry, FederationOptions::default());
    let mut params = RetrieveParams::new("wing lift", 3);
    params.mmr = Some(MmrParams { lambda: 0.3 });
    let local = fed.retrieve(params).await.expect("federated retrieve");
    assert_eq!(ids_of(&local.result.hits), ids(&diverse));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convex_is_the_default_when_every_engine_has_a_score_floor() {
    let dir = tempdir();
    let floors = write_registry(dir.path(), "floors.json", engines(&["--score-floor", "0"]));
    let gw = gateway(&floors, &[]).await;
    let floor = gw.capabilities().retrieve.and_then(|r| r.score_floor);
    assert_eq!(floor, Some(0.0), "fused scores are never below 0: a client may fuse the gateway by convex too");
    let r = gw.call("retrieve", json!({"query": "wing lift", "k": 3})).await.expect("retrieve");
    assert_eq!(r["_meta"]["fusion"], "convex", "{r}");
    assert!(notes(&r).iter().all(|n| !n.contains("fell back")), "{r}");
    let asked = gw.call("retrieve", json!({"query": "wing lift", "k": 3, "fusion": {"method": "rrf"}})).await;
    assert_eq!(asked.expect("rrf")["_meta"]["fusion"], "rrf");

    // One engine without a floor: RRF, and the answer says why (§16.3's MUST).
    let mut mixed = engines(&[]);
    mixed[0] = fixture("a", &["--doc", "a1:wing lift at low speed", "--score-floor", "0"]);
    let mixed = write_registry(dir.path(), "mixed.json", mixed);
    let gw = gateway(&mixed, &[]).await;
    let r = gw.call("retrieve", json!({"query": "wing lift", "k": 3})).await.expect("retrieve");
    assert_eq!(r["_meta"]["fusion"], "rrf", "{r}");
    assert!(notes(&r).iter().any(|n| n.contains("scoreFloor") && n.contains("fell back to rrf")), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_goes_to_the_engines_that_offer_it() {
    let dir = tempdir();
    let mut entries = engines(&[]);
    entries[0] = fixture("a", &["--doc", "a1:wing lift at low speed", "--units", "document"]);
    let reg = write_registry(dir.path(), "rcp.json", entries);
    let gw = gateway(&reg, &[]).await;
    let units = gw.capabilities().retrieve.and_then(|r| r.units);
    assert_eq!(units, Some(vec!["document".into(), "chunk".into(), "passage".into()]), "a's, then b's (the default)");
    let r = gw.call("retrieve", json!({"query": "wing lift", "k": 3, "unit": "document"})).await.expect("retrieve");
    assert_eq!(ids(&r), ["a1"], "{r}");
    assert!(notes(&r).iter().any(|n| n.contains("'b' skipped: does not offer unit 'document'")), "{r}");
    let e =
        gw.call("retrieve", json!({"query": "wing lift", "k": 3, "unit": "section"})).await.expect_err("unadvertised");
    assert_eq!(e.code(), Some(rcp_wire::ErrorCode::OPTION_UNSUPPORTED), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_id_reaches_every_engine() {
    let dir = tempdir();
    let (reg, ev_a, ev_b) = recording_pair(dir.path());
    let gw = gateway(&reg, &[]).await;
    // The trace ids one engine received, in order.
    let received = |events: &std::path::Path| received_meta(events, "traceId");
    gw.call("retrieve", json!({"query": "wing", "k": 2, "_meta": {"traceId": "trace-7f3a"}})).await.expect("retrieve");
    assert_eq!((received(&ev_a), received(&ev_b)), (vec!["trace-7f3a".to_owned()], vec!["trace-7f3a".to_owned()]));
    gw.call("retrieve", json!({"query": "wing", "k": 2})).await.expect("retrieve");
    let (a, b) = (received(&ev_a), received(&ev_b));
    assert_eq!((a.len(), b.len()), (2, 2), "{a:?} {b:?}");
    assert_eq!(a[1], b[1], "one id for the whole request");
    assert_eq!(a[1].len(), 32, "assigned by the gateway: {a:?}");
}

/// §7.7.1 through the gateway: with every engine offering snapshots, the fused answer's
/// `indexVersion` names each engine's snapshot; pinning it serves exactly that snapshot after
/// later writes, a client-side `Federation` mints the same token, and anything but the pinned
/// snapshot is -32010.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_index_version_serves_every_engines_snapshot() {
    let dir = tempdir();
    let bm25 = bm25_bin();
    let engine = |id: &str| {
        let data = dir.path().join(id);
        json!({"id": id, "collection": id,
               "command": [bm25.clone(), "serve", "--data-dir", data.to_string_lossy(), "--create", "--keep-snapshots", "4"]})
    };
    let reg = write_registry(dir.path(), "rcp.json", vec![engine("a"), engine("b")]);
    let gw = gateway(&reg, &[]).await;
    assert_eq!(gw.capabilities().retrieve.and_then(|r| r.snapshots), Some(true), "both engines keep snapshots");
    let add = |collection: &str, id: &str, text: &str| json!({"documents": [{"id": id, "text": text}], "_meta": {"collection": collection}});
    gw.call("index/add", add("a", "a1", "kiwi fruit")).await.expect("add a1");
    gw.call("index/add", add("b", "b1", "kiwi bird")).await.expect("add b1");
    let before = gw.call("retrieve", json!({"query": "kiwi", "k": 10})).await.expect("retrieve");
    let token = before["indexVersion"].as_str().expect("the fused answer names its snapshot").to_owned();
    assert!(token.starts_with("fed1:") && token.contains("\"a\"") && token.contains("\"b\""), "{token}");

    gw.call("index/add", add("a", "a2", "kiwi jam")).await.expect("add a2");
    let now = gw.call("retrieve", json!({"query": "kiwi", "k": 10})).await.expect("retrieve");
    assert_eq!(ids(&now).len(), 3, "{now}");
    assert_ne!(now["indexVersion"].as_str(), Some(token.as_str()), "a write makes a new snapshot");
    let pinned = gw.call("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": token})).await.expect("pinned");
    let (mut got, mut want) = (ids(&pinned), ids(&before));
    got.sort();
    want.sort();
    assert_eq!(got, want, "the pinned snapshot of each engine, not the current one: {pinned}");
    assert_eq!(pinned["indexVersion"].as_str(), Some(token.as_str()));

    // A client fusing the same engines itself names the same snapshot (once the gateway and its
    // engines have exited and released the data directories).
    gw.shutdown().await.expect("shutdown");
    let fed = Federation::new(Registry::load(&reg).expect("registry"), FederationOptions::default());
    let local = fed.retrieve(RetrieveParams::new("kiwi", 10)).await.expect("federated retrieve");
    assert_eq!(local.result.index_version.as_deref(), now["indexVersion"].as_str(), "{:?}", local.engines);
    drop(fed);

    let gw = gateway(&reg, &[]).await;
    // Engine a's snapshot replaced by one it never had; b's kept.
    let mut versions: serde_json::Map<String, Value> =
        serde_json::from_str(token.trim_start_matches("fed1:")).expect("the token's versions");
    versions.insert("a".into(), json!("deadbeef-1"));
    let gone = format!("fed1:{}", Value::Object(versions));
    let only_a = format!("fed1:{{\"a\":{}}}", serde_json::to_string(&json!("1")).unwrap_or_default());
    for bad in ["nope".to_owned(), only_a, gone] {
        let e = gw.call("retrieve", json!({"query": "kiwi", "k": 10, "indexVersion": bad})).await.expect_err(&bad);
        assert_eq!(e.code(), Some(rcp_wire::ErrorCode::BACKEND_UNAVAILABLE), "{bad}: {e}");
    }
}
