//! The `session` feature (§7.7.3) through the public API: `retrieve` calls that share a
//! `sessionId` never return a hit twice, an absent or unknown session changes nothing, the
//! number of sessions is bounded (least recently used evicted), and a server that did not
//! switch the feature on ignores `sessionId`; `graph` hits follow the same rule, and the hits a
//! `feedback` call of the trajectory signals count as returned.

use std::time::Duration;

use rcp_server::transport::Connection;
use rcp_server::{Feedback, Graph, HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, SessionOptions};
use rcp_wire::capabilities::{GraphCapability, RetrieveCapability};
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

/// Twenty documents `d0`..`d19` ranked in that order for every query; honours `k`.
struct Ranked;

impl Retrieve for Ranked {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(50), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let hits = (0..20usize.min(req.k)).map(|i| Hit::new(format!("d{i}").as_str(), 20.0 - i as f64)).collect();
        Ok(RetrieveResult::from_hits(hits))
    }
}

/// Like [`Ranked`], in reverse order for the query "rev", and every page says there is a next
/// one.
struct Paged;

impl Retrieve for Paged {
    fn capability(&self) -> RetrieveCapability {
        Ranked.capability()
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let reverse = req.query.text() == "rev";
        let mut res = Ranked.retrieve(req, ctx).await?;
        if reverse {
            for (i, h) in res.hits.iter_mut().enumerate() {
                *h = Hit::new(format!("d{}", 19 - i).as_str(), h.score);
            }
        }
        res.next_cursor = Some("next".into());
        Ok(res)
    }
}

fn server(session: Option<SessionOptions>) -> Server {
    let b = Server::builder("ranked", "0").retrieve(Ranked);
    match session {
        Some(o) => b.session(o).build(),
        None => b.build(),
    }
}

