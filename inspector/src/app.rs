//! The inspector's HTTP surface: the page, the per-engine RCP proxy, and the few endpoints the
//! panels need beyond JSON-RPC (targets, health, wire log, federation, conformance).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rcp_client::{EngineSpec, Federation, FederationOptions, Registry, Transport};
use rcp_wire::RetrieveParams;
use rcp_wire::fusion::FusionMethod;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::engine::{Engine, Link};
use crate::wire::WireLog;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const GRAPH_JS: &str = include_str!("../assets/graph.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// The header that tags who sent a proxied frame, for the Wire panel.
pub const SOURCE_HEADER: &str = "x-inspector-source";

/// Everything the handlers share.
pub struct App {
    /// The engines, in registry order.
    pub engines: Vec<Arc<Engine>>,
    /// The frame log.
    pub wire: Arc<WireLog>,
    /// Whether the target was a registry (Compare is offered for registries only).
    pub registry: bool,
    /// `http://127.0.0.1:PORT`, the inspector's own origin.
    pub origin: String,
    /// The JSON Schema the Conformance panel validates frames with, if known.
    pub schema: Option<PathBuf>,
    /// One federation per fusion method, each over the inspector's own proxy endpoints.
    federations: Mutex<HashMap<String, Arc<Federation>>>,
    /// Port the inspector listens on (for the Host check).
    port: u16,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("engines", &self.engines.len())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The shared state for `engines` served at `127.0.0.1:port`.
    pub fn new(engines: Vec<Engine>, wire: Arc<WireLog>, registry: bool, port: u16, schema: Option<PathBuf>) -> Self {
        Self {
            engines: engines.into_iter().map(Arc::new).collect(),
            wire,
            registry,
            origin: format!("http://127.0.0.1:{port}"),
            schema,
            federations: Mutex::new(HashMap::new()),
            port,
        }
    }

    fn engine(&self, id: &str) -> Option<Arc<Engine>> {
        self.engines.iter().find(|e| e.id() == id).cloned()
    }

    /// The federation for `fusion` whose engines are this inspector's proxies, so its frames
    /// are logged like the page's and stdio engines are not spawned twice.
    async fn federation(&self, fusion: FusionMethod) -> Arc<Federation> {
        let mut feds = self.federations.lock().await;
        feds.entry(fusion.name().to_owned())
            .or_insert_with(|| {
                let engines = self
                    .engines
                    .iter()
                    .map(|e| {
                        let url = format!("{}/rpc/{}", self.origin, e.id());
                        let mut spec = EngineSpec::new(e.id(), Transport::Http { url });
                        spec.priority = e.spec.priority;
                        spec.weight = e.spec.weight;
                        spec.required = e.spec.required;
                        spec.headers = vec![(SOURCE_HEADER.into(), "compare".into())];
                        spec
                    })
                    .collect();
                let options =
                    FederationOptions { fusion, engine_timeout: Duration::from_secs(30), ..Default::default() };
                Arc::new(Federation::new(Registry { engines, ..Default::default() }, options))
            })
            .clone()
    }
}

/// The router of an inspector.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX_HTML) }))
        .route("/app.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], APP_JS) }))
        .route("/graph.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], GRAPH_JS) }))
        .route("/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS) }))
        .route("/api/targets", get(targets))
        .route("/api/health/{engine}", get(health))
        .route("/api/wire", get(wire).delete(wire_clear))
        .route("/api/federate", post(federate))
        .route("/api/conformance/{engine}", post(conformance))
        .route("/rpc/{engine}/{*method}", post(rpc))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Only this machine's browser may drive the engines: the Host must be the loopback address
/// the inspector listens on (no DNS rebinding), and POSTs must be JSON (a cross-site form
/// cannot send that without a CORS preflight, which is never granted).
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let allowed = [format!("127.0.0.1:{}", app.port), format!("localhost:{}", app.port)];
    if !allowed.iter().any(|a| a == host) {
        return (StatusCode::FORBIDDEN, "the inspector answers requests to 127.0.0.1 only\n").into_response();
    }
    if req.method() == axum::http::Method::POST {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("application/json"));
        if !json {
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "POST bodies must be application/json\n").into_response();
        }
    }
    next.run(req).await
}

fn not_found(engine: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": format!("no engine '{engine}'")}))).into_response()
}

async fn targets(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "engines": app.engines.iter().map(|e| e.describe()).collect::<Vec<_>>(),
        "registry": app.registry,
        "origin": app.origin,
        "schema": app.schema.as_ref().map(|p| p.display().to_string()),
    }))
}

async fn health(State(app): State<Arc<App>>, Path(engine): Path<String>) -> Response {
    match app.engine(&engine) {
        Some(e) => Json(e.health().await).into_response(),
        None => not_found(&engine),
    }
}

#[derive(Deserialize)]
struct WireQuery {
    #[serde(default)]
    after: u64,
}

