//! The JSON-RPC envelope: id echo (§4.7), parse and request errors (§12), params shape (§4.1)
//! and batches (§11).

use std::time::Duration;

use serde_json::{Value, json};

use crate::session::Main;
use crate::transport::Send;
use crate::verdict::{Res, fail, pass, pass_note, show, verdict};

async fn echo(m: &mut Main, id: Value) -> Res {
    let r = m.conn.call_id(id.clone(), "ping", Some(json!({}))).await?;
    let got = r.id().cloned().unwrap_or(Value::Null);
    verdict(got == id, || format!("sent id {id}, response carried id {got}"))
}

pub(crate) async fn id_string(m: &mut Main) -> Res {
    echo(m, json!("id-ü-✓ 42")).await
}

pub(crate) async fn id_integer(m: &mut Main) -> Res {
    echo(m, json!(7357)).await
}

pub(crate) async fn id_negative(m: &mut Main) -> Res {
    echo(m, json!(-7)).await
}

pub(crate) async fn id_large(m: &mut Main) -> Res {
    echo(m, json!(9_007_199_254_740_991_i64)).await
}

pub(crate) async fn id_on_error(m: &mut Main) -> Res {
    let id = json!("error-id-écho");
    let r = m.conn.call_id(id.clone(), "conformance/undefined-method", Some(json!({}))).await?;
    if r.code().is_none() {
        return fail(format!("expected an error, got {}", r.brief()));
    }
    let got = r.id().cloned().unwrap_or(Value::Null);
    verdict(got == id, || format!("sent id {id}, error response carried id {got}"))
}

/// What the server did with a frame that is not a well-formed request.
enum RawAnswer {
    Frame(Value),
    Status(u16, String),
    Nothing,
}

/// Sends `text` raw (HTTP: to the base URL) and collects the answer, allowing `id: null`.
async fn raw_answer(m: &mut Main, text: &str, register: Option<(Value, &str)>) -> Result<RawAnswer, String> {
    m.conn.watch.null_id_ok = true;
    if let Some((id, label)) = register {
        m.conn.expect_id(id, label);
    }
    let before = m.conn.statuses.len();
    let sent = m.conn.send_raw(text).await;
    let answer = match sent {
        Err(e) => Err(e),
        Ok(()) if m.conn.is_stdio() => match m.conn.recv_response(m.conn.timeout()).await {
            Ok(v) => Ok(RawAnswer::Frame(v)),
            Err(_) => Ok(RawAnswer::Nothing),
        },
        Ok(()) => {
            let frames = m.conn.drain(Duration::from_millis(100)).await;
            match (m.conn.statuses.get(before).cloned(), frames.into_iter().find(|f| !crate::conn::is_notification(f)))
            {
                (_, Some(f)) => Ok(RawAnswer::Frame(f)),
                (Some((s, body)), None) => Ok(RawAnswer::Status(s, body)),
                (None, None) => Ok(RawAnswer::Nothing),
            }
        }
    };
    m.conn.watch.null_id_ok = false;
    answer
}

fn is_error(v: &Value, code: i64) -> bool {
    v.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64) == Some(code)
}

pub(crate) async fn parse_error(m: &mut Main) -> Res {
    match raw_answer(m, r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"#, None).await? {
        RawAnswer::Frame(v) if is_error(&v, -32700) && v.get("id") == Some(&Value::Null) => pass(),
        RawAnswer::Frame(v) => fail(format!("expected -32700 with id null, got {}", show(&v))),
        RawAnswer::Status(400, body) => {
            let parsed: Option<Value> = serde_json::from_str(&body).ok();
            match parsed {
                Some(v) if !is_error(&v, -32700) => {
                    fail(format!("HTTP 400 with a body that is not -32700: {}", show(&v)))
                }
                _ => pass_note("HTTP 400 (§5.2)"),
            }
        }
        RawAnswer::Status(s, _) => fail(format!("HTTP {s} for invalid JSON; expected 400 or a -32700 response")),
        RawAnswer::Nothing => fail("invalid JSON was not answered"),
    }
}

pub(crate) async fn invalid_request(m: &mut Main) -> Res {
    let id = json!("no-method-1");
    match raw_answer(m, r#"{"jsonrpc":"2.0","id":"no-method-1","params":{}}"#, Some((id.clone(), "(none)"))).await? {
        RawAnswer::Frame(v) if is_error(&v, -32600) && matches!(v.get("id"), Some(i) if *i == id || i.is_null()) => {
            pass()
        }
        RawAnswer::Frame(v) => fail(format!("expected -32600, got {}", show(&v))),
        RawAnswer::Status(400, _) => pass_note("HTTP 400 (§5.2)"),
        RawAnswer::Status(s, _) => fail(format!("HTTP {s}; expected 400 or a -32600 response")),
        RawAnswer::Nothing => fail("a request without method was not answered"),
    }
}

pub(crate) async fn params_not_object(m: &mut Main) -> Res {
    let r = m.conn.call("ping", json!([1, 2])).await?;
    let ok = matches!(r.code(), Some(-32602 | -32600));
    if !ok {
        return fail(format!("ping with params [1,2]: expected -32602 or -32600, got {}", r.brief()));
    }
    let alive = m.conn.call("ping", json!({})).await?;
    alive.ok()?;
    pass()
}

