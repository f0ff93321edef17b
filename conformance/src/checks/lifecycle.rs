//! Session lifecycle (§7.1, §7.2, §7.12, §7.15, §13), each group on a clean session: a fresh
//! process over stdio, a token-less session over HTTP. A stateless HTTP server (§5.2) has no
//! per-connection session, so the checks that assume one are skipped for it.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Caps, Main, Res, expect_code, fail, fresh, gated_call, init_params, pass, pass_note, show, skip, verdict};
use crate::conn::{Conn, Env};

const STATELESS: &str = "stateless HTTP server: every request is implicitly initialized (§5.2), so there is no per-connection session to check";

pub(crate) async fn ping_nonce(env: &Env, slot: &mut Option<Conn>, nonce: Value) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("ping", json!({"nonce": nonce})).await?;
    let got = r.ok()?.get("nonce");
    verdict(got == Some(&nonce), || format!("sent nonce {nonce}, got back {}", got.map_or("no nonce".into(), show)))
}

pub(crate) async fn ping_plain(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("ping", json!({})).await?;
    let res = r.ok()?;
    verdict(res.is_object(), || format!("ping result is not an object: {}", show(res)))
}

/// Checks an initialize/info result shape; returns the problems found.
pub(crate) fn result_shape(res: &Value) -> Vec<&'static str> {
    [
        res.get("protocolVersion").and_then(Value::as_i64).is_none_or(|v| v < 1).then_some("protocolVersion ≥ 1"),
        (!res.get("server").and_then(|s| s.get("name")).is_some_and(Value::is_string)).then_some("server.name"),
        (!res.get("capabilities").is_some_and(Value::is_object)).then_some("a capabilities object"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(crate) async fn info_pre_init(env: &Env, slot: &mut Option<Conn>, caps: &mut Caps) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("info", json!({})).await?;
    let res = r.ok()?;
    *caps = Caps(res.get("capabilities").cloned().unwrap_or(Value::Null));
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("info result lacks {}", problems.join(", ")))
}

fn gated(caps: &Caps) -> (&'static str, Value) {
    gated_call(caps).unwrap_or(("retrieve", json!({"query": "conformance probe", "k": 1})))
}

pub(crate) async fn notify_pre_init(env: &Env, slot: &mut Option<Conn>, caps: &Caps) -> Res {
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    c.notify(method, Some(params)).await?;
    c.expect_silence().await?;
    pass()
}

pub(crate) async fn pre_init_gated(env: &Env, slot: &mut Option<Conn>, caps: &Caps, stateless: bool) -> Res {
    if stateless {
        return skip(STATELESS);
    }
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    let r = c.call(method, params).await?;
    expect_code(&r, -32001).map_err(|e| format!("{method} before initialize: {e}"))?;
    pass()
}

pub(crate) async fn version_zero(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(0)).await?;
    expect_code(&r, -32002)?;
    pass()
}

pub(crate) async fn locked_after_failure(env: &Env, slot: &mut Option<Conn>, caps: &Caps, stateless: bool) -> Res {
    if stateless {
        return skip(STATELESS);
    }
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    let r = c.call(method, params).await?;
    expect_code(&r, -32001).map_err(|e| format!("{method} after a failed initialize: {e}"))?;
    pass()
}

pub(crate) async fn retry_after_failure(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(1)).await?;
    let res = r.ok()?;
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("initialize result lacks {}", problems.join(", ")))
}

pub(crate) async fn repeat_rejected(env: &Env, slot: &mut Option<Conn>, stateless: bool) -> Res {
    if stateless {
        return skip(STATELESS);
    }
    let c = fresh(env, slot).await?;
    if !c.is_stdio() && c.http_session().is_none() {
        return skip("the retried initialize did not establish a session");
    }
    let r = c.call("initialize", init_params(1)).await?;
    expect_code(&r, -32600)?;
    pass()
}

