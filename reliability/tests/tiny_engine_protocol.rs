//! The framework's protocol rules (§4–§13), driven over real stdio pipes against the tiny
//! example engine. Every frame the server writes is validated against the JSON Schema.

use std::time::{Duration, Instant};

use rcp_testkit::{Engine, code};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(300);

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// ---- lifecycle (§7.1, §13, §14.1) ----

#[test]
fn info_and_ping_work_before_initialize_and_ping_echoes_nonce() {
    let mut e = Engine::example("tiny_engine");
    let info = e.ok("info", json!({}));
    assert_eq!(info["server"]["name"], "tiny-engine");
    assert!(info["capabilities"]["retrieve"].is_object());
    assert_eq!(info["_meta"]["conformance"], "L2");
    assert_eq!(e.ok("ping", json!({"nonce": "abc"})), json!({"nonce": "abc"}));
    assert_eq!(e.ok("ping", json!({"nonce": 17})), json!({"nonce": 17}));
    assert_eq!(e.ok("ping", json!({})), json!({}));
    let err = e.err("ping", json!({"nonce": {"x": 1}}));
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "nonce");
}

#[test]
fn requests_before_initialize_are_rejected_with_not_initialized() {
    let mut e = Engine::example("tiny_engine");
    assert_eq!(code(&e.err("retrieve", json!({"query": "rust", "k": 1}))), -32001);
    assert_eq!(code(&e.err("index/delete", json!({"ids": ["a"]}))), -32001);
}

#[test]
fn failed_initialize_leaves_the_session_locked_and_can_be_retried() {
    let mut e = Engine::example("tiny_engine");
    let err = e.err("initialize", json!({"protocolVersion": 0}));
    assert_eq!(code(&err), -32002);
    assert_eq!(code(&e.err("retrieve", json!({"query": "rust", "k": 1}))), -32001);
    let err = e.err("initialize", json!({"client": {"name": "x"}}));
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "protocolVersion");
    let res = e.ok("initialize", json!({"protocolVersion": 1}));
    assert_eq!(res["protocolVersion"], 1);
    assert!(e.ok("retrieve", json!({"query": "rust", "k": 1}))["hits"].is_array());
}

#[test]
fn version_negotiation_is_the_minimum_and_repeat_initialize_is_rejected() {
    let mut e = Engine::example("tiny_engine");
    let res = e.ok("initialize", json!({"protocolVersion": 9, "capabilities": {"x-future": {}}}));
    assert_eq!(res["protocolVersion"], 1);
    let err = e.err("initialize", json!({"protocolVersion": 1}));
    assert_eq!(code(&err), -32600);
    // info after initialize reports exactly the session's set.
    assert_eq!(e.ok("info", json!({}))["capabilities"], res["capabilities"]);
}

#[test]
fn capability_gating_prefers_unknown_method_over_capability_missing() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    assert_eq!(code(&e.err("embed", json!({"inputs": ["x"]}))), -32003);
    assert_eq!(code(&e.err("rerank", json!({"query": "q", "passages": ["a"]}))), -32003);
    assert_eq!(code(&e.err("graph", json!({"op": "local"}))), -32003);
    assert_eq!(code(&e.err("frobnicate", json!({}))), -32004);
    assert_eq!(code(&e.err("x-acme/thing", json!({}))), -32004);
    let err = e.err("notifications/cancel", json!({"id": 1}));
    assert_eq!(code(&err), -32600, "a notification method sent with an id is not a request");
}

// ---- envelope, ids, notifications, batches (§4, §5.3, §11) ----

#[test]
fn ids_are_echoed_with_the_same_json_type_and_value() {
    let mut e = Engine::example("tiny_engine");
    for id in [json!("str-id-1"), json!(7), json!(-3), json!(0), json!(1.5), json!(9007199254740991i64), json!("")] {
        e.send(&req(id.clone(), "ping", json!({})));
        let r = e.recv_response(T).expect("answer");
        assert_eq!(r["id"], id);
        assert_eq!(r["id"].is_string(), id.is_string());
        assert_eq!(r["jsonrpc"], "2.0");
    }
}

