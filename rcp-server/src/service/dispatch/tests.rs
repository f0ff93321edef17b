//! The dispatcher in process: frames in, frames out, over [`super::process`].

use std::sync::Arc;
use std::time::Duration;

use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{ErrorCode, Hit, RetrieveResult};
use serde_json::{Value, json};

use super::{Processed, process};
use crate::handler::context::RequestContext;
use crate::handler::{HandlerResult, Retrieve, RetrieveRequest};
use crate::server::Server;
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// Answers `"slow"` queries only when cancelled; every other query with more hits than asked,
/// a duplicate id and a NaN score, for the framework to fix.
struct Engine;

impl Retrieve for Engine {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        if req.query.text() == "slow" {
            ctx.cancellation().cancelled().await;
        }
        let hits = vec![Hit::new("a", f64::NAN), Hit::new("a", 2.0), Hit::new("b", 1.0), Hit::new("c", 0.5)];
        Ok(RetrieveResult::from_hits(hits))
    }
}

fn server() -> Server {
    Server::builder("test", "0").retrieve(Engine).build()
}

fn send(server: &Server, session: &Arc<Session>, frame: Value) -> Processed {
    process(server.dispatcher(), session, frame.to_string().as_bytes(), &Outbound::discard())
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// The answer of a frame, awaiting it if it is pending.
async fn answer(server: &Server, session: &Arc<Session>, frame: Value) -> Value {
    match send(server, session, frame) {
        Processed::Nothing => Value::Null,
        Processed::Ready(b) | Processed::Shutdown(b) => parse(&b),
        Processed::Pending(f) => f.await.map_or(Value::Null, |b| parse(&b)),
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or_default()
}

async fn initialized(server: &Server) -> Arc<Session> {
    let session = Arc::new(Session::new());
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}});
    let v = answer(server, &session, init).await;
    assert!(v["result"]["capabilities"]["retrieve"].is_object(), "{v}");
    session
}

fn retrieve(id: Value, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":text,"k":2}})
}

#[tokio::test]
async fn lifecycle_methods_answer_before_initialize_and_others_do_not() {
    let s = server();
    let session = Arc::new(Session::new());
    let ping = answer(&s, &session, json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{"nonce":"n"}})).await;
    assert_eq!(ping, json!({"jsonrpc":"2.0","id":1,"result":{"nonce":"n"}}));
    let info = answer(&s, &session, json!({"jsonrpc":"2.0","id":2,"method":"info"})).await;
    assert!(info["result"]["capabilities"]["retrieve"].is_object(), "{info}");
    let early = answer(&s, &session, retrieve(json!(3), "q")).await;
    assert_eq!(code(&early), ErrorCode::NOT_INITIALIZED.0, "{early}");
    assert_eq!(early["id"], 3);
}

#[tokio::test]
async fn initialize_negotiates_once() {
    let s = server();
    let session = initialized(&s).await;
    let again =
        answer(&s, &session, json!({"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1}}))
            .await;
    assert_eq!(code(&again), ErrorCode::INVALID_REQUEST.0, "{again}");
    let low = answer(
        &s,
        &Arc::new(Session::new()),
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":0}}),
    )
    .await;
    assert_eq!(code(&low), ErrorCode::VERSION_MISMATCH.0, "{low}");
}

#[tokio::test]
async fn gating_distinguishes_unknown_and_unadvertised_methods() {
    let s = server();
    let session = initialized(&s).await;
    let unknown = answer(&s, &session, json!({"jsonrpc":"2.0","id":1,"method":"nope"})).await;
    assert_eq!(code(&unknown), ErrorCode::UNKNOWN_METHOD.0, "{unknown}");
    let missing = answer(&s, &session, json!({"jsonrpc":"2.0","id":2,"method":"embed","params":{"texts":[]}})).await;
    assert_eq!(code(&missing), ErrorCode::CAPABILITY_MISSING.0, "{missing}");
    let notification = answer(&s, &session, json!({"jsonrpc":"2.0","id":3,"method":"notifications/cancel"})).await;
    assert_eq!(code(&notification), ErrorCode::INVALID_REQUEST.0, "{notification}");
}

#[tokio::test]
async fn retrieve_results_are_finished_by_the_framework() {
    let s = server();
    let session = initialized(&s).await;
    let v = answer(&s, &session, retrieve(json!("r"), "q")).await;
    assert_eq!(v["id"], "r");
    let ids: Vec<&str> =
        v["result"]["hits"].as_array().into_iter().flatten().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids, ["a", "b"], "{v}");
    assert!(v["result"]["hits"][0]["score"].is_number(), "{v}");
    let bad =
        answer(&s, &session, json!({"jsonrpc":"2.0","id":4,"method":"retrieve","params":{"query":"q","k":0}})).await;
    assert_eq!(code(&bad), ErrorCode::INVALID_PARAMS.0, "{bad}");
    assert_eq!(bad["error"]["data"]["field"], "k", "{bad}");
}

#[tokio::test]
async fn a_duplicate_in_flight_id_is_answered_uncorrelated_and_cancel_frees_it() {
    let s = server();
    let session = initialized(&s).await;
    let Processed::Pending(first) = send(&s, &session, retrieve(json!(7), "slow")) else {
        panic!("a retrieve is answered asynchronously")
    };
    let Processed::Ready(dup) = send(&s, &session, retrieve(json!(7), "q")) else {
        panic!("a duplicate is refused at once")
    };
    let dup = parse(&dup);
    assert_eq!(dup["id"], Value::Null, "{dup}");
    assert_eq!(code(&dup), ErrorCode::INVALID_REQUEST.0, "{dup}");
    let first = tokio::spawn(first);
    let cancel = send(&s, &session, json!({"jsonrpc":"2.0","method":"notifications/cancel","params":{"id":7}}));
    assert!(matches!(cancel, Processed::Nothing));
    let done = tokio::time::timeout(Duration::from_secs(5), first).await;
    let first = done.ok().and_then(Result::ok).flatten().map_or(Value::Null, |b| parse(&b));
    assert_eq!(first["id"], 7, "{first}");
    assert_eq!(code(&first), ErrorCode::CANCELLED.0, "{first}");
    // The id is free again once answered.
    let again = answer(&s, &session, retrieve(json!(7), "q")).await;
    assert!(again["result"].is_object(), "{again}");
}

#[tokio::test]
async fn batches_answer_every_request_in_one_frame() {
    let s = server();
    let session = initialized(&s).await;
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/whatever"},
        retrieve(json!(2), "q"),
    ]);
    let v = answer(&s, &session, batch).await;
    let ids: Vec<i64> = v.as_array().into_iter().flatten().filter_map(|m| m["id"].as_i64()).collect();
    assert_eq!(ids, [1, 2], "{v}");
    let empty = answer(&s, &session, json!([])).await;
    assert_eq!(code(&empty), ErrorCode::INVALID_REQUEST.0, "{empty}");
    let only_notifications = send(&s, &session, json!([{"jsonrpc":"2.0","method":"notifications/x"}]));
    assert!(matches!(only_notifications, Processed::Nothing));
}

