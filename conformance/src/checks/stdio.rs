//! NDJSON framing over stdio (§5.1); skipped over HTTP (the HTTP mapping's checks are in
//! [`super::http`]).

use std::time::Duration;

use serde_json::json;

use crate::session::Main;
use crate::verdict::{Res, fail, pass, skip, verdict};

const STDIO_ONLY: &str = "stdio transport only";

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

pub(crate) async fn stdout_clean(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip(STDIO_ONLY);
    }
    let n = m.conn.non_json;
    verdict(n == 0, || format!("{n} stdout line(s) on the main session were not JSON-RPC frames"))
}