#[test]
fn notifications_are_never_answered() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&json!({"jsonrpc": "2.0", "method": "retrieve", "params": {"query": "rust", "k": 1}}));
    e.send(&json!({"jsonrpc": "2.0", "method": "embed", "params": {"inputs": ["x"]}}));
    e.send(&json!({"jsonrpc": "2.0", "method": "ping", "params": {}}));
    e.send(&json!({"jsonrpc": "2.0", "method": "no/such/method"}));
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 424242}}));
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}}));
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": "bad"}));
    e.send(&json!({"jsonrpc": "1.0", "method": "ping"}));
    e.expect_silence(QUIET);
    assert_eq!(e.ok("ping", json!({"nonce": 1})), json!({"nonce": 1}));
}

#[test]
fn malformed_frames_get_precise_errors_and_the_server_stays_up() {
    let mut e = Engine::example("tiny_engine");
    e.send_raw("{not json");
    let r = e.recv_response(T).unwrap();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(code(&r["error"]), -32700);

    e.send_raw(r#"{"jsonrpc":"2.0","id":5}"#);
    let r = e.recv_response(T).unwrap();
    assert_eq!((r["id"].clone(), code(&r["error"])), (json!(5), -32600));

    e.send_raw(r#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#);
    let r = e.recv_response(T).unwrap();
    assert_eq!((r["id"].clone(), code(&r["error"])), (json!(6), -32600));

    e.send_raw(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    let r = e.recv_response(T).unwrap();
    assert_eq!((r["id"].clone(), code(&r["error"])), (Value::Null, -32600));

    e.send_raw(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#);
    assert_eq!(code(&e.recv_response(T).unwrap()["error"]), -32600);

    e.send_raw(r#"{"jsonrpc":"2.0","id":8,"method":"ping","params":[1,2]}"#);
    let r = e.recv_response(T).unwrap();
    assert_eq!(code(&r["error"]), -32602);
    assert_eq!(r["error"]["data"]["field"], "params");

    e.send_raw("42");
    assert_eq!(code(&e.recv_response(T).unwrap()["error"]), -32600);

    // Invalid UTF-8 inside a string.
    e.send_raw(&String::from_utf8_lossy(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}"));
    assert_eq!(e.recv_response(T).unwrap()["id"], 9);
}

#[test]
fn blank_lines_are_ignored_and_compact_envelope_is_accepted() {
    let mut e = Engine::example("tiny_engine");
    e.send_raw("");
    e.send_raw("   ");
    e.send_raw(r#"{"id":"c1","method":"ping","params":{"nonce":"n"}}"#);
    let r = e.recv_response(T).unwrap();
    assert_eq!(r["id"], "c1");
    assert_eq!(r["result"]["nonce"], "n");
}

#[test]
fn a_100kb_garbage_line_is_answered_and_the_next_request_still_is() {
    let mut e = Engine::example("tiny_engine");
    let garbage = "x".repeat(100 * 1024);
    e.send_raw(&garbage);
    e.send(&req(json!("after"), "ping", json!({})));
    let r = e.recv_response(T).unwrap();
    assert_eq!((r["id"].clone(), code(&r["error"])), (Value::Null, -32700));
    let r = e.recv_response(T).unwrap();
    assert_eq!(r["id"], "after");
    assert!(r["result"].is_object());
}

#[test]
fn batches_follow_section_11() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    // Empty array: one -32600, not an array.
    e.send_raw("[]");
    let r = e.recv_response(T).unwrap();
    assert!(r.is_object());
    assert_eq!((r["id"].clone(), code(&r["error"])), (Value::Null, -32600));
    // All notifications: no output at all.
    e.send(&json!([{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]));
    e.expect_silence(QUIET);
    // Mixed: each request answered once, bad members individually, notifications skipped.
    e.send(&json!([
        req(json!(1), "ping", json!({"nonce": 1})),
        {"jsonrpc": "2.0", "method": "ping"},
        42,
        req(json!("r"), "retrieve", json!({"query": "rust", "k": 2})),
        req(json!(3), "embed", json!({"inputs": ["x"]})),
        {"jsonrpc": "2.0", "id": 4}
    ]));
    let r = e.recv_response(T).unwrap();
    let arr = r.as_array().expect("a batch answer is an array");
    assert_eq!(arr.len(), 5, "{r}");
    let by_id = |id: Value| arr.iter().filter(|m| m["id"] == id).cloned().collect::<Vec<_>>();
    assert_eq!(by_id(json!(1))[0]["result"]["nonce"], 1);
    assert!(by_id(json!("r"))[0]["result"]["hits"].is_array());
    assert_eq!(code(&by_id(json!(3))[0]["error"]), -32003);
    assert_eq!(code(&by_id(json!(4))[0]["error"]), -32600);
    assert_eq!(code(&by_id(Value::Null)[0]["error"]), -32600);
    // A member that is an array is not a request, even if it lines up with the fields.
    e.send(&json!([["2.0", 3, "retrieve", {"query": "rust", "k": 1}]]));
    let r = e.recv_response(T).unwrap();
    assert_eq!(r[0]["id"], Value::Null);
    assert_eq!(code(&r[0]["error"]), -32600);
}

// ---- params validation, options, funnel (§7.7, §8, §12) ----

#[test]
fn option_values_outside_the_advertised_set_are_option_unsupported_unless_not_strict() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let err = e.err("retrieve", json!({"query": "rust", "k": 3, "mode": "dense"}));
    assert_eq!(code(&err), -32005);
    assert_eq!(err["data"]["option"], "mode");
    let res = e.ok("retrieve", json!({"query": "rust", "k": 3, "mode": "dense", "strict": false}));
    let notes = res["usage"]["notes"].to_string();
    assert!(notes.contains("mode 'dense' not advertised"), "{notes}");
    assert!(!res["hits"].as_array().unwrap().is_empty());

    let err = e.err("retrieve", json!({"query": "rust", "k": 3, "unit": "community"}));
    assert_eq!((code(&err), err["data"]["option"].clone()), (-32005, json!("unit")));
    let err = e.err("retrieve", json!({"query": "rust", "k": 3, "mmr": {"lambda": 0.5}}));
    assert_eq!((code(&err), err["data"]["option"].clone()), (-32005, json!("mmr")));
    let err = e.err("retrieve", json!({"query": "rust", "k": 3, "modality": "image"}));
    assert_eq!((code(&err), err["data"]["option"].clone()), (-32005, json!("modality")));
    let err = e.err("retrieve", json!({"query": "rust", "k": 3, "rerank": {"method": "llm", "topN": 5}}));
    assert_eq!(code(&err), -32005);
}

#[test]
fn malformed_params_name_the_offending_field() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let cases = [
        (json!({"k": 3}), "query"),
        (json!({"query": "rust"}), "k"),
        (json!({"query": "rust", "k": -1}), "k"),
        (json!({"query": "rust", "k": 2.5}), "k"),
        (json!({"query": "rust", "k": "3"}), "k"),
        (json!({"query": "rust", "k": 0}), "k"),
        (json!({"query": "", "k": 3}), "query"),
        (json!({"query": "rust", "k": 3, "includeText": "yes"}), "includeText"),
        (json!({"query": "rust", "k": 3, "mmr": {"lambda": 2}}), "mmr.lambda"),
        (json!({"query": "rust", "k": 3, "filter": {"and": []}}), "filter.and"),
        (
            json!({"query": "rust", "k": 3, "filter": {"or": [{"field": "year", "op": "gt", "value": 1}, {"field": "nope", "op": "eq", "value": 1}]}}),
            "filter.or[1].field",
        ),
        (
            json!({"query": "rust", "k": 3, "filter": {"and": [{"field": "topic", "op": "eq", "value": "rust"}, {"field": "year", "op": "gte", "value": "new"}]}}),
            "filter.and[1].value",
        ),
        (json!({"query": "rust", "k": 3, "filter": {"field": "topic", "op": "gt", "value": "a"}}), "filter.op"),
    ];
    for (params, field) in cases {
        let err = e.err("retrieve", params.clone());
        assert_eq!(code(&err), -32602, "{params}: {err}");
        assert_eq!(err["data"]["field"], field, "{params}: {err}");
    }
}

#[test]
fn unknown_fields_x_keys_and_meta_are_tolerated_and_null_is_absent() {
    let mut e = Engine::example("tiny_engine");
    e.ok(
        "initialize",
        json!({"protocolVersion": 1, "x-vendor": {"a": 1}, "_meta": {"trace": "t"},
        "capabilities": {"x-acme": {"v": 1}, "streaming": {}, "futureCap": {}}}),
    );
    let res = e.ok(
        "retrieve",
        json!({"query": "rust", "k": 2, "x-acme-boost": 3, "futureOption": {"deep": [1]},
        "mode": null, "filter": null, "_meta": {"unknownKey": true}}),
    );
    assert!(!res["hits"].as_array().unwrap().is_empty());
}

#[test]
fn k_above_max_k_is_clamped_and_the_funnel_is_enforced() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let res = e.ok("retrieve", json!({"query": "rust async tokio", "k": 100000}));
    assert!(res["hits"].as_array().unwrap().len() <= 50);
    assert!(res["usage"]["notes"].to_string().contains("k clamped from 100000 to maxK 50"));
    let err = e.err("retrieve", json!({"query": "rust", "k": 10, "candidateK": 5}));
    assert_eq!((code(&err), err["data"]["field"].clone()), (-32602, json!("candidateK")));
    let res = e.ok("retrieve", json!({"query": "rust", "k": 1}));
    assert!(res["hits"].as_array().unwrap().len() <= 1);
}

#[test]
fn filters_are_applied_and_operators_validated() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let res = e.ok("retrieve", json!({"query": "rust async tokio borrow", "k": 10,
        "filter": {"and": [{"field": "topic", "op": "eq", "value": "rust"}, {"field": "year", "op": "gte", "value": 2020}]}}));
    let ids: Vec<&str> = res["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{res}");
    assert!(ids.contains(&"rust-1") && ids.contains(&"rust-3"));
    let res = e.ok(
        "retrieve",
        json!({"query": "rust async tokio borrow", "k": 10,
        "filter": {"not": {"field": "year", "op": "in", "value": [2021, 2023]}}}),
    );
    let ids: Vec<&str> = res["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["rust-2"]);
}

#[test]
fn pagination_covers_the_ranking_exactly_once() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let params = json!({"query": "rust async tokio borrow the of", "k": 50});
    let full: Vec<Value> =
        e.ok("retrieve", params.clone())["hits"].as_array().unwrap().iter().map(|h| h["id"].clone()).collect();
    assert!(full.len() >= 3, "{full:?}");
    let mut paged = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let mut p = json!({"query": "rust async tokio borrow the of", "k": 2});
        if let Some(c) = &cursor {
            p["cursor"] = c.clone();
        }
        let res = e.ok("retrieve", p);
        paged.extend(res["hits"].as_array().unwrap().iter().map(|h| h["id"].clone()));
        match res.get("nextCursor") {
            Some(c) if c.as_str().is_some_and(|s| !s.is_empty()) => cursor = Some(c.clone()),
            _ => break,
        }
    }
    assert_eq!(paged, full);
}

#[test]
fn index_add_rejects_duplicate_ids_upserts_and_deletes_idempotently() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let err = e.err("index/add", json!({"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}));
    assert_eq!((code(&err), err["data"]["field"].clone()), (-32602, json!("documents[1].id")));
    let res = e.ok("index/add", json!({"documents": [{"id": "n1", "text": "zebra one"}, {"text": "zebra two"}]}));
    let ids = res["ids"].as_array().unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], "n1");
    e.ok("index/add", json!({"documents": [{"id": "n1", "text": "okapi replaced"}]}));
    let hits = e.ok("retrieve", json!({"query": "zebra", "k": 10}))["hits"].clone();
    assert_eq!(hits.as_array().unwrap().len(), 1, "upsert must replace, not duplicate: {hits}");
    assert_eq!(e.ok("index/delete", json!({"ids": ["n1"]}))["deleted"], 1);
    assert_eq!(e.ok("index/delete", json!({"ids": ["n1"]}))["deleted"], 0);
    // Idempotency key: the repeat returns the original result without re-applying.
    let first = e.ok("index/add", json!({"documents": [{"text": "minted"}], "_meta": {"idempotencyKey": "k1"}}));
    let again = e.ok("index/add", json!({"documents": [{"text": "minted"}], "_meta": {"idempotencyKey": "k1"}}));
    assert_eq!(first["ids"], again["ids"]);
    let hits = e.ok("retrieve", json!({"query": "minted", "k": 10}))["hits"].clone();
    assert_eq!(hits.as_array().unwrap().len(), 1);
}

// ---- concurrency, cancellation, deadlines, panics (§4.7, §7.14, §13.1) ----

#[test]
fn pipelined_requests_are_answered_as_they_finish() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!("slow"), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 1500}})));
    for i in 0..50 {
        e.send(&req(json!(i), "ping", json!({"nonce": i})));
    }
    for i in 0..50 {
        let r = e.recv_response(T).unwrap();
        assert_eq!(r["id"], i, "pings must not wait behind the slow request");
    }
    assert_eq!(e.recv_response(T).unwrap()["id"], "slow");
}

