//! The HTTP transport against a real listening server on 127.0.0.1 (ephemeral port) with a
//! real HTTP client: every status row of §5.2, method/path matching, SSE frame order,
//! disconnect-cancels, stateless vs stateful sessions, bearer auth, body and rate limits,
//! batches and CORS. Every JSON-RPC frame received is validated against the schema.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use rcp_server::http::{HttpOptions, RateLimit, SessionMode};
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_testkit::assert_valid_frame;
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RcpError, RetrieveResult};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Counts handlers that observed cancellation.
#[derive(Default)]
struct Slow {
    cancelled: Arc<AtomicUsize>,
}

impl Retrieve for Slow {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let delay = ctx.meta().and_then(|m| m.get("delayMs")).and_then(Value::as_u64).unwrap_or(0);
        // Watch the token the way blocking work would: it must fire if the request is abandoned.
        let token = ctx.cancellation().clone();
        let cancelled = Arc::clone(&self.cancelled);
        tokio::spawn(async move {
            token.cancelled().await;
            cancelled.fetch_add(1, Ordering::SeqCst);
        });
        for step in 0..4u32 {
            ctx.progress(f64::from(step) / 4.0, "retrieve", format!("step {step}"));
            ctx.progress_partial(f64::from(step) / 4.0, "retrieve", vec![Hit::new(format!("partial-{step}"), 0.1)]);
            let wait = tokio::time::sleep(Duration::from_millis(delay / 4));
            tokio::select! {
                _ = wait => {}
                _ = ctx.cancellation().cancelled() => return Err(RcpError::cancelled(None)),
            }
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new("d1", 1.0).with_text(req.query.text())]))
    }
}

struct Running {
    base: String,
    client: reqwest::Client,
    slow: Arc<Slow>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(opts: HttpOptions) -> Running {
    let slow = Arc::new(Slow::default());
    let server = Server::builder("http-test", "0").retrieve(Arc::clone(&slow)).streaming().build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&server, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    Running { base: format!("http://{addr}/rcp"), client: rcp_testkit::http_client(), slow, _stop: stop }
}

impl Running {
    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client.post(format!("{}{path}", self.base)).json(body).send().await.expect("send")
    }

    async fn rpc(&self, method: &str, id: Value, params: Value) -> (StatusCode, Value) {
        let r =
            self.post(&format!("/{method}"), &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})).await;
        let status = r.status();
        let v: Value = r.json().await.expect("json body");
        assert_valid_frame(&v);
        (status, v)
    }
}

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
}

