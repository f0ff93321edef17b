//! Seed 002 made observable: a test-only second revision added with
//! `ServerBuilder::revision`. A capability is live only if the negotiated revision permits it
//! and the server enables it; a stateless revision is served by any node without a session.

use rcp_server::http::{HttpOptions, SessionMode};
use rcp_server::{HandlerResult, RequestContext, Rerank, RerankRequest, Retrieve, RetrieveRequest, Revision, Server};
use rcp_testkit::assert_valid_frame;
use rcp_wire::capabilities::{Capability, RerankCapability, RetrieveCapability};
use rcp_wire::{ErrorCode, Hit, RetrieveResult};
use serde_json::{Value, json};

struct Docs;

impl Retrieve for Docs {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult::from_hits(vec![Hit::new("d1", 1.0)]))
    }
}

struct Flat;

impl Rerank for Flat {
    fn capability(&self) -> RerankCapability {
        RerankCapability { methods: vec!["cross-encoder".into()], ..Default::default() }
    }

    async fn rerank(&self, req: RerankRequest, _ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        Ok(vec![0.5; req.passages.len()])
    }
}

/// Revision 2 (test-only) permits `retrieve` and `embed`, not `rerank`.
fn revision_two() -> Revision {
    Revision::new(2, &[Capability::Retrieve, Capability::Embed])
}

/// A server enabling `retrieve` and `rerank` (never `embed`), speaking RCP/1 and `two`.
fn server(two: Revision) -> Server {
    Server::builder("rev", "0").retrieve(Docs).rerank(Flat).revision(two).build()
}

async fn call(conn: &rcp_server::transport::Connection, id: u32, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bytes = conn.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

fn code(v: &Value) -> Option<i64> {
    v["error"]["code"].as_i64()
}

const RETRIEVE: fn() -> Value = || json!({"query": "q", "k": 1});
const RERANK: fn() -> Value = || json!({"query": "q", "passages": ["a", "b"]});
const EMBED: fn() -> Value = || json!({"inputs": ["a"]});

#[tokio::test]
async fn a_capability_is_live_only_if_the_revision_permits_it_and_the_server_enables_it() {
    let server = server(revision_two());
    let conn = server.connect(|_| {});
    let init = call(&conn, 1, "initialize", json!({"protocolVersion": 2})).await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    let caps = &init["result"]["capabilities"];

    // Permitted and enabled: advertised and callable.
    assert!(caps.get("retrieve").is_some(), "{caps}");
    let ok = call(&conn, 2, "retrieve", RETRIEVE()).await;
    assert_eq!(ok["result"]["hits"][0]["id"], "d1", "{ok}");

    // Permitted, not enabled: absent, -32003.
    assert!(caps.get("embed").is_none(), "{caps}");
    assert_eq!(code(&call(&conn, 3, "embed", EMBED()).await), Some(ErrorCode::CAPABILITY_MISSING.0));

    // Enabled, not permitted: silently inactive (the server built without complaint).
    assert!(caps.get("rerank").is_none(), "{caps}");
    assert_eq!(code(&call(&conn, 4, "rerank", RERANK()).await), Some(ErrorCode::CAPABILITY_MISSING.0));
}

#[tokio::test]
async fn the_same_server_at_rcp1_serves_what_revision_two_hides() {
    let server = server(revision_two());
    let conn = server.connect(|_| {});
    let init = call(&conn, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert!(init["result"]["capabilities"].get("rerank").is_some(), "{init}");
    let scores = call(&conn, 2, "rerank", RERANK()).await;
    assert!(scores.get("result").is_some(), "{scores}");
    // Before initialize, `info` reports the latest revision's set.
    let info = call(&server.connect(|_| {}), 1, "info", json!({})).await;
    assert_eq!(info["result"]["protocolVersion"], 2, "{info}");
    assert!(info["result"]["capabilities"].get("rerank").is_none(), "{info}");
}

/// One HTTP node in stateful mode that refuses session-less requests, on an ephemeral port.
async fn node(server: Server) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let opts = HttpOptions {
        sessions: SessionMode::Stateful { ttl: std::time::Duration::from_secs(60) },
        require_session: true,
        ..HttpOptions::default()
    };
    tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&server, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    (format!("http://{addr}/rcp"), stop)
}

async fn post(client: &reqwest::Client, base: &str, id: u32, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let r = client.post(base).json(&frame).send().await.expect("send");
    let v: Value = r.json().await.expect("json");
    assert_valid_frame(&v);
    v
}

/// Initializes at `version` on node `a`, then retrieves on node `b` with no session token.
async fn across_two_nodes(two: Revision, version: u32) -> (Value, Value) {
    let (a, _stop_a) = node(server(two)).await;
    let (b, _stop_b) = node(server(two)).await;
    let client = rcp_testkit::http_client();
    let init = post(&client, &a, 1, "initialize", json!({"protocolVersion": version})).await;
    let answer = post(&client, &b, 2, "retrieve", RETRIEVE()).await;
    (init, answer)
}

#[tokio::test]
async fn a_stateless_revision_is_served_by_any_node_without_a_session() {
    let (init, answer) = across_two_nodes(revision_two().stateless(), 2).await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    assert!(init["result"]["_meta"].get("session").is_none(), "no token is issued: {init}");
    assert_eq!(answer["result"]["hits"][0]["id"], "d1", "{answer}");
}

#[tokio::test]
async fn a_stateful_revision_still_needs_its_session() {
    let (init, answer) = across_two_nodes(revision_two(), 2).await;
    assert!(init["result"]["_meta"]["session"].is_string(), "{init}");
    assert_eq!(code(&answer), Some(ErrorCode::NOT_INITIALIZED.0), "{answer}");
}