#[test]
fn cancel_answers_the_request_exactly_once_with_cancelled() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!(77), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 20000}})));
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 77, "reason": "test"}}));
    let r = e.recv_response(T).unwrap();
    assert_eq!((r["id"].clone(), code(&r["error"])), (json!(77), -32006));
    assert!(started.elapsed() < Duration::from_secs(2));
    e.expect_silence(QUIET);
    // Cancelling an already-answered id is a no-op.
    e.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 77}}));
    e.expect_silence(QUIET);
    assert!(e.ok("ping", json!({})).is_object());
}

#[test]
fn duplicate_in_flight_ids_are_rejected() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!("dup"), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 800}})));
    e.send(&req(json!("dup"), "retrieve", json!({"query": "rust", "k": 1})));
    let r = e.recv_response(T).unwrap();
    assert_eq!(code(&r["error"]), -32600);
    assert_eq!(r["id"], Value::Null, "the duplicate must not be answered with the in-flight id");
    let r = e.recv_response(T).unwrap();
    assert!(r["result"].is_object(), "{r}");
}

#[test]
fn deadlines_answer_timeout() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    let started = Instant::now();
    let err =
        e.err("retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 20000, "deadlineMs": 200}}));
    assert_eq!(code(&err), -32014);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_panicking_handler_fails_only_its_own_request() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!("slow"), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 300}})));
    let err = e.err("retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-panic": true}}));
    assert_eq!(code(&err), -32603);
    assert!(e.response_for(&json!("slow"), T)["result"].is_object());
    assert!(e.ok("ping", json!({})).is_object());
}