#[tokio::test]
async fn status_codes_follow_section_5_2() {
    let s = start(HttpOptions::default()).await;
    // 200 for success and for JSON-RPC errors alike.
    let (status, v) = s.rpc("retrieve", json!(1), json!({"query": "q", "k": 1})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["result"]["hits"][0]["id"], "d1");
    let (status, v) = s.rpc("embed", json!(2), json!({"inputs": ["x"]})).await;
    assert_eq!((status, v["error"]["code"].clone()), (StatusCode::OK, json!(-32003)));
    let (status, v) = s.rpc("bogus", json!(3), json!({})).await;
    assert_eq!((status, v["error"]["code"].clone()), (StatusCode::OK, json!(-32004)));
    // 400 for a body that is not JSON.
    let r = s.client.post(&s.base).header("content-type", "application/json").body("{nope").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // 404 for an unknown path.
    let r = s.client.post(s.base.replace("/rcp", "/elsewhere")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // 204, no body, for a notification.
    let r = s.post("/ping", &json!({"jsonrpc":"2.0","method":"ping"})).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = s.post("", &json!({"jsonrpc":"2.0","method":"notifications/cancel","params":{"id":9}})).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn path_method_must_match_body_method_and_batches_use_the_base_path() {
    let s = start(HttpOptions::default()).await;
    let r = s.post("/retrieve", &req(json!("m"), "ping", json!({}))).await;
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!("m"), json!(-32600)));

    let batch = json!([req(json!(1), "ping", json!({"nonce": 1})), {"jsonrpc":"2.0","method":"ping"},
        req(json!(2), "retrieve", json!({"query": "q", "k": 1}))]);
    let r = s.post("", &batch).await;
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_valid_frame(&v);
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    let r = s.post("/ping", &batch).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32600);
    let r = s.post("", &json!([{"jsonrpc":"2.0","method":"ping"}])).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn sse_streams_progress_then_exactly_one_final_frame() {
    let s = start(HttpOptions::default()).await;
    let body =
        req(json!(7), "retrieve", json!({"query": "q", "k": 1, "_meta": {"progressToken": "tok", "delayMs": 40}}));
    let r = s
        .client
        .post(format!("{}/retrieve", s.base))
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = r.text().await.unwrap();
    let frames: Vec<Value> = text
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data:")).map(str::trim))
        .map(|d| serde_json::from_str(d).expect("frame is JSON"))
        .collect();
    frames.iter().for_each(assert_valid_frame);
    let (last, progress) = frames.split_last().expect("frames");
    assert_eq!(last["id"], 7);
    assert!(last["result"]["hits"].is_array());
    assert!(progress.len() >= 4, "{text}");
    assert!(progress.iter().all(|f| f["method"] == "notifications/progress" && f["params"]["progressToken"] == "tok"));
    assert!(progress.iter().any(|f| f["params"]["partial"]["hits"].is_array()));
    assert_eq!(frames.iter().filter(|f| f.get("id").is_some()).count(), 1);

    // Without the Accept header: one buffered JSON response.
    let r = s.post("/retrieve", &body).await;
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_cancels_the_handler() {
    let s = start(HttpOptions::default()).await;
    let body =
        req(json!(8), "retrieve", json!({"query": "q", "k": 1, "_meta": {"progressToken": 1, "delayMs": 20000}}));
    let r = s
        .client
        .post(format!("{}/retrieve", s.base))
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stream = r.bytes_stream();
    let first = stream.next().await.expect("a first event").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    drop(stream);
    for _ in 0..250 {
        if s.slow.cancelled.load(Ordering::SeqCst) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the handler was not cancelled after the client disconnected");
}

#[tokio::test]
async fn stateless_mode_needs_no_handshake_and_initialize_is_idempotent() {
    let s = start(HttpOptions::default()).await;
    let (_, v) = s.rpc("retrieve", json!(1), json!({"query": "q", "k": 1})).await;
    assert!(v["result"].is_object());
    let (_, a) = s.rpc("initialize", json!(2), json!({"protocolVersion": 1})).await;
    let (_, b) = s.rpc("initialize", json!(3), json!({"protocolVersion": 5})).await;
    assert_eq!(a["result"], b["result"]);
    assert_eq!(a["result"]["protocolVersion"], 1);
    let (_, v) = s.rpc("initialize", json!(4), json!({"protocolVersion": 0})).await;
    assert_eq!(v["error"]["code"], -32002);
    let (_, v) = s.rpc("index/add", json!(5), json!({"documents": []})).await;
    assert_eq!(v["error"]["code"], -32003);
}

#[tokio::test]
async fn stateful_mode_issues_sessions_and_expires_them() {
    let s = start(HttpOptions {
        sessions: SessionMode::Stateful { ttl: Duration::from_millis(400) },
        ..Default::default()
    })
    .await;
    let (_, v) = s.rpc("retrieve", json!(1), json!({"query": "q", "k": 1})).await;
    assert_eq!(v["error"]["code"], -32001, "no session yet");
    let (_, v) = s.rpc("initialize", json!(2), json!({"protocolVersion": 1})).await;
    let token = v["result"]["_meta"]["session"].as_str().expect("session token").to_owned();
    let with = |id: i64, method: &str, params: Value| {
        s.client.post(format!("{}/{method}", s.base)).header("RCP-Session", token.clone()).json(&req(
            json!(id),
            method,
            params,
        ))
    };
    let v: Value = with(3, "retrieve", json!({"query": "q", "k": 1})).send().await.unwrap().json().await.unwrap();
    assert!(v["result"]["hits"].is_array(), "{v}");
    let v: Value = with(4, "initialize", json!({"protocolVersion": 1})).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["error"]["code"], -32600, "second initialize in the same session");
    let v: Value = s
        .client
        .post(format!("{}/retrieve", s.base))
        .header("RCP-Session", "bogus")
        .json(&req(json!(5), "retrieve", json!({"query": "q", "k": 1})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["error"]["code"], -32001);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let v: Value = with(6, "retrieve", json!({"query": "q", "k": 1})).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["error"]["code"], -32001, "expired session");
    // initialize with the stale token starts a fresh session.
    let v: Value = with(7, "initialize", json!({"protocolVersion": 1})).send().await.unwrap().json().await.unwrap();
    assert!(v["result"]["_meta"]["session"].as_str().is_some_and(|t| t != token), "{v}");

    // An initialize asking for SSE still registers its session.
    let r = s
        .client
        .post(format!("{}/initialize", s.base))
        .header("accept", "application/json, text/event-stream")
        .json(&req(json!(8), "initialize", json!({"protocolVersion": 1})))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.expect("initialize is answered as JSON");
    let fresh = v["result"]["_meta"]["session"].as_str().expect("token").to_owned();
    let v: Value = s
        .client
        .post(format!("{}/retrieve", s.base))
        .header("RCP-Session", fresh)
        .json(&req(json!(9), "retrieve", json!({"query": "q", "k": 1})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["result"]["hits"].is_array(), "{v}");
}

#[tokio::test]
async fn stateful_mode_serves_requests_without_a_session_statelessly_unless_required() {
    let s = start(HttpOptions {
        sessions: SessionMode::Stateful { ttl: Duration::from_secs(60) },
        require_session: false,
        ..Default::default()
    })
    .await;
    // A client that never sends RCP-Session (public SDKs) is served at the advertised capabilities.
    let (_, v) = s.rpc("retrieve", json!(1), json!({"query": "q", "k": 1})).await;
    assert!(v["result"]["hits"].is_array(), "{v}");
    let (_, v) = s.rpc("index/add", json!(2), json!({"documents": []})).await;
    assert_eq!(v["error"]["code"], -32003, "still gated on what is advertised");
    // A token that names no live session is still refused.
    let v: Value = s
        .client
        .post(format!("{}/retrieve", s.base))
        .header("RCP-Session", "bogus")
        .json(&req(json!(3), "retrieve", json!({"query": "q", "k": 1})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["error"]["code"], -32001);
    // initialize still issues a session.
    let (_, v) = s.rpc("initialize", json!(4), json!({"protocolVersion": 1})).await;
    assert!(v["result"]["_meta"]["session"].is_string(), "{v}");
}

#[tokio::test]
async fn bearer_tokens_are_checked_before_anything_else() {
    let s = start(HttpOptions { bearer_tokens: vec!["s3cret".into(), "other".into()], ..Default::default() }).await;
    // A request with an id gets a JSON-RPC -32012 in a 200 body, even for initialize.
    let (status, v) = s.rpc("initialize", json!(1), json!({"protocolVersion": 1})).await;
    assert_eq!((status, v["error"]["code"].clone()), (StatusCode::OK, json!(-32012)));
    let (_, v) = s.rpc("bogus", json!(2), json!({})).await;
    assert_eq!(v["error"]["code"], -32012, "auth precedes gating");
    // No id to answer: 401.
    let r = s.post("/ping", &json!({"jsonrpc":"2.0","method":"ping"})).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let bad = s
        .client
        .post(format!("{}/ping", s.base))
        .bearer_auth("s3cre")
        .json(&req(json!(3), "ping", json!({})))
        .send()
        .await
        .unwrap();
    let v: Value = bad.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32012);
    let good = s
        .client
        .post(format!("{}/ping", s.base))
        .bearer_auth("other")
        .json(&req(json!(4), "ping", json!({})))
        .send()
        .await
        .unwrap();
    let v: Value = good.json().await.unwrap();
    assert_eq!(v["result"], json!({}));
}

#[tokio::test]
async fn oversized_bodies_are_payload_too_large() {
    let s = start(HttpOptions { body_limit: 1024, ..Default::default() }).await;
    let big = req(json!(1), "retrieve", json!({"query": "x".repeat(4096), "k": 1}));
    let r = s.post("/retrieve", &big).await;
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_valid_frame(&v);
    assert_eq!(v["error"]["code"], -32013);
}

#[tokio::test]
async fn a_burst_over_the_rate_limit_gets_429_with_retry_after() {
    let s =
        start(HttpOptions { rate_limit: Some(RateLimit { per_second: 2.0, burst: 3.0 }), ..Default::default() }).await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..10 {
        let r = s.post("/ping", &req(json!(i), "ping", json!({}))).await;
        statuses.push(r.status());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["error"]["code"], -32011);
            assert!(v["error"]["data"]["retryAfterMs"].as_u64().is_some());
        }
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 3, "{statuses:?}");
    assert!(retry_after.is_some_and(|s| s.parse::<u64>().is_ok_and(|n| n >= 1)));
}

#[tokio::test]
async fn cors_preflight_is_answered() {
    let s = start(HttpOptions { cors_origins: Some(vec!["https://app.example".into()]), ..Default::default() }).await;
    let r = s
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/retrieve", s.base))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type,authorization")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(r.headers()["access-control-allow-origin"], "https://app.example");
    let r = s.post("/ping", &req(json!(1), "ping", json!({}))).await;
    assert_eq!(r.status(), StatusCode::OK);
}