/// `{"entries": [...], "more": bool}`: the entries after `after`, at most
/// [`crate::wire::RESPONSE_BYTES`] of them, streamed one entry at a time (the log hands out
/// shared entries; nothing is copied whole).
async fn wire(State(app): State<Arc<App>>, Query(q): Query<WireQuery>) -> Response {
    let page = app.wire.since(q.after);
    let tail = format!("],\"more\":{}}}", page.more);
    let entries = page.entries.into_iter().enumerate().map(|(i, entry)| {
        let mut chunk = Vec::new();
        if i > 0 {
            chunk.push(b',');
        }
        if serde_json::to_writer(&mut chunk, &*entry).is_err() {
            chunk.extend_from_slice(b"null");
        }
        Ok::<_, std::convert::Infallible>(Bytes::from(chunk))
    });
    let body = futures::stream::iter(
        std::iter::once(Ok(Bytes::from_static(b"{\"entries\":[")))
            .chain(entries)
            .chain(std::iter::once(Ok(Bytes::from(tail)))),
    );
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response()
}

async fn wire_clear(State(app): State<Arc<App>>) -> StatusCode {
    app.wire.clear();
    StatusCode::NO_CONTENT
}

async fn rpc(
    State(app): State<Arc<App>>,
    Path((engine, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(e) = app.engine(&engine) else { return not_found(&engine) };
    if !forwardable(&method) {
        return unknown_method(&method, &body);
    }
    let source = headers.get(SOURCE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("page").to_owned();
    e.rpc(&method, body, &headers, app.wire.clone(), &source).await
}

/// Whether the inspector forwards `method` to an engine: a method of RCP/1 (§7) or
/// `notifications/cancel` (§7.14). Anything else, such as a path that climbs out of the base
/// (`..%2F..%2Fmetrics`), is never sent, so the engine's credentials go to RCP methods only.
pub fn forwardable(method: &str) -> bool {
    rcp_wire::methods::Method::from_name(method).is_some() || method == rcp_wire::notifications::CANCEL
}

/// `404` with a `-32601` frame for a method the inspector does not forward.
fn unknown_method(method: &str, body: &[u8]) -> Response {
    let id = serde_json::from_slice::<Value>(body).ok().and_then(|f| f.get("id").cloned()).unwrap_or(Value::Null);
    let shown: String = method.chars().take(120).collect();
    let message = format!("method not found: '{shown}' is not an RCP method; the inspector forwards RCP methods only");
    (StatusCode::NOT_FOUND, Json(crate::stdio::error_frame(&id, -32601, message, None))).into_response()
}

/// What the Compare panel asks for.
#[derive(Deserialize)]
struct FederateRequest {
    /// `retrieve` params, as on the wire.
    params: Value,
    /// `rrf`, `weighted` or `convex`.
    #[serde(default)]
    fusion: Option<String>,
}

/// Fans a query out to every engine with rcp-client's `Federation` and returns each engine's
/// own ranking beside the fused list (what `rcpctl federate --json` prints).
async fn federate(State(app): State<Arc<App>>, Json(req): Json<FederateRequest>) -> Response {
    let bad = |msg: String| (StatusCode::BAD_REQUEST, Json(json!({"error": {"code": -32602, "message": msg}})));
    let fusion = match req.fusion {
        None => rcp_client::federation::preferred_fusion(),
        Some(name) => match FusionMethod::from_name(&name) {
            Some(f) => f,
            None => return bad(format!("unknown fusion '{name}'; expected rrf, weighted or convex")).into_response(),
        },
    };
    let params: RetrieveParams = match serde_json::from_value(req.params) {
        Ok(p) => p,
        Err(e) => return bad(format!("invalid retrieve params: {e}")).into_response(),
    };
    let fed = app.federation(fusion).await;
    match fed.retrieve(params).await {
        Ok(out) => Json(out.to_json()).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, Json(json!({"error": e.to_rcp()}))).into_response(),
    }
}

/// Runs rcp-conformance in-process against the engine's own target (a fresh process for a
/// stdio engine, the same URL for an HTTP one) and returns its JSON report.
async fn conformance(State(app): State<Arc<App>>, Path(engine): Path<String>) -> Response {
    let Some(e) = app.engine(&engine) else { return not_found(&engine) };
    let mut config = match &e.spec.transport {
        Transport::Stdio { command } => match command.split_first() {
            Some((program, args)) => rcp_conformance::Config::stdio(program.clone(), args.iter().cloned()),
            None => return (StatusCode::BAD_REQUEST, Json(json!({"error": "empty command"}))).into_response(),
        },
        Transport::Http { url } => {
            let mut c = rcp_conformance::Config::http(url.clone());
            c.tls = rcp_conformance::HttpTls {
                ca_cert: e.spec.tls.ca_cert.clone(),
                client_cert: e.spec.tls.client_cert.as_ref().map(|c| (c.cert.clone(), c.key.clone())),
            };
            if let Link::Http(_) = &e.link
                && let Ok(headers) = e.spec.http_headers()
            {
                for (k, v) in headers {
                    c = c.with_header(k, v);
                }
            }
            c
        }
    };
    if let Some(schema) = &app.schema {
        config = config.with_schema(schema.clone());
    }
    let schema = app.schema.as_ref().map(|p| p.display().to_string());
    // The suite runs on a runtime of its own so its futures need not be Send.
    let run = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
        match rt {
            Ok(rt) => rt.block_on(rcp_conformance::run(&config)).map_err(|e| e.to_string()),
            Err(e) => Err(format!("runtime: {e}")),
        }
    })
    .await;
    match run {
        Ok(Ok(report)) => {
            let mut v = report.to_json();
            v["text"] = json!(report.render_text());
            v["schema"] = json!(schema);
            Json(v).into_response()
        }
        Ok(Err(e)) => (StatusCode::BAD_GATEWAY, Json(json!({"error": e}))).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    }
}
