//! The HTTP mapping (§5.2): status codes, the path, buffered answers, credentials, CORS, rate
//! limiting and the framing of an SSE stream. Each check is skipped over stdio.

use reqwest::Method;
use serde_json::{Value, json};

use crate::session::Main;
use crate::transport::{Reply, Send, retry_after, wait_after};
use crate::verdict::{Res, expect_code, fail, pass, pass_note, skip, warn};

const HTTP_ONLY: &str = "HTTP transport only";

pub(crate) async fn error_200(m: &mut Main) -> Res {
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

pub(crate) async fn path_mismatch(m: &mut Main) -> Res {
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

pub(crate) async fn buffered(m: &mut Main) -> Res {
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

pub(crate) async fn unauthorized(m: &mut Main) -> Res {
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

/// The origin the CORS checks claim, one no deployment lists.
const ORIGIN: &str = "https://rcp-conformance.invalid";

/// Whether `allowed` (an `Access-Control-Allow-Origin`) admits [`ORIGIN`].
fn admits(allowed: Option<&str>) -> bool {
    allowed.is_some_and(|a| a.trim() == "*" || a.trim().eq_ignore_ascii_case(ORIGIN))
}

/// Whether a comma-separated `Access-Control-Allow-*` list holds `item` (or `*`, unless
/// `item` is one a wildcard does not cover: `authorization`, per the Fetch standard).
fn lists(list: Option<&str>, item: &str) -> bool {
    list.is_some_and(|l| {
        l.split(',').map(str::trim).any(|x| x.eq_ignore_ascii_case(item) || (x == "*" && item != "authorization"))
    })
}

/// A browser-facing server "SHOULD set appropriate `Access-Control-Allow-*` headers and handle
/// `OPTIONS` preflight" (§5.2). A server is taken as browser-facing when a cross-origin `POST`
/// (the one a page's `fetch` sends) is answered with an `Access-Control-Allow-Origin` that
/// admits it, or when a preflight is; then the preflight for that `POST` must admit the origin,
/// `POST` and every header the client sends (`content-type`, and the configured ones:
/// credentials, `RCP-Session`), and the `POST`'s answer must carry the origin too, or a
/// browser discards it.
pub(crate) async fn cors_preflight(m: &mut Main) -> Res {
    let Some(h) = m.conn.http() else { return skip(HTTP_ONLY) };
    let ping = json!({"jsonrpc": "2.0", "id": "cors-1", "method": "ping", "params": {}}).to_string();
    let post = h.probe(Method::POST, "ping", &[("origin", ORIGIN)], Some(ping)).await?;
    let mut wanted = vec!["content-type".to_owned()];
    wanted.extend(h.header_names());
    let asked = wanted.join(", ");
    let preflight = h
        .probe(
            Method::OPTIONS,
            "ping",
            &[
                ("origin", ORIGIN),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", &asked),
            ],
            None,
        )
        .await?;
    let (post_admits, pre_admits) =
        (admits(post.header("access-control-allow-origin")), admits(preflight.header("access-control-allow-origin")));
    if !post_admits && !pre_admits {
        return skip(format!(
            "not browser-facing for {ORIGIN}: neither a cross-origin POST (HTTP {}) nor its preflight (HTTP {}) \
             carried an Access-Control-Allow-Origin admitting it (serve with CORS enabled to check it)",
            post.status, preflight.status
        ));
    }
    let mut problems = Vec::new();
    if !(200..300).contains(&preflight.status) {
        problems.push(format!("the OPTIONS preflight was answered HTTP {}", preflight.status));
    }
    if !pre_admits {
        problems.push("the preflight carried no Access-Control-Allow-Origin admitting the origin".to_owned());
    }
    if !lists(preflight.header("access-control-allow-methods"), "POST") {
        problems.push(format!(
            "Access-Control-Allow-Methods ({}) does not allow POST",
            preflight.header("access-control-allow-methods").unwrap_or("absent")
        ));
    }
    let missing: Vec<&str> = wanted
        .iter()
        .map(String::as_str)
        .filter(|w| !lists(preflight.header("access-control-allow-headers"), w))
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "Access-Control-Allow-Headers ({}) does not allow {}",
            preflight.header("access-control-allow-headers").unwrap_or("absent"),
            missing.join(", ")
        ));
    }
    if !post_admits {
        problems.push("the cross-origin POST's answer carried no Access-Control-Allow-Origin admitting the origin (a browser discards it)".to_owned());
    }
    if problems.is_empty() {
        pass_note(format!("preflight HTTP {} admits {ORIGIN}, POST and {asked}", preflight.status))
    } else {
        warn(format!("browser-facing, but {} (§5.2)", problems.join("; ")))
    }
}

/// Requests of the burst [`retry_after_429`] sends when the run met no `429`, and how many of
/// them are in flight at once.
const BURST: usize = 120;
const BURST_WIDTH: usize = 24;

/// A `429` "SHOULD carry `Retry-After`" (§5.2). Judged on every `429` the run met (the suite
/// waits as each asks and sends the request again), else on a burst of `ping`s sent at once;
/// skipped when neither met one (no rate limit reached). The header must be delay-seconds or
/// an HTTP-date.
pub(crate) async fn retry_after_429(m: &mut Main) -> Res {
    if m.conn.is_stdio() {
        return skip(HTTP_ONLY);
    }
    let mut seen: Vec<Option<String>> = m.env.throttles.lock().map(|t| t.clone()).unwrap_or_default();
    let source = if seen.is_empty() {
        seen = burst(m).await?;
        format!("a burst of {BURST} pings")
    } else {
        "the run".to_owned()
    };
    if seen.is_empty() {
        return skip(format!(
            "no 429 in the run nor in a burst of {BURST} pings ({BURST_WIDTH} at once): no rate limit reached"
        ));
    }
    // Let the limit refill before the checks that follow, as the transport waits after a 429.
    let longest = seen.iter().map(|v| wait_after(v.as_deref())).max().unwrap_or_default();
    tokio::time::sleep(longest).await;
    let bare = seen.iter().filter(|v| v.is_none()).count();
    let unreadable: Vec<&str> =
        seen.iter().flatten().map(String::as_str).filter(|v| retry_after(v).is_none()).collect();
    if bare > 0 {
        return warn(format!("{bare} of {} HTTP 429 answers in {source} carried no Retry-After (§5.2)", seen.len()));
    }
    if let Some(v) = unreadable.first() {
        return warn(format!("Retry-After '{v}' is neither delay-seconds nor an HTTP-date (RFC 9110 §10.2.3)"));
    }
    pass_note(format!("{} HTTP 429 answer(s) in {source}, each with Retry-After", seen.len()))
}

/// Sends [`BURST`] pings, [`BURST_WIDTH`] at a time, and returns the `Retry-After` of each `429`.
async fn burst(m: &Main) -> Result<Vec<Option<String>>, String> {
    let Some(h) = m.conn.http() else { return Ok(Vec::new()) };
    let mut throttled = Vec::new();
    for wave in 0..BURST.div_ceil(BURST_WIDTH) {
        let calls = (0..BURST_WIDTH).map(|i| {
            let body = json!({"jsonrpc": "2.0", "id": format!("burst-{wave}-{i}"), "method": "ping", "params": {}});
            h.probe(Method::POST, "ping", &[], Some(body.to_string()))
        });
        for reply in futures::future::join_all(calls).await {
            let reply = reply?;
            if reply.status == 429 {
                throttled.push(reply.header("retry-after").map(str::to_owned));
            }
        }
        if !throttled.is_empty() {
            break;
        }
    }
    Ok(throttled)
}

/// The id of the request [`sse_framing`] streams.
const SSE_ID: &str = "sse-framing-1";

/// Streaming over HTTP (§5.2): when the client asks for `text/event-stream` and the server
/// chooses to stream (it MAY answer one JSON body instead), the stream is "zero or more
/// `notifications/progress` frames followed by exactly one final frame carrying the JSON-RPC
/// response", each frame "one SSE `data:` line whose payload is a compact JSON object,
/// terminated by a blank line", and it "ends after the final response frame". Read here from
/// the raw bytes, as a strict client would (SSE comments, the keep-alives, are allowed).
pub(crate) async fn sse_framing(m: &mut Main) -> Res {
    let Some(h) = m.conn.http() else { return skip(HTTP_ONLY) };
    if !m.caps.has("streaming") {
        return skip("streaming not advertised");
    }
    let Some((method, mut params)) = super::streaming::workload(m) else { return skip("no gated method to run") };
    params["_meta"] = json!({"progressToken": "sse-framing"});
    let body = json!({"jsonrpc": "2.0", "id": SSE_ID, "method": method, "params": params}).to_string();
    let reply = h.probe(Method::POST, method, &[("accept", "text/event-stream")], Some(body)).await?;
    let ctype = reply.header("content-type").unwrap_or("").to_ascii_lowercase();
    if !ctype.starts_with("text/event-stream") {
        return pass_note(format!("answered with one {ctype} body (HTTP {}): the server did not stream", reply.status));
    }
    match sse_problems(&reply) {
        Ok(progress) => pass_note(format!("{progress} progress frame(s), then the response, one data: line each")),
        Err(problem) => fail(format!("{method} over SSE: {problem}")),
    }
}

/// How many notifications preceded the response of a well-framed stream, or what is wrong with it.
fn sse_problems(reply: &Reply) -> Result<usize, String> {
    let text = reply.body.replace("\r\n", "\n").replace('\r', "\n");
    if !text.ends_with("\n\n") {
        return Err("the stream's last frame is not terminated by a blank line".into());
    }
    let mut notifications = 0;
    let mut answered = false;
    for (n, event) in text.split("\n\n").filter(|e| !e.is_empty()).enumerate() {
        let lines: Vec<&str> = event.lines().filter(|l| !l.starts_with(':')).collect();
        let data: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("data:")).collect();
        if lines.is_empty() {
            continue; // a comment (keep-alive)
        }
        let frame_no = n + 1;
        if data.len() != 1 {
            return Err(format!("frame {frame_no} has {} data: lines, not one", data.len()));
        }
        if answered {
            return Err(format!("frame {frame_no} follows the final response frame"));
        }
        let payload = data[0].strip_prefix(' ').unwrap_or(data[0]);
        let frame: Value = serde_json::from_str(payload)
            .map_err(|e| format!("frame {frame_no}'s payload is not JSON ({e}): {}", truncate(payload)))?;
        let Some(obj) = frame.as_object() else {
            return Err(format!("frame {frame_no}'s payload is not a JSON object: {}", truncate(payload)));
        };
        if !obj.contains_key("id") {
            notifications += 1;
            continue;
        }
        if obj.get("id") != Some(&json!(SSE_ID)) || !(obj.contains_key("result") || obj.contains_key("error")) {
            return Err(format!("frame {frame_no} is not the response to {SSE_ID}: {}", truncate(payload)));
        }
        answered = true;
    }
    if !answered {
        return Err(format!("the stream ended after {notifications} notification(s) without the final response frame"));
    }
    Ok(notifications)
}

fn truncate(s: &str) -> String {
    crate::report::truncate(s, 160)
}
