//! Durable feedback through the protocol: a quarantined hit leaves later `retrieve` results but
//! not one already running; bad signals are `-32602`; a restart keeps the quarantine.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rcp_server::feedback::{FeedbackOptions, FeedbackStore};
use rcp_server::transport::Connection;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{ErrorCode, Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Two hits; a query of "wait" holds the answer until `gate` is notified.
#[derive(Default)]
struct Two {
    gate: Notify,
}

impl Retrieve for Two {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        if req.query.text() == "wait" {
            self.gate.notified().await;
        }
        ctx.progress_partial(0.5, "retrieve", vec![Hit::new("bad", 2.0), Hit::new("good", 1.0)]);
        Ok(RetrieveResult::from_hits(vec![Hit::new("bad", 2.0), Hit::new("good", 1.0)]))
    }
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let p = std::env::temp_dir().join(format!("rcp-feedback-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    Dir(p)
}

/// Progress frames a connection sent.
type Sent = Arc<Mutex<Vec<Value>>>;

fn serve_watched(dir: &Dir, engine: Arc<Two>, sent: Sent) -> Connection {
    let options = FeedbackOptions { threshold: 2, ..FeedbackOptions::default() };
    let store = Arc::new(FeedbackStore::open(&dir.0, options).expect("opens"));
    let server = Server::builder("fb", "0").retrieve(engine).streaming().durable_feedback(store).build();
    server.connect(move |frame| {
        if let Ok(v) = serde_json::from_slice(&frame) {
            sent.lock().expect("lock").push(v);
        }
    })
}

fn serve(dir: &Dir, engine: Arc<Two>) -> Connection {
    serve_watched(dir, engine, Sent::default())
}

async fn call(conn: &Connection, id: u32, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bytes = conn.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

async fn ready(conn: &Connection) {
    let init = call(conn, 0, "initialize", json!({"protocolVersion": 1})).await;
    assert!(init["result"]["capabilities"].get("feedback").is_some(), "{init}");
}

fn hit_ids(v: &Value) -> Vec<String> {
    v["result"]["hits"]
        .as_array()
        .map_or_else(Vec::new, |h| h.iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect())
}

fn poison(id: &str) -> Value {
    json!({"hitId": id, "poisonSuspected": true})
}

#[tokio::test]
async fn quarantine_leaves_later_results_but_never_a_running_retrieve() {
    let dir = dir("quarantine");
    let engine = Arc::new(Two::default());
    let conn = serve(&dir, Arc::clone(&engine));
    ready(&conn).await;
    let running = conn.handle(
        json!({"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"wait","k":5}}).to_string().as_bytes(),
    );
    let fb =
        call(&conn, 2, "feedback", json!({"signals": [poison("bad"), poison("bad"), {"hitId": "good", "used": true}]}))
            .await;
    assert_eq!(fb["result"]["accepted"], 3, "{fb}");
    engine.gate.notify_one();
    let concurrent: Value = serde_json::from_slice(&running.await.expect("answer")).expect("json");
    assert_eq!(
        hit_ids(&concurrent),
        ["bad", "good"],
        "a retrieve running when feedback arrived is unaltered: {concurrent}"
    );
    let later = call(&conn, 3, "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(hit_ids(&later), ["good"], "{later}");

    // A restart keeps it.
    drop(conn);
    let conn = serve(&dir, Arc::new(Two::default()));
    ready(&conn).await;
    let after = call(&conn, 4, "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(hit_ids(&after), ["good"], "{after}");
}

#[tokio::test]
async fn bad_signals_are_invalid_params() {
    let dir = dir("bad");
    let conn = serve(&dir, Arc::new(Two::default()));
    ready(&conn).await;
    let cases = [
        json!({"signals": [{"used": true}]}),
        json!({"signals": [{"hitId": "d", "reward": 3}]}),
        json!({"signals": [{"hitId": ""}]}),
        json!({"signals": [{"hitId": "x".repeat(600)}]}),
        json!({"signals": vec![json!({"hitId": "d"}); 300]}),
        json!({"signals": "d"}),
    ];
    for (i, params) in cases.into_iter().enumerate() {
        let answer = call(&conn, 10 + i as u32, "feedback", params).await;
        assert_eq!(answer["error"]["code"].as_i64(), Some(ErrorCode::INVALID_PARAMS.0), "case {i}: {answer}");
    }
    let none = FeedbackStore::list(&dir.0).expect("lists");
    assert!(none.is_empty());
}

#[tokio::test]
async fn partial_hits_of_a_later_retrieve_leave_quarantined_hits_out_too() {
    let dir = dir("partial");
    let sent = Sent::default();
    let conn = serve_watched(&dir, Arc::new(Two::default()), Arc::clone(&sent));
    ready(&conn).await;
    let fb = call(&conn, 1, "feedback", json!({"signals": [poison("bad"), poison("bad")]})).await;
    assert_eq!(fb["result"]["accepted"], 2, "{fb}");
    let answer = call(&conn, 2, "retrieve", json!({"query": "q", "k": 5, "_meta": {"progressToken": "p"}})).await;
    assert_eq!(hit_ids(&answer), ["good"], "{answer}");
    let partial: Vec<Value> =
        sent.lock().expect("lock").iter().map(|f| f["params"]["partial"]["hits"].clone()).collect();
    assert!(partial.iter().any(|h| h.is_array()), "a partial frame was sent: {partial:?}");
    assert!(partial.iter().all(|h| !h.to_string().contains("\"bad\"")), "{partial:?}");
}
