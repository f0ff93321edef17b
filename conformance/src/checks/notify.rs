//! Notifications are never answered (§4.5), cancellation (§7.14) and unsolicited notifications
//! (§7.1, §9, §17.1). "Not answered" is proven by sending a `ping` right after and requiring the
//! next response to be the ping's.

use std::time::Duration;

use serde_json::{Value, json};

use crate::session::Main;
use crate::verdict::{Res, fail, pass, pass_note, show, skip, verdict};

async fn silent(m: &mut Main, method: &str, params: Value) -> Res {
    m.conn.notify(method, Some(params)).await?;
    m.conn.expect_silence().await?;
    pass()
}

pub(crate) async fn gated(m: &mut Main) -> Res {
    let (method, params) = m.some_gated_call().unwrap_or(("retrieve", json!({"query": "conformance probe", "k": 1})));
    silent(m, method, params).await
}

pub(crate) async fn open(m: &mut Main) -> Res {
    silent(m, "ping", json!({"nonce": "notification"})).await
}

pub(crate) async fn unknown_method(m: &mut Main) -> Res {
    silent(m, "conformance/undefined-method", json!({})).await
}

pub(crate) async fn cancel_unknown(m: &mut Main) -> Res {
    silent(m, "notifications/cancel", json!({"id": "never-sent-4711", "reason": "conformance"})).await
}

pub(crate) async fn unknown_namespace(m: &mut Main) -> Res {
    silent(m, "notifications/x-conformance-future", json!({"anything": [1, 2, 3]})).await
}

pub(crate) async fn cancel_answered(m: &mut Main) -> Res {
    let id = json!("already-answered-1");
    m.conn.call_id(id.clone(), "ping", Some(json!({}))).await?.ok()?;
    silent(m, "notifications/cancel", json!({"id": id})).await
}

pub(crate) async fn cancel_exactly_once(m: &mut Main) -> Res {
    let (method, params) = match m.some_gated_call() {
        Some(("retrieve", _)) => ("retrieve", json!({"query": m.broad, "k": m.k(50)})),
        Some(other) => other,
        None => ("ping", json!({})),
    };
    let id = json!("cancel-me-1");
    m.conn.send_background(id.clone(), method, params).await?;
    m.conn.notify("notifications/cancel", Some(json!({"id": id, "reason": "conformance cancel"}))).await?;
    let r = m.conn.wait_for(&id, m.conn.timeout()).await?;
    let first = if r.result().is_some() {
        "result".to_owned()
    } else if r.code() == Some(-32006) {
        "-32006".to_owned()
    } else {
        return fail(format!("expected the result or -32006 for the cancelled {method}, got {}", r.brief()));
    };
    let late = m.conn.drain(Duration::from_millis(300)).await;
    if let Some(dup) = late.iter().find(|f| f.get("id") == Some(&id)) {
        return fail(format!("a second response for the cancelled request: {}", show(dup)));
    }
    pass_note(format!("answered once with {first}"))
}

fn progress_frames(m: &Main, from: usize) -> Vec<Value> {
    m.conn.watch.notifications[from..]
        .iter()
        .filter(|n| n.get("method").and_then(Value::as_str) == Some("notifications/progress"))
        .cloned()
        .collect()
}

pub(crate) async fn progress_unadvertised(m: &mut Main) -> Res {
    if m.caps.has("streaming") {
        return skip("streaming is advertised (see progress.* checks)");
    }
    let Some((method, mut params)) = m.some_gated_call() else {
        return skip("no gated method advertised to attach a progressToken to");
    };
    params["_meta"] = json!({"progressToken": "unadvertised-token"});
    let from = m.conn.watch.notifications.len();
    m.conn.call_streaming(method, params).await?;
    let late = m.conn.drain(Duration::from_millis(50)).await;
    drop(late);
    let frames = progress_frames(m, from);
    verdict(frames.is_empty(), || {
        format!("{} progress frame(s) although streaming is not advertised: {}", frames.len(), show(&frames[0]))
    })
}

pub(crate) async fn no_unsolicited(m: &mut Main) -> Res {
    let n = m.conn.watch.unsolicited;
    verdict(n == 0, || format!("{n} notification(s) the client never opted into on the main session"))
}
