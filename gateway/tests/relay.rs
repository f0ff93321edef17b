//! What the gateway relays from its engines beyond their answers: their log frames of a call
//! (§17.1), to the caller that asked for logs, naming the engine; and their built-in rerank
//! stages (`retrieve.rerankBuiltin`), usable through a gateway that has no reranker of its own.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{bm25_bin, fixture, gateway, notes, write_registry};
use rcp_client::LogSink;
use rcp_wire::notifications::{LogLevel, LogParams};
use serde_json::json;
use tokio::sync::mpsc;

/// A log sink that hands every frame (with the connection label it came from) to a channel.
fn channel_sink() -> (LogSink, mpsc::UnboundedReceiver<(String, LogParams)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink: LogSink = Arc::new(move |label: &str, l: LogParams| {
        let _ = tx.send((label.to_owned(), l));
    });
    (sink, rx)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engines_log_frames_reach_the_caller_naming_the_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write_registry(dir.path(), "rcp.json", vec![json!({"id": "bm25", "command": [bm25_bin(), "serve"]})]);
    let gw = gateway(&reg, &[]).await;
    // What its one engine honours beyond its flags, the gateway honours (and forwards).
    let rc = gw.capabilities().retrieve.expect("retrieve");
    assert!(rc.honours().contains(&"recency"), "{rc:?}");
    let (sink, mut logs) = channel_sink();
    let caller = gw.relaying_logs(sink);

    // Asked for debug logs in the request: rcp-bm25 logs its query plan at debug, the gateway
    // relays it as its own frame of this call.
    let ask = json!({"query": "boundary layer", "k": 3, "_meta": {"logLevel": "debug"}});
    let r = caller.call("retrieve", ask).await.expect("retrieve through the gateway");
    assert!(!r["hits"].as_array().is_some_and(Vec::is_empty), "{r}");
    let mut relayed = Vec::new();
    while let Ok(Some(frame)) = tokio::time::timeout(Duration::from_millis(500), logs.recv()).await {
        relayed.push(frame);
    }
    let from_engine: Vec<&LogParams> = relayed
        .iter()
        .map(|(_, l)| l)
        .filter(|l| l.data.as_ref().and_then(|d| d.get("engine")) == Some(&json!("bm25")))
        .collect();
    assert!(!from_engine.is_empty(), "no relayed engine log among {relayed:?}");
    let first = from_engine[0];
    assert_eq!(first.level, LogLevel::Debug);
    assert!(first.message.starts_with("engine 'bm25': "), "{first:?}");
    assert_eq!(first.logger.as_deref(), Some("retrieve"), "the gateway's own logger: its method");
    assert_eq!(first.data.as_ref().and_then(|d| d.get("logger")), Some(&json!("retrieve")), "the engine's logger kept");

    // Not asked: nothing relayed (the engine was not asked for logs either).
    let r = caller.call("retrieve", json!({"query": "boundary layer", "k": 3})).await.expect("retrieve");
    assert!(!r["hits"].as_array().is_some_and(Vec::is_empty), "{r}");
    let quiet = tokio::time::timeout(Duration::from_millis(500), logs.recv()).await;
    assert!(quiet.is_err(), "a log relayed without being asked: {quiet:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engines_built_in_rerank_is_usable_through_a_gateway_without_a_reranker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reranking =
        json!({"id": "bm25", "command": [bm25_bin(), "serve", "--rerank", "cross-encoder", "--rerank-fetch-model"]});
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![reranking, fixture("plain", &["--doc", "plain-1:boundary layer transition on a flat plate"])],
    );
    let gw = gateway(&reg, &["--engine-timeout-ms", "60000", "--connect-timeout-ms", "120000"]).await;
    let rc = gw.capabilities().retrieve.expect("retrieve advertised");
    assert_eq!(rc.rerank_builtin, Some(true), "the engine's rerankBuiltin is the gateway's: {rc:?}");

    let ask = json!({"query": "boundary layer transition", "k": 5, "rerank": true});
    let r = gw.call("retrieve", ask).await.expect("retrieve with rerank through the gateway");
    let hits = r["hits"].as_array().cloned().unwrap_or_default();
    let from_bm25: Vec<&serde_json::Value> = hits.iter().filter(|h| h["meta"]["engine"] == json!("bm25")).collect();
    assert!(!from_bm25.is_empty(), "{r}");
    assert!(
        from_bm25.iter().all(|h| h["scores"]["rerank"].is_number()),
        "the reranking engine's hits carry its rerank score: {r}"
    );
    let notes = notes(&r);
    assert!(
        notes.iter().any(|n| n.contains("'plain' have no built-in rerank")),
        "the engine without one is named: {notes:?}"
    );
}
