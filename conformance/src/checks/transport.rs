//! Transport framing: NDJSON over stdio (§5.1) and the HTTP mapping (§5.2). Each check applies
//! to one transport and is skipped on the other.

use std::time::Duration;

use serde_json::json;

use crate::session::Main;
use crate::transport::Send;
use crate::verdict::{Res, expect_code, fail, pass, skip, verdict};

const STDIO_ONLY: &str = "stdio transport only";
const HTTP_ONLY: &str = "HTTP transport only";

pub(crate) async fn blank_lines(m: &mut Main) -> Res {
    let Some(s) = m.conn.stdio() else { return skip(STDIO_ONLY) };
    s.write(b"\n\n\n").await?;
    m.conn.expect_silence().await?;
    pass()
}

fn ping_frame(id: &str, nonce: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"nonce": nonce}}).to_string()
}

pub(crate) async fn split_frame(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip(STDIO_ONLY);
    }
    let frame = ping_frame("split-1", "split");
    let (a, b) = frame.split_at(frame.len() / 2);
    m.conn.expect_id(json!("split-1"), "ping");
    if let Some(s) = m.conn.stdio() {
        s.write(a.as_bytes()).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.write(format!("{b}\n").as_bytes()).await?;
    }
    let r = m.conn.wait_for(&json!("split-1"), m.conn.timeout()).await?;
    verdict(r.result().and_then(|x| x.get("nonce")) == Some(&json!("split")), || format!("got {}", r.brief()))
}

pub(crate) async fn two_frames(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip(STDIO_ONLY);
    }
    let text = format!("{}\n{}\n", ping_frame("two-1", "one"), ping_frame("two-2", "two"));
    m.conn.expect_id(json!("two-1"), "ping");
    m.conn.expect_id(json!("two-2"), "ping");
    if let Some(s) = m.conn.stdio() {
        s.write(text.as_bytes()).await?;
    }
    for (id, nonce) in [("two-1", "one"), ("two-2", "two")] {
        let r = m.conn.wait_for(&json!(id), m.conn.timeout()).await?;
        if r.result().and_then(|x| x.get("nonce")) != Some(&json!(nonce)) {
            return fail(format!("{id}: got {}", r.brief()));
        }
    }
    pass()
}

pub(crate) async fn http_error_200(m: &mut Main) -> Res {
    if m.conn.is_stdio() {
        return skip(HTTP_ONLY);
    }
    let before = m.conn.statuses.len();
    let r = m.conn.call("conformance/undefined-method", json!({})).await?;
    expect_code(&r, -32004)?;
    match m.conn.statuses.get(before) {
        Some((status, _)) => fail(format!("a JSON-RPC error came with HTTP {status}")),
        None => pass(),
    }
}

pub(crate) async fn http_path_mismatch(m: &mut Main) -> Res {
    if m.conn.is_stdio() {
        return skip(HTTP_ONLY);
    }
    let id = json!("path-mismatch-1");
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {}});
    m.conn.watch.null_id_ok = true;
    let sent = m.conn.send_value(&msg, Send { method: Some("info".into()), allow_4xx: true, ..Send::default() }).await;
    let r = match sent {
        Ok(()) => m.conn.wait_for(&id, m.conn.timeout()).await,
        Err(e) => Err(e),
    };
    m.conn.watch.null_id_ok = false;
    expect_code(&r?, -32600)?;
    pass()
}

pub(crate) async fn http_buffered(m: &mut Main) -> Res {
    if m.conn.is_stdio() {
        return skip(HTTP_ONLY);
    }
    // Content-Type and status violations are reported by the transport as the answer arrives.
    m.conn.call("ping", json!({"nonce": "buffered"})).await?.ok()?;
    if let Some((method, params)) = m.some_gated_call() {
        m.conn.call(method, params).await?;
    }
    pass()
}

pub(crate) async fn stdout_clean(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip(STDIO_ONLY);
    }
    let n = m.conn.non_json;
    verdict(n == 0, || format!("{n} stdout line(s) on the main session were not JSON-RPC frames"))
}

pub(crate) async fn http_unauthorized(m: &mut Main) -> Res {
    if m.conn.is_stdio() {
        return skip(HTTP_ONLY);
    }
    if !m.conn.http_has_auth() {
        return skip("no Authorization header configured (--header)");
    }
    let id = json!("unauthenticated-1");
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "info", "params": {}});
    let before = m.conn.statuses.len();
    m.conn.watch.null_id_ok = true;
    let sent = m.conn.send_value(&msg, Send { allow_4xx: true, no_auth: true, ..Send::default() }).await;
    let r = match sent {
        Ok(()) => m.conn.wait_for(&id, m.conn.timeout()).await,
        Err(e) => Err(e),
    };
    m.conn.watch.null_id_ok = false;
    match r {
        Ok(r) if r.code() == Some(-32012) => pass(),
        Ok(r) => fail(format!("a request without credentials was answered with {}", r.brief())),
        Err(_) => match m.conn.statuses.get(before) {
            Some((status, _)) => {
                fail(format!("HTTP {status} without a -32012 JSON-RPC error (§15.6: not a bare transport error)"))
            }
            None => fail("a request without credentials was not answered"),
        },
    }
}