pub(crate) async fn missing_version(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c
        .call("initialize", json!({"client": {"name": "rcp-conformance", "version": "0"}, "capabilities": {}}))
        .await?;
    expect_code(&r, -32602)?;
    match r.data_str("field") {
        Some(f) if f.contains("protocolVersion") => pass(),
        Some(f) => pass_note(format!("error.data.field is '{f}'")),
        None => pass_note("no error.data.field"),
    }
}

pub(crate) async fn tolerant_init(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let params = json!({
        "protocolVersion": 1,
        "client": {"name": "rcp-conformance", "version": "0", "x-conformance-build": 7},
        "capabilities": {"x-conformance": {"anything": true}, "futureCapability": {"level": 3}},
        "_meta": {"traceId": "conformance-trace", "x-conformance-unknown": [1, 2, 3]},
        "x-conformance-field": true,
        "futureField": {"nested": {"deep": null}},
    });
    let r = c.call("initialize", params).await?;
    let res = r.ok()?;
    let v = res.get("protocolVersion").and_then(Value::as_i64);
    verdict(v == Some(1), || format!("negotiated protocolVersion {v:?} for a client at version 1"))
}

pub(crate) async fn negotiates_min(env: &Env, slot: &mut Option<Conn>, main_version: Option<i64>) -> Res {
    if let Some(v) = main_version
        && v != 1
    {
        return fail(format!("a client at version 1 was answered with protocolVersion {v}; min(1, server) is 1"));
    }
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(99)).await?;
    let res = r.ok()?;
    let v = res.get("protocolVersion").and_then(Value::as_i64);
    verdict(v.is_some_and(|v| (1..=99).contains(&v)), || {
        format!("a client at version 99 was answered with protocolVersion {v:?}; expected min(99, server) in 1..=99")
    })
}

pub(crate) async fn shutdown_pre_init(env: &Env, slot: &mut Option<Conn>, stdio: bool) -> Res {
    if !stdio {
        return skip("HTTP: shutdown would end a shared endpoint; checked on the main session instead");
    }
    let c = fresh(env, slot).await?;
    let r = c.call("shutdown", json!({})).await?;
    let res = r.ok()?;
    if !res.is_object() {
        return fail(format!("shutdown result is not an object: {}", show(res)));
    }
    exit_zero(c).await
}

async fn exit_zero(c: &mut Conn) -> Res {
    let timeout = c.timeout();
    let Some(s) = c.stdio() else { return pass() };
    match s.wait_exit(timeout).await {
        Some(st) if st.success() => pass(),
        Some(st) => fail(format!("the process exited with {st} after shutdown")),
        None => fail(format!("the process did not exit within {} ms of answering shutdown", timeout.as_millis())),
    }
}

pub(crate) async fn shutdown_main(m: &mut Main) -> Res {
    m.closed = true;
    let r = m.conn.call("shutdown", json!({})).await?;
    let res = r.ok()?;
    let rest: Vec<&String> = res.as_object().map(|o| o.keys().filter(|k| *k != "_meta").collect()).unwrap_or_default();
    if !res.is_object() || !rest.is_empty() {
        return fail(format!("shutdown result should be {{}}, got {}", show(res)));
    }
    exit_zero(&mut m.conn).await
}

pub(crate) async fn nothing_after_shutdown(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip("HTTP: a later request is a new exchange; stdio only");
    }
    // Exited already (shutdown.main waited for it): writes fail or are never read.
    let id = json!("after-shutdown");
    if m.conn.send_request(id, "ping", Some(json!({"nonce": 1}))).await.is_err() {
        return pass_note("stdin closed after shutdown");
    }
    let late = m.conn.drain(Duration::from_millis(300)).await;
    verdict(late.is_empty(), || format!("the server answered after its shutdown response: {}", show(&late[0])))
}

pub(crate) async fn minimal_init(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", json!({"protocolVersion": 1})).await?;
    let res = r.ok()?;
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("initialize result lacks {}", problems.join(", ")))
}