// ---- streaming and logs (§9, §17.1) ----

#[test]
fn progress_only_with_a_token_and_echoing_it() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.ok("retrieve", json!({"query": "rust", "k": 1}));
    assert!(e.notifications.is_empty(), "no token, no progress: {:?}", e.notifications);
    e.ok("retrieve", json!({"query": "rust", "k": 1, "_meta": {"progressToken": "tok-1"}}));
    let progress: Vec<&Value> = e.notifications.iter().filter(|n| n["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty());
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "tok-1"));
    e.notifications.clear();
    e.ok("retrieve", json!({"query": "rust", "k": 1, "_meta": {"progressToken": 5}}));
    assert!(e.notifications.iter().any(|p| p["params"]["progressToken"] == 5));
}

#[test]
fn logs_only_when_the_client_opted_in() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.ok("retrieve", json!({"query": "rust", "k": 1}));
    assert!(!e.notifications.iter().any(|n| n["method"] == "notifications/log"));
    let mut e = Engine::example("tiny_engine");
    e.ok("initialize", json!({"protocolVersion": 1, "capabilities": {"log": {}}}));
    e.ok("retrieve", json!({"query": "rust", "k": 1}));
    assert!(e.notifications.iter().any(|n| n["method"] == "notifications/log" && n["params"]["level"] == "info"));
    e.notifications.clear();
    e.ok("retrieve", json!({"query": "rust", "k": 1, "_meta": {"logLevel": "error"}}));
    assert!(!e.notifications.iter().any(|n| n["method"] == "notifications/log"), "info is below the requested minimum");
}

// ---- end of session (§5.1, §7.12, §13.1) ----

#[test]
fn eof_drains_in_flight_requests_and_exits_zero() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!("last"), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 400}})));
    e.close_stdin();
    assert!(e.recv_response(T).unwrap()["result"].is_object());
    assert!(e.wait(T).success());
}

#[test]
fn shutdown_drains_answers_last_and_processes_nothing_after() {
    let mut e = Engine::example("tiny_engine");
    e.initialize();
    e.send(&req(json!("slow"), "retrieve", json!({"query": "rust", "k": 1, "_meta": {"x-tiny-delayMs": 400}})));
    e.send(&req(json!("bye"), "shutdown", json!({})));
    e.send(&req(json!("late"), "ping", json!({})));
    let first = e.recv_response(T).unwrap();
    assert_eq!(first["id"], "slow");
    let second = e.recv_response(T).unwrap();
    assert_eq!(second["id"], "bye");
    assert_eq!(second["result"], json!({}));
    assert!(e.wait(T).success());
    assert!(e.recv(QUIET).is_none(), "nothing may be processed after shutdown");
}
