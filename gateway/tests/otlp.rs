//! Spans over OTLP (feature `otlp`, issue "Deployable"): a federated `retrieve` through the
//! gateway is one trace, exported to an OTLP/HTTP receiver started here. The gateway's
//! `request` span continues the caller's `_meta.traceparent`, each engine call is an `engine`
//! span under it, and each engine receives that span as its `_meta.traceparent`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use common::*;
use rcp_client::{Client, ClientOptions};
use serde_json::{Value, json};

/// Every span the receiver was sent, flattened out of `resourceSpans[].scopeSpans[].spans[]`.
type Received = Arc<Mutex<Vec<Value>>>;

async fn collect(State(received): State<Received>, body: Bytes) -> &'static str {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let spans = request["resourceSpans"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["scopeSpans"].as_array().into_iter().flatten())
        .flat_map(|s| s["spans"].as_array().into_iter().flatten())
        .cloned();
    if let Ok(mut all) = received.lock() {
        all.extend(spans);
    }
    "{}"
}

/// An OTLP/HTTP (JSON) receiver on 127.0.0.1: its base URL and what it received.
async fn receiver() -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new().route("/v1/traces", post(collect)).with_state(Arc::clone(&received));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), received)
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"].as_array()?.iter().find(|a| a["key"] == key)?["value"]["stringValue"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federated_retrieve_is_one_trace_from_the_caller_through_each_engine_call() {
    let (endpoint, received) = receiver().await;
    let dir = tempfile::Builder::new().prefix("rcp-gateway-otlp").tempdir().expect("tempdir");
    let (reg, ev_a, ev_b) = recording_pair(dir.path());
    let cmd = gateway_cmd(&reg, &["--otlp-endpoint", &endpoint]);
    let gw = Client::connect_stdio(&cmd, ClientOptions::default()).await.expect("connect to the gateway");
    let (trace, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let meta = json!({"traceId": trace, "traceparent": format!("00-{trace}-{caller_span}-01")});
    gw.call("retrieve", json!({"query": "wing", "k": 2, "_meta": meta})).await.expect("retrieve");
    // The gateway exports what is left when it exits.
    gw.shutdown().await.expect("shutdown");

    let started = Instant::now();
    let spans = loop {
        let spans = received.lock().map(|s| s.clone()).unwrap_or_default();
        let engines = spans.iter().filter(|s| s["name"] == "engine").count();
        if engines >= 2 || started.elapsed() > Duration::from_secs(20) {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    let request = spans
        .iter()
        .find(|s| s["name"] == "request" && attribute(s, "method") == Some("retrieve"))
        .unwrap_or_else(|| panic!("no retrieve request span among {names:?}"));
    assert_eq!(request["traceId"], trace, "{request}");
    assert_eq!(request["parentSpanId"], caller_span, "the caller's span is the parent: {request}");
    let request_span = request["spanId"].as_str().expect("span id");
    for (engine, events) in [("a", &ev_a), ("b", &ev_b)] {
        let span = spans
            .iter()
            .find(|s| s["name"] == "engine" && attribute(s, "engine") == Some(engine))
            .unwrap_or_else(|| panic!("no engine span for '{engine}' among {names:?}"));
        assert_eq!(span["traceId"], trace, "{span}");
        assert_eq!(span["parentSpanId"], request_span, "{span}");
        let id = span["spanId"].as_str().expect("span id");
        assert_eq!(received_meta(events, "traceparent"), vec![format!("00-{trace}-{id}-01")], "engine '{engine}'");
    }
}