#[tokio::test]
async fn malformed_frames_and_stray_responses() {
    let s = server();
    let session = Arc::new(Session::new());
    let Processed::Ready(b) = process(s.dispatcher(), &session, b"{\"jsonrpc\":", &Outbound::discard()) else {
        panic!("a parse error is answered")
    };
    assert_eq!(code(&parse(&b)), ErrorCode::PARSE_ERROR.0);
    let Processed::Ready(b) = process(s.dispatcher(), &session, b"42", &Outbound::discard()) else {
        panic!("not an object")
    };
    assert_eq!(code(&parse(&b)), ErrorCode::INVALID_REQUEST.0);
    let response = send(&s, &session, json!({"jsonrpc":"2.0","id":1,"result":{}}));
    assert!(matches!(response, Processed::Nothing));
    let no_method = answer(&s, &session, json!({"jsonrpc":"2.0","id":1})).await;
    assert_eq!(code(&no_method), ErrorCode::INVALID_REQUEST.0);
    assert_eq!(no_method["id"], 1);
}

#[tokio::test]
async fn shutdown_is_answered_after_the_drain() {
    let s = server();
    let session = initialized(&s).await;
    let p = send(&s, &session, json!({"jsonrpc":"2.0","id":5,"method":"shutdown"}));
    let Processed::Shutdown(b) = p else { panic!("shutdown is its own outcome") };
    assert_eq!(parse(&b), json!({"jsonrpc":"2.0","id":5,"result":{}}));
    assert!(session.is_shutting_down());
}

/// Counts handler calls, to show a request was refused before reaching the engine.
#[derive(Default)]
struct Counting {
    calls: std::sync::atomic::AtomicUsize,
}

impl Retrieve for Counting {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

fn with_deadline(id: i64, deadline: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":"q","k":1,"_meta":{"deadlineMs":deadline}}})
}

#[tokio::test]
async fn a_malformed_deadline_is_invalid_params_and_zero_is_already_expired() {
    let engine = Arc::new(Counting::default());
    let s = Server::builder("test", "0").retrieve(Arc::clone(&engine)).build();
    let session = initialized(&s).await;
    let two_63: Value = serde_json::from_str("9223372036854775808").unwrap_or(Value::Null);
    for (id, bad) in [json!(-1), json!("5"), json!(0.5), json!(true), two_63, json!(1e300)].into_iter().enumerate() {
        let v = answer(&s, &session, with_deadline(id as i64 + 1, bad.clone())).await;
        assert_eq!(code(&v), ErrorCode::INVALID_PARAMS.0, "{bad}: {v}");
        assert_eq!(v["error"]["data"]["field"], "_meta.deadlineMs", "{bad}: {v}");
    }
    for id in 10..13 {
        let v = answer(&s, &session, with_deadline(id, json!(0))).await;
        assert_eq!(code(&v), ErrorCode::TIMEOUT.0, "deadlineMs 0: {v}");
    }
    assert_eq!(engine.calls.load(std::sync::atomic::Ordering::SeqCst), 0, "no handler ran");
    let v = answer(&s, &session, with_deadline(20, json!(5_000))).await;
    assert!(v["result"]["hits"].is_array(), "{v}");
    assert_eq!(engine.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
