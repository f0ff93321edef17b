//! The suite over HTTP against an in-process `rcp-server` endpoint on 127.0.0.1 (ephemeral
//! port), once stateless and once with stateful sessions (§5.2).

mod common;

use std::collections::BTreeMap;
use std::sync::RwLock;

use rcp_conformance::{Config, Level, run};
use rcp_server::http::{HttpOptions, SessionMode};
use rcp_server::{HandlerResult, Index, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{IndexCapability, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::lifecycle::ConformanceLevel;
use rcp_wire::notifications::LogLevel;
use rcp_wire::retrieve::Citation;
use rcp_wire::{Hit, Meta, RcpError, RetrieveResult};
use serde_json::{Value, json};

/// Documents by id: text and metadata.
struct Shelf {
    docs: RwLock<BTreeMap<String, (String, Meta)>>,
    minted: std::sync::atomic::AtomicU64,
}

impl Shelf {
    fn new() -> Self {
        let docs = [
            ("p1", "rust async runtimes schedule futures", "rust"),
            ("p2", "the borrow checker proves memory safety", "rust"),
            ("p3", "bm25 ranks documents by term frequency", "ir"),
            ("p4", "dense retrieval embeds queries and passages", "ir"),
            ("p5", "rank fusion merges lists from several engines", "ir"),
            ("p6", "attention weighs every token against every other", "ml"),
        ]
        .into_iter()
        .map(|(id, text, topic)| {
            (id.to_owned(), (text.to_owned(), json!({"topic": topic}).as_object().cloned().unwrap_or_default()))
        })
        .collect();
        Self { docs: RwLock::new(docs), minted: 0.into() }
    }
}

impl Retrieve for Shelf {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(25), modes: Some(vec!["sparse".into()]), ..Default::default() }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([("topic", FieldType::Keyword)]))
    }

    fn pagination(&self) -> bool {
        true
    }

    fn citations(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let q = req.query.text().to_lowercase();
        let words: Vec<&str> = q.split_whitespace().collect();
        let docs = self.docs.read().map_err(|_| RcpError::internal("poisoned"))?;
        ctx.progress(0.5, "retrieve", "scoring");
        ctx.log(LogLevel::Info, "scored");
        let mut hits: Vec<Hit> = docs
            .iter()
            .filter(|(_, (_, meta))| req.filter.as_ref().is_none_or(|f| f.matches(meta)))
            .map(|(id, (text, meta))| {
                let score = text.split_whitespace().filter(|w| words.contains(w)).count() as f64;
                let mut h = Hit::new(id.as_str(), score).with_text(text.clone());
                h.meta = Some(meta.clone());
                h.citation = Some(Citation { source: Some("shelf".into()), ..Default::default() });
                h
            })
            .filter(|h| h.score > 0.0 && req.min_score.is_none_or(|m| h.score >= m))
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
        let offset: usize = req
            .cursor
            .as_deref()
            .map_or(Ok(0), str::parse)
            .map_err(|_| RcpError::invalid_params("cursor", "bad cursor"))?;
        let total = hits.len();
        let page: Vec<Hit> = hits.into_iter().skip(offset).take(req.k).collect();
        let next = (offset + page.len() < total).then(|| (offset + page.len()).to_string());
        Ok(RetrieveResult { hits: page, next_cursor: next, ..Default::default() })
    }
}

