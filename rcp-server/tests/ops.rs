//! The operations surface against a real listening server on 127.0.0.1 with a real HTTP
//! client: `/healthz`, `/readyz` (engine hook and drain), `/metrics` behind the bearer tokens
//! or public, and counters that move with traffic on HTTP and on a stdio-framed stream.
//!
//! The `metrics` recorder is process-global, so every assertion on a counter is on its
//! increase between two scrapes, never on its absolute value.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rcp_server::feedback::{FeedbackOptions, FeedbackStore};
use rcp_server::http::{HttpOptions, OpsPaths};
use rcp_server::{
    EngineStats, HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, ServerBuilder, Status,
};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Engine {
    ready: AtomicBool,
}

impl Retrieve for Engine {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult::from_hits(vec![Hit::new("d1", 1.0)]))
    }
}

impl Status for Engine {
    fn ready(&self) -> Result<(), rcp_server::ReadyError> {
        if self.ready.load(Ordering::SeqCst) { Ok(()) } else { Err("index still opening".into()) }
    }

    fn stats(&self) -> EngineStats {
        EngineStats { documents: Some(42), index_version: Some(7), ..Default::default() }
    }
}

const TOKEN: &str = "s3cret";

struct Running {
    root: String,
    client: reqwest::Client,
    server: Server,
    engine: Arc<Engine>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

async fn start(name: &str, opts: HttpOptions) -> Running {
    start_with(name, opts, |b| b).await
}

/// [`start`] with more registered on the builder by `more`.
async fn start_with(name: &str, opts: HttpOptions, more: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Running {
    let engine = Arc::new(Engine { ready: AtomicBool::new(true) });
    let server = more(Server::builder(name, "1.2.3").retrieve(Arc::clone(&engine)).status(Arc::clone(&engine))).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    let done = tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&serving, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    Running {
        root: format!("http://{addr}"),
        client: rcp_testkit::http_client(),
        server,
        engine,
        stop: Some(stop),
        done,
    }
}

impl Running {
    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, String) {
        let mut r = self.client.get(format!("{}{path}", self.root));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.expect("send");
        (r.status(), r.text().await.expect("body"))
    }

    async fn rpc(&self, method: &str, params: Value, token: Option<&str>) -> (StatusCode, Value) {
        let mut r = self
            .client
            .post(format!("{}/rcp/{method}", self.root))
            .json(&json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.expect("send");
        (r.status(), r.json().await.unwrap_or(Value::Null))
    }

    async fn scrape(&self) -> String {
        let (status, body) = self.get("/metrics", Some(TOKEN)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

/// The sum of the samples of `name` whose labels include every one of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            if !(rest.is_empty() || rest.starts_with('{')) {
                return None;
            }
            labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

fn tokens() -> HttpOptions {
    HttpOptions { bearer_tokens: vec![TOKEN.into()], ..HttpOptions::default() }
}

#[tokio::test]
async fn health_is_public_and_metrics_need_a_token_unless_public() {
    let s = start("ops-auth", tokens()).await;
    assert_eq!(s.get("/healthz", None).await.0, StatusCode::OK);
    assert_eq!(s.get("/readyz", None).await.0, StatusCode::OK);
    assert_eq!(s.get("/metrics", None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(s.get("/metrics", Some("wrong")).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(s.get("/metrics", Some(TOKEN)).await.0, StatusCode::OK);
    // Paths outside the operations set and the base path are still 404.
    assert_eq!(s.get("/", None).await.0, StatusCode::NOT_FOUND);

    let public = start("ops-public", HttpOptions { metrics_public: true, ..tokens() }).await;
    let (status, body) = public.get("/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("rcp_engine_documents{engine=\"ops-public\"} 42"), "{body}");
    // Public metrics do not open the RCP endpoints.
    assert_eq!(public.rpc("ping", json!({}), None).await.1["error"]["code"], -32012);

    let ops = OpsPaths { healthz: Some("/live".into()), ..OpsPaths::default() };
    let moved = start("ops-moved", HttpOptions { ops, ..HttpOptions::default() }).await;
    assert_eq!(moved.get("/live", None).await.0, StatusCode::OK);
    assert_eq!(moved.get("/healthz", None).await.0, StatusCode::NOT_FOUND);
    let off = start("ops-off", HttpOptions { ops: OpsPaths::none(), ..tokens() }).await;
    assert_eq!(off.get("/healthz", None).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn counters_move_with_traffic_on_http_and_stdio() {
    let s = start("ops-count", tokens()).await;
    let before = s.scrape().await;

    for _ in 0..3 {
        let (status, v) = s.rpc("ping", json!({}), Some(TOKEN)).await;
        assert_eq!((status, v["result"].is_object()), (StatusCode::OK, true), "{v}");
    }
    let (_, v) = s.rpc("retrieve", json!({"query": "q", "k": 1}), Some(TOKEN)).await;
    assert_eq!(v["result"]["hits"][0]["id"], "d1");
    let (_, v) = s.rpc("retrieve", json!({"query": "q", "k": "many"}), Some(TOKEN)).await;
    assert_eq!(v["error"]["code"], -32602);
    let (_, v) = s.rpc("ping", json!({}), Some("wrong")).await;
    assert_eq!(v["error"]["code"], -32012);

    // The same server over an NDJSON byte stream (what stdio frames): it counts too.
    let (client, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let stdio = s.server.clone();
    tokio::spawn(async move { stdio.serve((server_read, server_write)).await });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    client_write.write_all(b"{not json\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await.expect("write");
    let parse_error = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await.expect("answer in time");
    assert!(parse_error.expect("read").is_some_and(|l| l.contains("-32700")));
    let answer = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await.expect("answer in time");
    assert!(answer.expect("read").is_some_and(|l| l.contains("\"result\"")));

    let after = s.scrape().await;
    let delta = |name: &str, labels: &[(&str, &str)]| sample(&after, name, labels) - sample(&before, name, labels);
    assert!(delta("rcp_requests_total", &[("method", "ping"), ("outcome", "ok")]) >= 4.0, "{after}");
    assert!(delta("rcp_requests_total", &[("method", "retrieve"), ("outcome", "ok")]) >= 1.0, "{after}");
    assert!(delta("rcp_requests_total", &[("method", "retrieve"), ("outcome", "-32602")]) >= 1.0, "{after}");
    assert!(delta("rcp_requests_total", &[("method", "invalid"), ("outcome", "-32700")]) >= 1.0, "{after}");
    assert!(delta("rcp_rejections_total", &[("reason", "auth")]) >= 1.0, "{after}");
    assert!(delta("rcp_request_duration_seconds_count", &[("method", "retrieve")]) >= 2.0, "{after}");
    assert!(after.contains("rcp_request_duration_seconds_bucket{method=\"ping\",le=\"0.001\"}"), "{after}");
    assert!(after.contains("# TYPE rcp_requests_in_flight gauge"), "{after}");
    assert_eq!(sample(&after, "rcp_engine_documents", &[("engine", "ops-count")]), 42.0);
    assert_eq!(sample(&after, "rcp_engine_index_version", &[("engine", "ops-count")]), 7.0);
    assert_eq!(sample(&after, "rcp_engine_ready", &[("engine", "ops-count")]), 1.0);
}

#[tokio::test]
async fn readiness_follows_the_engine_then_fails_while_draining() {
    let mut s = start("ops-drain", HttpOptions { drain_grace: Duration::from_secs(1), ..tokens() }).await;
    assert_eq!(s.get("/readyz", None).await.0, StatusCode::OK);
    s.engine.ready.store(false, Ordering::SeqCst);
    let (status, body) = s.get("/readyz", None).await;
    assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "engine not ready: index still opening\n"));
    s.engine.ready.store(true, Ordering::SeqCst);
    assert_eq!(s.get("/readyz", None).await.0, StatusCode::OK);

    let _ = s.stop.take().map(|stop| stop.send(()));
    let mut draining = None;
    for _ in 0..100 {
        let (status, body) = s.get("/readyz", None).await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            draining = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(draining.as_deref(), Some("draining: shutdown in progress\n"));
    // Alive and still serving during the grace period; then the listener closes.
    assert_eq!(s.get("/healthz", None).await.0, StatusCode::OK);
    assert_eq!(s.rpc("ping", json!({}), Some(TOKEN)).await.0, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), &mut s.done).await.expect("drained in time").expect("served");
}

#[tokio::test]
async fn feedback_signals_and_quarantined_hits_are_counted() {
    let dir = std::env::temp_dir().join(format!("rcp-ops-feedback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = FeedbackOptions { threshold: 1, ..FeedbackOptions::default() };
    let store = Arc::new(FeedbackStore::open(&dir, options).expect("opens"));
    let s = start_with("ops-feedback", tokens(), |b| b.durable_feedback(store)).await;
    let before = s.scrape().await;
    let signals = json!({"signals": [{"hitId": "d1", "poisonSuspected": true}, {"hitId": "d2", "used": true}]});
    let (_, v) = s.rpc("feedback", signals, Some(TOKEN)).await;
    assert_eq!(v["result"]["accepted"], 2, "{v}");
    let (_, v) = s.rpc("retrieve", json!({"query": "q", "k": 1}), Some(TOKEN)).await;
    assert_eq!(v["result"]["hits"], json!([]), "d1 is quarantined: {v}");
    let after = s.scrape().await;
    let delta = |name: &str, labels: &[(&str, &str)]| sample(&after, name, labels) - sample(&before, name, labels);
    assert!(delta("rcp_feedback_signals_total", &[("kind", "any")]) >= 2.0, "{after}");
    assert!(delta("rcp_feedback_signals_total", &[("kind", "suspected")]) >= 1.0, "{after}");
    assert!(sample(&after, "rcp_quarantined_hits", &[]) >= 1.0, "{after}");
    let _ = std::fs::remove_dir_all(&dir);
}
