//! Scoped bearer tokens over real HTTP (§15.6, issue #42): a `read` token retrieves but its
//! `index/add` is `-32012` and stores nothing, and its `initialize` advertises no `index`; a
//! `write` token indexes; a token taken out of the file is refused once the file is re-read;
//! `/metrics` needs `admin`; a stateful session keeps the scopes it was opened with.

use std::sync::{Arc, Mutex};

use rcp_server::http::{AccessTokens, HttpOptions, SESSION_HEADER, SessionMode};
use rcp_server::{HandlerResult, Index, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_testkit::assert_valid_frame;
use rcp_wire::capabilities::{IndexCapability, RetrieveCapability};
use rcp_wire::index::{Document, IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

/// Stores what it is given; retrieves all of it.
#[derive(Default)]
struct Store {
    docs: Mutex<Vec<Document>>,
}

impl Store {
    fn count(&self) -> usize {
        self.docs.lock().expect("lock").len()
    }
}

impl Retrieve for Store {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let docs = self.docs.lock().expect("lock");
        Ok(RetrieveResult::from_hits(docs.iter().map(|d| Hit::new(d.id.clone().unwrap_or_default(), 1.0)).collect()))
    }
}

impl Index for Store {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let mut docs = self.docs.lock().expect("lock");
        let ids = params.documents.iter().map(|d| d.id.clone().unwrap_or_default()).collect();
        docs.extend(params.documents);
        Ok(IndexAddResult { ids, ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let mut docs = self.docs.lock().expect("lock");
        docs.retain(|d| !params.ids.contains(&d.id.clone().unwrap_or_default()));
        Ok(IndexDeleteResult::default())
    }
}

const TOKENS: &str = "\
# who may do what
read      reader-secret
read,write writer-secret
admin     scraper-secret
";

struct Running {
    base: String,
    ops: String,
    client: reqwest::Client,
    store: Arc<Store>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(tokens: AccessTokens, sessions: SessionMode) -> Running {
    let store = Arc::new(Store::default());
    let server = Server::builder("scoped", "0").retrieve(Arc::clone(&store)).index(Arc::clone(&store)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let opts = HttpOptions { tokens: Some(tokens), sessions, require_session: false, ..HttpOptions::default() };
    tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&server, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    Running {
        base: format!("http://{addr}/rcp"),
        ops: format!("http://{addr}"),
        client: rcp_testkit::http_client(),
        store,
        _stop: stop,
    }
}

impl Running {
    /// Calls `method` with `token` (and a session header when given); the JSON-RPC answer.
    async fn call(&self, token: &str, session: Option<&str>, method: &str, params: Value) -> (Value, Option<String>) {
        let mut req = self
            .client
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(s) = session {
            req = req.header(SESSION_HEADER, s);
        }
        let r = req.send().await.expect("send");
        assert_eq!(r.status(), 200, "{method}");
        let v: Value = r.json().await.expect("json");
        assert_valid_frame(&v);
        let session = v["result"]["_meta"]["session"].as_str().map(str::to_owned);
        (v, session)
    }

    async fn rpc(&self, token: &str, method: &str, params: Value) -> Value {
        self.call(token, None, method, params).await.0
    }
}

fn add(id: &str) -> Value {
    json!({"documents": [{"id": id, "text": "a document"}]})
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_reads_and_changes_nothing_and_a_write_token_indexes() {
    let s = start(AccessTokens::parse(TOKENS).expect("tokens"), SessionMode::Stateless).await;

    // What each token is offered.
    let read_init = s.rpc("reader-secret", "initialize", json!({"protocolVersion": 1})).await;
    let caps = &read_init["result"]["capabilities"];
    assert!(caps["retrieve"].is_object() && caps.get("index").is_none(), "{read_init}");
    let read_info = s.rpc("reader-secret", "info", json!({})).await;
    assert!(read_info["result"]["capabilities"].get("index").is_none(), "{read_info}");
    let write_init = s.rpc("writer-secret", "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(write_init["result"]["capabilities"]["index"]["writable"], true, "{write_init}");

    // A read token: index/add and index/delete are -32012 and nothing changes; retrieve works.
    assert_eq!(code(&s.rpc("writer-secret", "index/add", add("kept")).await), 0);
    assert_eq!(s.store.count(), 1);
    let refused = s.rpc("reader-secret", "index/add", add("intruder")).await;
    assert_eq!(code(&refused), -32012, "{refused}");
    let refused = s.rpc("reader-secret", "index/delete", json!({"ids": ["kept"]})).await;
    assert_eq!(code(&refused), -32012, "{refused}");
    assert_eq!(s.store.count(), 1, "a refused write stored or deleted something");
    let hits = s.rpc("reader-secret", "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(hits["result"]["hits"][0]["id"], "kept", "{hits}");

    // An admin-only token (a metrics scraper) may not read documents, but may read /metrics.
    assert_eq!(code(&s.rpc("scraper-secret", "retrieve", json!({"query": "q", "k": 5})).await), -32012);
    let metrics = |token: &'static str| s.client.get(format!("{}/metrics", s.ops)).bearer_auth(token).send();
    assert_eq!(metrics("scraper-secret").await.expect("send").status(), 200);
    assert_eq!(metrics("reader-secret").await.expect("send").status(), 403);
    assert_eq!(metrics("nobody").await.expect("send").status(), 401);

    // An unknown token is refused before anything else.
    assert_eq!(code(&s.rpc("nobody", "retrieve", json!({"query": "q", "k": 5})).await), -32012);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_taken_out_of_the_file_is_refused_after_a_reload() {
    let dir = tempfile_dir();
    let path = dir.join("tokens");
    std::fs::write(&path, TOKENS).expect("write");
    let tokens = AccessTokens::load(&path).expect("load");
    let s = start(tokens.clone(), SessionMode::Stateful { ttl: std::time::Duration::from_secs(60) }).await;

    // A stateful session opened with the writer token.
    let (init, session) = s.call("writer-secret", None, "initialize", json!({"protocolVersion": 1})).await;
    let session = session.unwrap_or_else(|| panic!("a session token: {init}"));
    let (v, _) = s.call("writer-secret", Some(&session), "index/add", add("one")).await;
    assert_eq!(code(&v), 0, "{v}");

    // The writer is narrowed to read: its live session, opened as read,write, is refused.
    std::fs::write(&path, TOKENS.replace("read,write writer-secret", "read writer-secret")).expect("write");
    assert_eq!(tokens.reload().expect("reload"), 3);
    let (v, _) = s.call("writer-secret", Some(&session), "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(code(&v), -32012, "{v}");
    assert_eq!(code(&s.rpc("writer-secret", "index/add", add("two")).await), -32012);
    assert_eq!(code(&s.rpc("writer-secret", "retrieve", json!({"query": "q", "k": 5})).await), 0);

    // The reader is taken out: refused on its next request.
    assert_eq!(code(&s.rpc("reader-secret", "retrieve", json!({"query": "q", "k": 5})).await), 0);
    std::fs::write(&path, "read writer-secret\n").expect("write");
    assert_eq!(tokens.reload().expect("reload"), 1);
    assert_eq!(code(&s.rpc("reader-secret", "retrieve", json!({"query": "q", "k": 5})).await), -32012);

    // A bad file changes nothing.
    std::fs::write(&path, "read writer-secret\nnot a line\n").expect("write");
    assert!(tokens.reload().is_err());
    assert_eq!(code(&s.rpc("writer-secret", "retrieve", json!({"query": "q", "k": 5})).await), 0);
    assert_eq!(s.store.count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rcp-scoped-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// A server that applies no collection grants never widens one: a tokens file limiting a token
/// to a collection refuses to start it, and one that limits a token after a reload makes that
/// token's requests `-32012` while the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_grant_is_refused_by_a_server_without_collections() {
    let server = Server::builder("plain", "0").retrieve(Arc::new(Store::default())).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let tokens = AccessTokens::parse("read@fruit fruit-secret\nread reader-secret\n").expect("tokens");
    let opts = HttpOptions { tokens: Some(tokens), ..HttpOptions::default() };
    let err = rcp_server::http::serve_on(&server, listener, opts, std::future::pending())
        .await
        .expect_err("a collection grant on a server without collections must not start");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("collection"), "{err}");

    let dir = tempfile_dir().join("collections");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tokens");
    std::fs::write(&path, TOKENS).expect("write");
    let tokens = AccessTokens::load(&path).expect("load");
    let s = start(tokens.clone(), SessionMode::Stateless).await;
    std::fs::write(&path, format!("{TOKENS}read@fruit fruit-secret\n")).expect("write");
    assert_eq!(tokens.reload().expect("reload"), 4);
    let refused = s.rpc("fruit-secret", "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(code(&refused), -32012, "{refused}");
    assert!(refused["error"]["data"]["detail"].as_str().is_some_and(|d| d.contains("collection")), "{refused}");
    assert_eq!(code(&s.rpc("reader-secret", "retrieve", json!({"query": "q", "k": 5})).await), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
