//! Streaming progress (§9), log notifications (§17.1) and pagination (§10).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Main, Res, fail, hit_key, hits, init_params, pass_note, show, skip, verdict};
use crate::conn::Conn;

fn frames_of(conn: &Conn, from: usize, method: &str) -> Vec<Value> {
    frames_in(conn, from, conn.notifications.len(), method)
}

fn frames_in(conn: &Conn, from: usize, to: usize, method: &str) -> Vec<Value> {
    conn.notifications[from..to]
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
    let from = m.conn.notifications.len();
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
    let from = m.conn.notifications.len();
    m.conn.call_streaming(method, params).await?.ok()?;
    let mid = m.conn.notifications.len();
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
    let from = m.conn.notifications.len();
    m.conn.call_streaming(method, params).await?.ok()?;
    m.conn.drain(Duration::from_millis(50)).await;
    let logs = frames_of(&m.conn, from, "notifications/log");
    verdict(logs.is_empty(), || format!("{} log frame(s) without opt-in: {}", logs.len(), show(&logs[0])))
}

pub(crate) async fn log_opt_in(m: &mut Main) -> Res {
    if !m.caps.has("log") {
        return skip("log not advertised");
    }
    if m.stateless {
        return skip("stateless HTTP: logs can only reach the client inside an SSE stream of a session it opted in");
    }
    let Some((method, params)) = workload(m) else { return skip("no gated method to run") };
    let mut c = Conn::open(&m.env).await?;
    let mut init = init_params(1);
    init["capabilities"] = json!({"log": {}});
    init["_meta"] = json!({"logLevel": "debug"});
    c.call("initialize", init).await?.ok()?;
    c.call_streaming(method, params).await?.ok()?;
    c.drain(Duration::from_millis(100)).await;
    let logs = frames_of(&c, 0, "notifications/log");
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

pub(crate) async fn pagination(m: &mut Main) -> Res {
    if !m.caps.has("pagination") || !m.caps.has("retrieve") {
        return skip("pagination not advertised");
    }
    let page_k = m.k(2);
    let mut ids: Vec<String> = Vec::new();
    let mut cursor: Option<Value> = None;
    for page in 0..200 {
        let extra = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let r = m.broad_hits(page_k, extra).await?;
        let hs = hits(&r)?;
        if hs.len() as u64 > page_k {
            return fail(format!("page {page} has {} hits for k={page_k}", hs.len()));
        }
        ids.extend(hs.iter().map(hit_key));
        cursor =
            r.result().and_then(|x| x.get("nextCursor")).filter(|c| c.as_str().is_some_and(|s| !s.is_empty())).cloned();
        if cursor.is_none() {
            break;
        }
        if page == 199 {
            return fail("still a nextCursor after 200 pages");
        }
    }
    let mut seen = HashSet::new();
    if let Some(dup) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return fail(format!("hit {dup} appears on more than one page"));
    }
    if ids.len() as u64 <= page_k {
        return skip(format!("the broad query has only {} hit(s): a second page could not be exercised", ids.len()));
    }
    let max_k = m.caps.u64_at(&["retrieve", "maxK"]);
    let total = ids.len() as u64;
    let big_k = m.k(total + 1);
    let big: Vec<String> = hits(&m.broad_hits(big_k, json!({})).await?)?.iter().map(hit_key).collect();
    let expected: HashSet<&str> = if max_k.is_some_and(|mk| total >= mk) {
        ids.iter().take(big.len()).map(String::as_str).collect()
    } else {
        ids.iter().map(String::as_str).collect()
    };
    let got: HashSet<&str> = big.iter().map(String::as_str).collect();
    verdict(got == expected, || {
        let missing: Vec<&&str> = expected.difference(&got).take(3).collect();
        let extra: Vec<&&str> = got.difference(&expected).take(3).collect();
        format!(
            "the pages ({} hits) and one request at k={big_k} ({} hits) disagree: only paged {missing:?}, only unpaged {extra:?}",
            ids.len(),
            big.len()
        )
    })
}