async fn call(c: &Connection, id: u64, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

async fn connect(s: &Server) -> Connection {
    let c = s.connect(|_| {});
    let init = call(&c, 0, "initialize", json!({"protocolVersion": 1})).await;
    assert!(init.get("result").is_some(), "{init}");
    c
}

/// The ids of `retrieve(query, k=3)` in `session` (none: no `sessionId`).
async fn step(c: &Connection, id: u64, session: Option<&str>) -> Vec<String> {
    let mut params = json!({"query": "q", "k": 3});
    if let Some(s) = session {
        params["sessionId"] = json!(s);
    }
    let r = call(c, id, "retrieve", params).await;
    let hits = r["result"]["hits"].as_array().unwrap_or_else(|| panic!("hits: {r}"));
    hits.iter().map(|h| h["id"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test]
async fn a_three_step_loop_returns_only_new_documents_each_step() {
    let s = server(Some(SessionOptions::default()));
    let c = connect(&s).await;
    let caps = call(&c, 1, "info", json!({})).await;
    assert_eq!(caps["result"]["capabilities"]["session"], json!({"dedup": true, "ttlSeconds": 600}));
    assert_eq!(step(&c, 2, Some("trajectory-1")).await, ["d0", "d1", "d2"]);
    assert_eq!(step(&c, 3, Some("trajectory-1")).await, ["d3", "d4", "d5"]);
    assert_eq!(step(&c, 4, Some("trajectory-1")).await, ["d6", "d7", "d8"]);
    // Another trajectory, on another connection, starts from the top.
    let other = connect(&s).await;
    assert_eq!(step(&other, 5, Some("trajectory-2")).await, ["d0", "d1", "d2"]);
    // The same trajectory is reachable from any connection (stateless HTTP clients).
    assert_eq!(step(&other, 6, Some("trajectory-1")).await, ["d9", "d10", "d11"]);
}

#[tokio::test]
async fn an_absent_or_unknown_session_never_changes_the_answer() {
    let s = server(Some(SessionOptions::default()));
    let c = connect(&s).await;
    let plain = step(&c, 1, None).await;
    assert_eq!(plain, ["d0", "d1", "d2"]);
    assert_eq!(step(&c, 2, Some("never-seen")).await, plain);
    assert_eq!(step(&c, 3, None).await, plain, "calls without a session are not recorded");
}

#[tokio::test]
async fn sessions_are_bounded_least_recently_used_evicted() {
    let s = server(Some(SessionOptions { max_sessions: 2, ..SessionOptions::default() }));
    let c = connect(&s).await;
    step(&c, 1, Some("a")).await;
    step(&c, 2, Some("b")).await;
    step(&c, 3, Some("a")).await; // "b" is now the least recently used
    step(&c, 4, Some("c")).await; // evicts "b"
    assert_eq!(step(&c, 5, Some("b")).await, ["d0", "d1", "d2"], "an evicted session starts afresh");
    assert_eq!(step(&c, 6, Some("c")).await, ["d3", "d4", "d5"], "a held session still dedups");
}

#[tokio::test]
async fn idle_sessions_expire() {
    let s = server(Some(SessionOptions { ttl: Duration::from_millis(50), ..SessionOptions::default() }));
    let c = connect(&s).await;
    step(&c, 1, Some("t")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(step(&c, 2, Some("t")).await, ["d0", "d1", "d2"]);
}

#[tokio::test]
async fn a_server_without_sessions_ignores_session_ids() {
    let s = server(None);
    let c = connect(&s).await;
    let caps = call(&c, 1, "info", json!({})).await;
    assert!(caps["result"]["capabilities"].get("session").is_none(), "{caps}");
    assert_eq!(step(&c, 2, Some("t")).await, ["d0", "d1", "d2"]);
    assert_eq!(step(&c, 3, Some("t")).await, ["d0", "d1", "d2"]);
}

#[tokio::test]
async fn dedup_never_returns_more_than_k_and_notes_what_it_left_out() {
    let s = server(Some(SessionOptions::default()));
    let c = connect(&s).await;
    step(&c, 1, Some("t")).await;
    let r = call(&c, 2, "retrieve", json!({"query": "q", "k": 3, "sessionId": "t"})).await;
    assert_eq!(r["result"]["hits"].as_array().map(Vec::len), Some(3), "{r}");
    let notes = r["result"]["usage"]["notes"].to_string();
    assert!(notes.contains("3 hits already returned"), "{notes}");
}

#[tokio::test]
async fn a_cursor_that_would_skip_cut_hits_is_withheld() {
    let s = Server::builder("paged", "0").retrieve(Paged).session(SessionOptions::default()).build();
    let c = connect(&s).await;
    let first = call(&c, 1, "retrieve", json!({"query": "q", "k": 3, "sessionId": "t"})).await;
    assert_eq!(first["result"]["nextCursor"], "next", "nothing widened on a first step: {first}");
    // d0..d2 seen: the engine is asked for 6, d0..d2 are left out, nothing is cut.
    let second = call(&c, 2, "retrieve", json!({"query": "q", "k": 3, "sessionId": "t"})).await;
    assert_eq!(second["result"]["nextCursor"], "next", "{second}");
    // Another query: asked for 3 + 6 seen, none of them among its top 9, so 6 are cut and the
    // engine's cursor (after rank 9) would skip them.
    let r = call(&c, 3, "retrieve", json!({"query": "rev", "k": 3, "sessionId": "t"})).await;
    let ids: Vec<&str> =
        r["result"]["hits"].as_array().into_iter().flatten().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids, ["d19", "d18", "d17"], "{r}");
    assert!(r["result"].get("nextCursor").is_none(), "{r}");
    assert!(r["result"]["usage"]["notes"].to_string().contains("nextCursor withheld"), "{r}");
    // Without a session the engine's cursor is passed on as always.
    let plain = call(&c, 4, "retrieve", json!({"query": "rev", "k": 3})).await;
    assert_eq!(plain["result"]["nextCursor"], "next", "{plain}");
}

/// A tiny graph: `local` and `drift` return the nodes `d0`..`d19` in that order (honouring `k`,
/// 10 when absent); `drift` adds a follow-up question.
struct Chain;

impl Graph for Chain {
    fn capability(&self) -> GraphCapability {
        GraphCapability { ops: vec!["local".into(), "drift".into(), "neighbors".into()], ..Default::default() }
    }

    async fn graph(&self, p: GraphParams, _ctx: RequestContext) -> HandlerResult<GraphResult> {
        let k = p.k.map_or(10, |k| k.min(20) as usize);
        let hits = (0..k).map(|i| Hit::new(format!("d{i}").as_str(), 20.0 - i as f64)).collect();
        let followups = (p.op == "drift").then(|| vec!["what next?".to_owned()]);
        Ok(GraphResult { hits: Some(hits), followups, ..Default::default() })
    }
}

/// A `feedback` handler that accepts every signal.
struct Accept;

impl Feedback for Accept {
    async fn feedback(&self, p: FeedbackParams, _ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        Ok(FeedbackResult { accepted: p.signals.len() as u64, ..Default::default() })
    }
}

fn graph_server() -> Server {
    Server::builder("graph", "0")
        .retrieve(Ranked)
        .graph(Chain)
        .feedback(Accept)
        .session(SessionOptions::default())
        .build()
}

fn hit_ids(r: &Value) -> Vec<String> {
    let hits = r["result"]["hits"].as_array().unwrap_or_else(|| panic!("hits: {r}"));
    hits.iter().map(|h| h["id"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test]
async fn graph_hits_follow_the_same_dedup_as_retrieve_in_one_trajectory() {
    let s = graph_server();
    let c = connect(&s).await;
    assert_eq!(step(&c, 1, Some("t")).await, ["d0", "d1", "d2"]);
    let local = call(&c, 2, "graph", json!({"op": "local", "query": "q", "k": 3, "sessionId": "t"})).await;
    assert_eq!(hit_ids(&local), ["d3", "d4", "d5"], "hits retrieve returned are left out of graph: {local}");
    assert!(local["result"]["usage"]["notes"].to_string().contains("3 hits already returned"), "{local}");
    let drift = call(&c, 3, "graph", json!({"op": "drift", "query": "q", "k": 2, "sessionId": "t"})).await;
    assert_eq!(hit_ids(&drift), ["d6", "d7"], "{drift}");
    assert_eq!(drift["result"]["followups"], json!(["what next?"]));
    assert_eq!(step(&c, 4, Some("t")).await, ["d8", "d9", "d10"], "and graph hits are left out of retrieve");
    // Without `k` the engine's own count is kept, minus what the trajectory has seen.
    let open = call(&c, 5, "graph", json!({"op": "local", "query": "q", "sessionId": "t"})).await;
    assert!(hit_ids(&open).is_empty(), "d0..d10 seen, the engine's default 10 all seen: {open}");
    // Another trajectory, and no trajectory, see the plain answer.
    let other = call(&c, 6, "graph", json!({"op": "local", "query": "q", "k": 3, "sessionId": "u"})).await;
    assert_eq!(hit_ids(&other), ["d0", "d1", "d2"]);
    let plain = call(&c, 7, "graph", json!({"op": "local", "query": "q", "k": 3})).await;
    assert_eq!(hit_ids(&plain), ["d0", "d1", "d2"]);
}

#[tokio::test]
async fn feedback_in_a_trajectory_counts_its_hits_as_returned() {
    let s = graph_server();
    let c = connect(&s).await;
    let signals = json!([{"hitId": "d0", "used": true}, {"hitId": "d2", "helpful": false}]);
    let fb = call(&c, 1, "feedback", json!({"sessionId": "t", "signals": signals})).await;
    assert_eq!(fb["result"]["accepted"], 2, "{fb}");
    assert_eq!(step(&c, 2, Some("t")).await, ["d1", "d3", "d4"], "the signalled hits are left out");
    // Feedback outside the trajectory, or without a session, changes nothing.
    call(&c, 3, "feedback", json!({"signals": [{"hitId": "d5"}]})).await;
    assert_eq!(step(&c, 4, Some("t")).await, ["d5", "d6", "d7"]);
    assert_eq!(step(&c, 5, Some("u")).await, ["d0", "d1", "d2"]);
    // A refused feedback call records nothing.
    let bad = call(&c, 6, "feedback", json!({"sessionId": "v", "signals": [{"hitId": "d0", "reward": 7}]})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(step(&c, 7, Some("v")).await, ["d0", "d1", "d2"]);
}