pub(crate) async fn batch_empty(m: &mut Main) -> Res {
    match raw_answer(m, "[]", None).await? {
        RawAnswer::Frame(v) if v.is_array() => fail(format!("expected a single object, got an array: {}", show(&v))),
        RawAnswer::Frame(v) if is_error(&v, -32600) && v.get("id") == Some(&Value::Null) => pass(),
        RawAnswer::Frame(v) => fail(format!("expected -32600 with id null, got {}", show(&v))),
        RawAnswer::Status(s, body) => {
            let v: Option<Value> = serde_json::from_str(&body).ok();
            match v {
                Some(v) if is_error(&v, -32600) && !v.is_array() => pass_note(format!("HTTP {s} with a -32600 body")),
                _ => fail(format!("HTTP {s} without a single -32600 object (§11)")),
            }
        }
        RawAnswer::Nothing => fail("an empty batch was not answered"),
    }
}

pub(crate) async fn batch_notifications_only(m: &mut Main) -> Res {
    let batch = json!([
        {"jsonrpc": "2.0", "method": "ping", "params": {"nonce": 1}},
        {"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": "never-sent"}},
        {"jsonrpc": "2.0", "method": "conformance/undefined-notification", "params": {}},
    ]);
    m.conn.send_value(&batch, Send::default()).await?;
    m.conn.expect_silence().await?;
    pass()
}

fn member<'a>(arr: &'a [Value], id: &Value) -> Option<&'a Value> {
    arr.iter().find(|x| x.get("id") == Some(id))
}

pub(crate) async fn batch_mixed(m: &mut Main) -> Res {
    let (a, b) = (json!("batch-a"), json!("batch-b"));
    let batch = json!([
        {"jsonrpc": "2.0", "id": a, "method": "ping", "params": {"nonce": "batch-nonce"}},
        {"jsonrpc": "2.0", "method": "ping", "params": {"nonce": "unanswered"}},
        {"jsonrpc": "2.0", "id": b, "method": "info", "params": {}},
    ]);
    m.conn.send_value(&batch, Send::default()).await?;
    let v = m.conn.recv_response(m.conn.timeout()).await.map_err(|e| format!("no answer to the batch: {e:?}"))?;
    let Some(arr) = v.as_array() else {
        return fail(format!("a batch must be answered with an array, got {}", show(&v)));
    };
    if arr.len() != 2 {
        return fail(format!("expected 2 responses (2 requests, 1 notification), got {}: {}", arr.len(), show(&v)));
    }
    let pa = member(arr, &a).and_then(|x| x.get("result")).and_then(|r| r.get("nonce"));
    if pa != Some(&json!("batch-nonce")) {
        return fail(format!("the ping member was not answered with its nonce: {}", show(&v)));
    }
    verdict(member(arr, &b).and_then(|x| x.get("result")).is_some(), || {
        format!("the info member was not answered: {}", show(&v))
    })
}

pub(crate) async fn batch_invalid_member(m: &mut Main) -> Res {
    let c = json!("batch-c");
    m.conn.expect_id(c.clone(), "ping");
    let text = r#"[1,{"jsonrpc":"2.0","id":"batch-c","method":"ping","params":{"nonce":"c"}}]"#;
    let answer = raw_answer(m, text, None).await?;
    let RawAnswer::Frame(v) = answer else {
        return fail("a batch with one invalid member was not answered with an array");
    };
    let Some(arr) = v.as_array() else {
        return fail(format!("expected an array, got {}", show(&v)));
    };
    let invalid = arr.iter().any(|x| is_error(x, -32600) && x.get("id") == Some(&Value::Null));
    let valid = member(arr, &c).and_then(|x| x.get("result")).and_then(|r| r.get("nonce")) == Some(&json!("c"));
    match (invalid, valid, arr.len()) {
        (true, true, 2) => pass(),
        (false, _, _) => fail(format!("no -32600 member with id null for the invalid member: {}", show(&v))),
        (_, false, _) => fail(format!("the valid member was not answered: {}", show(&v))),
        (_, _, n) => fail(format!("expected 2 members, got {n}: {}", show(&v))),
    }
}

pub(crate) async fn jsonrpc_everywhere(m: &mut Main) -> Res {
    let r = m.conn.call("ping", json!({})).await?;
    if r.0.get("jsonrpc") != Some(&json!("2.0")) {
        return fail(format!("ping response carries jsonrpc {}", r.0.get("jsonrpc").map_or("absent".into(), show)));
    }
    let (bad, total) = (m.conn.watch.bad_jsonrpc, m.conn.watch.frames);
    verdict(bad == 0, || format!("{bad} of {total} frames on the main session lacked jsonrpc \"2.0\""))
}

pub(crate) async fn cancel_with_id(m: &mut Main) -> Res {
    let id = json!("cancel-with-id-1");
    let r = m.conn.call_id(id, "notifications/cancel", Some(json!({"id": "never-sent-99"}))).await?;
    match r.code() {
        Some(-32600 | -32602) => pass(),
        _ => fail(format!("notifications/cancel carrying an id is malformed and must be rejected, got {}", r.brief())),
    }
}
