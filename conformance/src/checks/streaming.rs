//! Streaming progress (§9) and log notifications (§17.1).

use std::time::Duration;

use serde_json::{Value, json};

use crate::conn::Conn;
use crate::session::{Main, init_params};
use crate::verdict::{Res, fail, pass_note, show, skip, verdict};

fn frames_of(conn: &Conn, from: usize, method: &str) -> Vec<Value> {
    frames_in(conn, from, conn.watch.notifications.len(), method)
}

fn frames_in(conn: &Conn, from: usize, to: usize, method: &str) -> Vec<Value> {
    conn.watch.notifications[from..to]
        .iter()
        .filter(|n| n.get("method").and_then(Value::as_str) == Some(method))
        .cloned()
        .collect()
}

/// The call used to provoke progress: the broad retrieve, else any advertised gated method.
pub(super) fn workload(m: &Main) -> Option<(&'static str, Value)> {
    if m.caps.has("retrieve") {
        return Some(("retrieve", json!({"query": m.broad, "k": m.k(10)})));
    }
    m.some_gated_call()
}

pub(crate) async fn requires_token(m: &mut Main) -> Res {
    if !m.caps.has("streaming") {
        return skip("streaming not advertised");
    }
    let Some((method, params)) = workload(m) else { return skip("no gated method to run") };
    let from = m.conn.watch.notifications.len();
    m.conn.call_streaming(method, params).await?.ok()?;
    m.conn.drain(Duration::from_millis(50)).await;
    let frames = frames_of(&m.conn, from, "notifications/progress");
    verdict(frames.is_empty(), || {
        format!("{} progress frame(s) for a request without a token: {}", frames.len(), show(&frames[0]))
    })
}

async fn echoes(m: &mut Main, token: Value) -> Res {
    if !m.caps.has("streaming") {
        return skip("streaming not advertised");
    }
    let Some((method, mut params)) = workload(m) else { return skip("no gated method to run") };
    params["_meta"] = json!({"progressToken": token});
    let from = m.conn.watch.notifications.len();
    m.conn.call_streaming(method, params).await?.ok()?;
    let mid = m.conn.watch.notifications.len();
    m.conn.drain(Duration::from_millis(100)).await;
    let before = frames_in(&m.conn, from, mid, "notifications/progress");
    for f in &before {
        let got = f.get("params").and_then(|p| p.get("progressToken"));
        if got != Some(&token) {
            return fail(format!(
                "sent progressToken {token}, a progress frame carried {}",
                got.map_or("none".into(), show)
            ));
        }
        if let Some(p) = f.get("params").and_then(|p| p.get("progress"))
            && !p.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p))
        {
            return fail(format!("progress {p} is outside 0.0–1.0"));
        }
    }
    let after = frames_of(&m.conn, mid, "notifications/progress");
    if let Some(late) = after.iter().find(|f| f.get("params").and_then(|p| p.get("progressToken")) == Some(&token)) {
        return fail(format!("a progress frame arrived after the final response: {}", show(late)));
    }
    pass_note(format!("{} progress frame(s), then the final response", before.len()))
}

pub(crate) async fn echoes_string_token(m: &mut Main) -> Res {
    echoes(m, json!("conformance-token-✓")).await
}

pub(crate) async fn echoes_integer_token(m: &mut Main) -> Res {
    echoes(m, json!(90210)).await
}

pub(crate) async fn log_silent(m: &mut Main) -> Res {
    if !m.caps.has("log") {
        return skip("log not advertised (unsolicited logs are caught by notify.no-unsolicited)");
    }
    let Some((method, params)) = workload(m) else { return skip("no gated method to run") };
    let from = m.conn.watch.notifications.len();
    m.conn.call_streaming(method, params).await?.ok()?;
    m.conn.drain(Duration::from_millis(50)).await;
    let logs = frames_of(&m.conn, from, "notifications/log");
    verdict(logs.is_empty(), || format!("{} log frame(s) without opt-in: {}", logs.len(), show(&logs[0])))
}

/// Opens a session that opted in to `debug` logs, runs `method` and returns the log frames seen.
async fn log_frames(c: &mut Conn, method: &str, params: Value) -> Result<Vec<Value>, String> {
    let mut init = init_params(1);
    init["capabilities"] = json!({"log": {}});
    init["_meta"] = json!({"logLevel": "debug"});
    c.call("initialize", init).await?.ok()?;
    c.call_streaming(method, params).await?.ok()?;
    c.drain(Duration::from_millis(100)).await;
    Ok(frames_of(c, 0, "notifications/log"))
}

pub(crate) async fn log_opt_in(m: &mut Main) -> Res {
    if !m.caps.has("log") {
        return skip("log not advertised");
    }
    if m.stateless {
        return skip("stateless HTTP: logs can only reach the client inside an SSE stream of a session it opted in");
    }
    if m.global_session {
        return skip(
            "the HTTP server keeps one process-wide session, held by the main session: no session can opt in to logs",
        );
    }
    let Some((method, params)) = workload(m) else { return skip("no gated method to run") };
    // Its own session. Over stdio this runs after the main process was shut down, and that
    // process is reaped first: never two server processes at once.
    m.conn.close().await;
    let mut c = Conn::open(&m.env).await?;
    let outcome = log_frames(&mut c, method, params).await;
    c.close().await;
    let logs = outcome?;
    let levels = ["debug", "info", "notice", "warning", "error"];
    for l in &logs {
        let p = l.get("params");
        let level_ok = p.and_then(|p| p.get("level")).and_then(Value::as_str).is_some_and(|x| levels.contains(&x));
        let msg_ok = p.and_then(|p| p.get("message")).is_some_and(Value::is_string);
        if !level_ok || !msg_ok {
            return fail(format!("malformed notifications/log: {}", show(l)));
        }
    }
    pass_note(format!("{} log frame(s) after opting in", logs.len()))
}
