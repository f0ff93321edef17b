//! Streaming progress (§9), log notifications (§17.1) and pagination (§10).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::conn::Conn;
use crate::session::{Main, init_params};
use crate::verdict::{Outcome, Res, fail, hit_key, hits, pass_note, show, skip, verdict};

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
fn workload(m: &Main) -> Option<(&'static str, Value)> {
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

/// How many pages the pagination check follows: enough to exercise cursors, bounded so the
/// check costs the same on a 6-document fixture and on a million-document corpus.
const PAGES: usize = 5;

/// The hits of one page and the `nextCursor` it returned (missing or empty: the last page, §10).
async fn page(m: &mut Main, k: u64, cursor: Option<&Value>) -> Result<(Vec<String>, Option<Value>), String> {
    let extra = cursor.map_or(json!({}), |c| json!({"cursor": c}));
    let r = m.broad_hits(k, extra).await?;
    let hs = hits(&r)?;
    if hs.len() as u64 > k {
        return Err(format!("a page has {} hits for k={k} (§7.7: never more than k)", hs.len()));
    }
    let next =
        r.result().and_then(|x| x.get("nextCursor")).filter(|c| c.as_str().is_none_or(|s| !s.is_empty())).cloned();
    Ok((hs.iter().map(hit_key).collect(), next))
}

/// Pagination (§10) on a corpus of any size: follows at most [`PAGES`] pages and checks that
/// pages are disjoint, that a cursor is stable (the same cursor twice yields the same page), and
/// that the pages, taken together, are the same hits as one unpaged request for as many.
pub(crate) async fn pagination(m: &mut Main) -> Res {
    if !m.caps.has("pagination") || !m.caps.has("retrieve") {
        return skip("pagination not advertised");
    }
    let page_k = m.k(10);
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut exhausted = false;
    for n in 0..PAGES {
        let (ids, next) = page(m, page_k, cursor.as_ref()).await?;
        if let Some(c) = &cursor {
            let (again, _) = page(m, page_k, Some(c)).await?;
            if again != ids {
                return fail(format!("the same cursor {} gave two different pages: {ids:?} then {again:?}", show(c)));
            }
        }
        pages.push(ids);
        if next.is_none() {
            exhausted = true;
            break;
        }
        if n + 1 < PAGES {
            cursor = next;
        }
    }
    let ids: Vec<&String> = pages.iter().flatten().collect();
    let mut seen = HashSet::new();
    if let Some(dup) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return fail(format!("hit {dup} appears on more than one page"));
    }
    if pages.len() < 2 {
        return skip(format!("the broad query has only {} hit(s): a second page could not be exercised", ids.len()));
    }
    // Order consistency: the pages are the top of the ranking, as one request would return it.
    let total = ids.len() as u64;
    let big_k = m.k(total);
    let big: Vec<String> = hits(&m.broad_hits(big_k, json!({})).await?)?.iter().map(hit_key).collect();
    let expected: HashSet<&str> = ids.iter().take(big.len()).map(|s| s.as_str()).collect();
    let got: HashSet<&str> = big.iter().map(String::as_str).collect();
    let how = if exhausted { "every page" } else { "the first pages" };
    verdict(got == expected, || {
        let missing: Vec<&&str> = expected.difference(&got).take(3).collect();
        let extra: Vec<&&str> = got.difference(&expected).take(3).collect();
        format!(
            "{how} ({} hits) and one request at k={big_k} ({} hits) disagree: only paged {missing:?}, only unpaged {extra:?}",
            ids.len(),
            big.len()
        )
    })
    .map(|o| match o {
        Outcome::Pass(_) => Outcome::Pass(format!("{} pages of up to {page_k} hits ({how})", pages.len())),
        other => other,
    })
}