impl Index for Shelf {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let mut docs = self.docs.write().map_err(|_| RcpError::internal("poisoned"))?;
        let ids = params.documents.into_iter().map(|d| {
            let id = d
                .id
                .unwrap_or_else(|| format!("minted-{}", self.minted.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
            docs.insert(id.clone(), (d.text, d.meta.unwrap_or_default()));
            id
        });
        Ok(IndexAddResult { ids: ids.collect(), ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let mut docs = self.docs.write().map_err(|_| RcpError::internal("poisoned"))?;
        let deleted = params.ids.iter().filter(|id| docs.remove(*id).is_some()).count() as u64;
        Ok(IndexDeleteResult { deleted, ..Default::default() })
    }
}

/// The shelf engine as a server; `notifications` adds streaming and logs.
fn shelf_server(notifications: bool) -> Server {
    let shelf = std::sync::Arc::new(Shelf::new());
    let builder = Server::builder("shelf", "0").retrieve(shelf.clone()).index(shelf).conformance(ConformanceLevel::L1);
    if notifications { builder.streaming().log().build() } else { builder.build() }
}

/// Serves a fresh engine on 127.0.0.1:0 until the returned sender is dropped.
async fn start(opts: HttpOptions) -> (String, tokio::sync::oneshot::Sender<()>) {
    let server = shelf_server(true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&server, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    (format!("http://{addr}/rcp"), stop)
}

/// Serves `app` (fronting `server`, kept alive as long as it) on 127.0.0.1:0 until the returned
/// sender is dropped.
async fn serve_app(app: axum::Router, server: Server) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
        drop(server);
    });
    (format!("http://{addr}/rcp"), stop)
}

async fn certify(opts: HttpOptions) -> rcp_conformance::Report {
    let (base, _stop) = start(opts).await;
    let cfg = Config::http(base).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    println!("{}", report.render_text());
    common::assert_verdicts_follow_keywords(&report);
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_http_server_passes_with_session_checks_skipped() {
    let report = certify(HttpOptions::default()).await;
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{}", report.render_text());
    assert!(report.certified() >= Some(Level::L1));
    assert_eq!(report.declaration_honest(), Some(true));
    for id in ["lifecycle.pre-init-gated", "lifecycle.failed-init-locked", "initialize.repeat-rejected"] {
        let c = report.check(id).expect(id);
        assert_eq!(c.status, rcp_conformance::Status::Skip, "{id}: {c:?}");
        assert!(c.detail.contains("stateless"), "{id}: {}", c.detail);
    }
    assert_eq!(report.check("http.path-mismatch").map(|c| c.status), Some(rcp_conformance::Status::Pass));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_http_server_follows_the_session_token() {
    let opts = HttpOptions {
        sessions: SessionMode::Stateful { ttl: std::time::Duration::from_secs(60) },
        bearer_tokens: vec!["s3cret".into()],
        ..HttpOptions::default()
    };
    let (base, _stop) = start(opts).await;
    let cfg = Config::http(base).with_schema(common::schema()).with_header("Authorization", "Bearer s3cret");
    let report = run(&cfg).await.expect("the suite runs");
    let text = report.render_text();
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    assert!(report.certified() >= Some(Level::L1), "{text}");
    for id in ["lifecycle.pre-init-gated", "lifecycle.failed-init-locked", "initialize.repeat-rejected", "log.opt-in"] {
        assert_eq!(report.check(id).map(|c| c.status), Some(rcp_conformance::Status::Pass), "{id}\n{text}");
    }
}

/// `--stateful` as the command line serves it: sessions for the clients that send `RCP-Session`
/// back, token-less requests served statelessly for the others (§5.2 permits both). The
/// lifecycle checks that need an uninitialized session do not apply; the rest must pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_server_that_serves_tokenless_requests_certifies() {
    let opts = HttpOptions {
        sessions: SessionMode::Stateful { ttl: std::time::Duration::from_secs(60) },
        require_session: false,
        ..HttpOptions::default()
    };
    let report = certify(opts).await;
    let text = report.render_text();
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    assert!(report.certified() >= Some(Level::L1), "{text}");
    for id in ["lifecycle.pre-init-gated", "lifecycle.failed-init-locked"] {
        let c = report.check(id).expect(id);
        assert_eq!(c.status, rcp_conformance::Status::Skip, "{id}: {c:?}");
        assert!(c.detail.contains("token-less"), "{id}: {}", c.detail);
    }
    for id in ["http.sessionless-gating", "initialize.repeat-rejected", "initialize.retry", "log.opt-in"] {
        assert_eq!(report.check(id).map(|c| c.status), Some(rcp_conformance::Status::Pass), "{id}\n{text}");
    }
}

/// The third lifecycle model of §5.2: one session for the whole process. Every HTTP request is
/// dispatched on the same `rcp-server` session (`Server::connect`), so the first `initialize`
/// wins and every later one is `-32600`. A minimal HTTP front: `POST /rcp/<method>` with the path
/// checked against the body, `POST /rcp` for anything else (batches, malformed bodies).
mod global {
    use std::sync::Arc;

    use axum::body::Bytes;
    use axum::extract::{Path, State};
    use axum::http::{StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use rcp_server::transport::Connection;

    use super::*;

    async fn answer(conn: &Connection, body: &[u8]) -> Response {
        match conn.handle(body).await {
            Some(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
            None => StatusCode::NO_CONTENT.into_response(),
        }
    }

    async fn at_base(State(conn): State<Arc<Connection>>, body: Bytes) -> Response {
        answer(&conn, &body).await
    }

    async fn at_method(State(conn): State<Arc<Connection>>, Path(method): Path<String>, body: Bytes) -> Response {
        let frame: Option<Value> = serde_json::from_slice(&body).ok();
        let named = frame.as_ref().and_then(|f| f.get("method")).and_then(Value::as_str);
        if frame.as_ref().is_some_and(Value::is_object) && named.is_some_and(|m| m != method) {
            let id = frame.as_ref().and_then(|f| f.get("id")).cloned().unwrap_or(Value::Null);
            let err = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "path and body name different methods"}});
            return ([(header::CONTENT_TYPE, "application/json")], err.to_string()).into_response();
        }
        answer(&conn, &body).await
    }

    /// Serves the shelf engine with one process-wide session until the sender is dropped.
    pub(super) async fn start() -> (String, tokio::sync::oneshot::Sender<()>) {
        let server = shelf_server(false);
        let conn = Arc::new(server.connect(|_| {}));
        let app =
            axum::Router::new().route("/rcp", post(at_base)).route("/rcp/{*method}", post(at_method)).with_state(conn);
        super::serve_app(app, server).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_one_process_wide_session_certifies_with_a_note() {
    let (base, _stop) = global::start().await;
    let report = run(&Config::http(base).with_schema(common::schema())).await.expect("the suite runs");
    let text = report.render_text();
    println!("{text}");
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    assert!(report.certified() >= Some(Level::L1), "{text}");
    let model = report.check("http.session-per-client").expect("session model");
    assert_eq!(model.status, rcp_conformance::Status::Info, "§5.2 permits it (MAY): {model:?}");
    assert_eq!(report.check("initialize.repeat-rejected").map(|c| c.status), Some(rcp_conformance::Status::Pass));
    for id in ["lifecycle.pre-init-gated", "lifecycle.failed-init-locked", "initialize.retry"] {
        let c = report.check(id).expect(id);
        assert_eq!(c.status, rcp_conformance::Status::Skip, "{id}: {c:?}");
        assert!(c.detail.contains("process-wide"), "{id}: {}", c.detail);
    }
}

/// `rcp-conformance --ca-cert CA.pem --http https://...` against the engine over HTTPS
/// (certificates made here), as a user runs it; the `certifiedLevel` of its JSON report.
async fn certify_over_https(ca: &std::path::Path, https: &str) -> (Option<Value>, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rcp-conformance"));
    cmd.arg("--json").args(common::schema_args()).args(["--http", https]).env_remove("RCP_CA_CERT");
    cmd.arg("--ca-cert").arg(ca);
    let out = cmd.output().await.expect("run rcp-conformance");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice::<Value>(&out.stdout).ok();
    (report.map(|r| r["certifiedLevel"].clone()), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_engine_certifies_with_its_ca_at_the_plain_http_level() {
    use rcp_server::http::{ServerTls, TlsFiles};
    let plain = certify(HttpOptions::default()).await.certified();
    assert!(plain >= Some(Level::L1));
    let pki = rcp_testkit::pki::TestPki::new("conformance-https");
    let files = TlsFiles { cert: pki.server.cert.clone(), key: pki.server.key.clone(), client_ca: None };
    let tls = ServerTls::load(files).expect("the test certificate");
    let (base, _stop) = start(HttpOptions { tls: Some(tls), ..HttpOptions::default() }).await;
    let https = base.replacen("http://", "https://", 1);
    let (level, stderr) = certify_over_https(&pki.ca, &https).await;
    assert_eq!(level, Some(json!(plain.map_or("NONE", Level::as_str))), "{stderr}");
}

/// The HTTP mapping's details (§5.2) on our server with CORS and a rate limit: the preflight,
/// `Retry-After` on every `429` the run meets (the suite waits and sends again, so a
/// rate-limited server still certifies) and the SSE framing all pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_rate_limits_and_sse_pass_on_our_server() {
    let opts = HttpOptions {
        cors_origins: Some(vec!["*".into()]),
        rate_limit: Some(rcp_server::http::RateLimit { per_second: 200.0, burst: 40.0 }),
        ..HttpOptions::default()
    };
    let report = certify(opts).await;
    let text = report.render_text();
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    assert!(report.certified() >= Some(Level::L1), "{text}");
    for id in ["http.cors-preflight", "http.retry-after", "http.sse-framing"] {
        assert_eq!(report.check(id).map(|c| c.status), Some(rcp_conformance::Status::Pass), "{id}\n{text}");
    }
}

/// Without CORS and a rate limit there is nothing to judge: the two SHOULD checks skip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_and_retry_after_skip_where_they_do_not_apply() {
    let report = certify(HttpOptions::default()).await;
    for id in ["http.cors-preflight", "http.retry-after"] {
        let c = report.check(id).expect(id);
        assert_eq!(c.status, rcp_conformance::Status::Skip, "{id}: {c:?}");
    }
    assert_eq!(report.check("http.sse-framing").map(|c| c.status), Some(rcp_conformance::Status::Pass));
}

/// Our server behind a front that breaks one HTTP detail at a time: each check of the detail
/// reports it (WARN for the SHOULDs, FAIL for the SSE framing), and nothing else fails.
mod broken_front {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::http::{HeaderValue, Method, StatusCode, header};
    use axum::middleware::{self, Next};
    use axum::response::{IntoResponse, Response};

    use super::*;

    #[derive(Clone, Copy, Debug)]
    pub(super) enum Defect {
        /// Cross-origin answers carry `Access-Control-Allow-Origin`, but `OPTIONS` is 405.
        NoPreflight,
        /// Every fifth `POST` is `429` without `Retry-After`.
        BareThrottle,
        /// A progress frame after the final response frame.
        FrameAfterFinal,
        /// The final response split over two `data:` lines.
        SplitData,
    }

    struct Front {
        defect: Defect,
        posts: AtomicUsize,
    }

    fn is_sse(req: &Request) -> bool {
        req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"))
    }

    /// Whether `req` is the SSE framing check's own request (the SSE defects touch only that one,
    /// so no other check sees them), and the request rebuilt after reading its body.
    async fn framing_probe(req: Request) -> (bool, Request) {
        if !is_sse(&req) {
            return (false, req);
        }
        let (parts, body) = req.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
        let probe = String::from_utf8_lossy(&bytes).contains("\"sse-framing-1\"");
        (probe, Request::from_parts(parts, Body::from(bytes)))
    }

    /// `res`'s SSE body rewritten by `edit`.
    async fn rewrite(res: Response, edit: impl FnOnce(String) -> String) -> Response {
        let (mut parts, body) = res.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(edit(String::from_utf8_lossy(&bytes).into_owned())))
    }

    async fn misbehave(State(front): State<Arc<Front>>, req: Request, next: Next) -> Response {
        match front.defect {
            Defect::NoPreflight if req.method() == Method::OPTIONS => StatusCode::METHOD_NOT_ALLOWED.into_response(),
            Defect::NoPreflight => {
                let mut res = next.run(req).await;
                res.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
                res
            }
            Defect::BareThrottle if req.method() == Method::POST => {
                if front.posts.fetch_add(1, Ordering::SeqCst) % 5 == 4 {
                    return StatusCode::TOO_MANY_REQUESTS.into_response();
                }
                next.run(req).await
            }
            Defect::FrameAfterFinal | Defect::SplitData => {
                let (probe, req) = framing_probe(req).await;
                let res = next.run(req).await;
                match front.defect {
                    _ if !probe => res,
                    Defect::FrameAfterFinal => {
                        let late = r#"data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"sse-framing","progress":1.0}}"#;
                        rewrite(res, |body| format!("{body}{late}\n\n")).await
                    }
                    _ => {
                        let split = |body: String| {
                            let Some(at) = body.rfind("data: {\"jsonrpc\":\"2.0\",\"id\"") else { return body };
                            let cut = at + body[at..].find(",\"").map_or(10, |i| i + 1);
                            format!("{}\ndata: {}", &body[..cut], &body[cut..])
                        };
                        rewrite(res, split).await
                    }
                }
            }
            _ => next.run(req).await,
        }
    }

    /// Our shelf engine behind `defect`, until the sender is dropped.
    pub(super) async fn start(defect: Defect) -> (String, tokio::sync::oneshot::Sender<()>) {
        let server = shelf_server(true);
        let front = Arc::new(Front { defect, posts: AtomicUsize::new(0) });
        let app = rcp_server::http::router(&server, HttpOptions::default())
            .layer(middleware::from_fn_with_state(front, misbehave));
        super::serve_app(app, server).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_http_detail_is_reported_by_its_check() {
    use broken_front::Defect;
    use rcp_conformance::Status::{Fail, Warn};
    let cases = [
        (Defect::NoPreflight, "http.cors-preflight", Warn, "preflight was answered HTTP 405"),
        (Defect::BareThrottle, "http.retry-after", Warn, "carried no Retry-After"),
        (Defect::FrameAfterFinal, "http.sse-framing", Fail, "follows the final response frame"),
        (Defect::SplitData, "http.sse-framing", Fail, "2 data: lines"),
    ];
    for (defect, id, status, says) in cases {
        let (base, _stop) = broken_front::start(defect).await;
        let report = run(&Config::http(base).with_schema(common::schema())).await.expect("the suite runs");
        let text = report.render_text();
        common::assert_verdicts_follow_keywords(&report);
        let c = report.check(id).expect(id);
        assert_eq!(c.status, status, "{defect:?}: {c:?}");
        assert!(c.detail.contains(says), "{defect:?}: {}", c.detail);
        let expected: Vec<&str> = if status == Fail { vec![id] } else { Vec::new() };
        assert_eq!(common::failed(&report), expected, "{defect:?}\n{text}");
    }
}
