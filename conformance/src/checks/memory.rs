//! `memory/build`, `memory/recall` (§7.17) and `feedback` (§7.16): the result each method
//! defines, the advertised `memory.scopes`, and a `sessionId` carried on `feedback` (§7.7.3).
//! The memory is built over a few inline documents, so a server with an empty index answers too.

use serde_json::{Value, json};

use super::trajectory::fresh_session_id;
use crate::session::Main;
use crate::verdict::{Res, expect_option_unsupported, fail, hit_key, pass_note, show, skip, warn};

const DOCS: [(&str, &str); 3] = [
    ("conformance-memory-1", "Lift on a wing grows with the angle of attack until the flow separates."),
    ("conformance-memory-2", "Boundary layers thicken along a flat plate as the flow slows near the wall."),
    ("conformance-memory-3", "Heat transfer in turbulent pipe flow follows the Dittus-Boelter correlation."),
];

/// The `memory/build` request every memory check sends.
fn build_params() -> Value {
    json!({"documents": DOCS.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>()})
}

/// The memory id of the answer to [`build_params`], or why there is none.
async fn built(m: &mut Main) -> Result<Result<String, String>, String> {
    let r = m.probe("memory/build", build_params()).await?;
    let Some(res) = r.result() else { return Ok(Err(format!("memory/build failed: {}", r.brief()))) };
    Ok(match res.get("memoryId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(format!("memory/build must answer with a memoryId string, got {}", show(res))),
    })
}

/// `memory/build` over inline documents answers `{memoryId, tokens?}`.
pub(crate) async fn build_shape(m: &mut Main) -> Res {
    if !m.caps.has("memory") {
        return skip("memory not advertised");
    }
    let id = match built(m).await? {
        Ok(id) => id,
        Err(why) => return fail(why),
    };
    let r = m.probe("memory/build", build_params()).await?;
    let tokens = r.result().and_then(|x| x.get("tokens")).cloned();
    match tokens {
        Some(t) if !t.is_u64() => fail(format!("tokens must be a non-negative integer, got {}", show(&t))),
        Some(t) => pass_note(format!("memoryId {id}, {t} tokens")),
        None => pass_note(format!("memoryId {id}")),
    }
}

/// `memory/recall` from the memory just built answers `{clues: [...], hits?}`.
pub(crate) async fn recall_shape(m: &mut Main) -> Res {
    if !m.caps.has("memory") {
        return skip("memory not advertised");
    }
    let id = match built(m).await? {
        Ok(id) => id,
        Err(why) => return skip(format!("no memory to recall from ({why}); memory.build-shape reports it")),
    };
    let r = m.conn.call("memory/recall", json!({"query": "wing lift flow", "memoryId": id, "n": 2})).await?;
    let res = r.ok()?;
    let Some(clues) = res.get("clues").and_then(Value::as_array) else {
        return fail(format!("memory/recall must answer with a clues array, got {}", show(res)));
    };
    if let Some(bad) = clues.iter().find(|c| !c.is_object()) {
        return fail(format!("a clue is not an object: {}", show(bad)));
    }
    if let Some(h) = res.get("hits")
        && !h.is_array()
    {
        return fail(format!("hits, when present, is an array of Hit: {}", show(h)));
    }
    let seeds: Vec<String> =
        clues.iter().filter_map(|c| c.get("seedIds").and_then(Value::as_array)).flatten().map(hit_key).collect();
    pass_note(format!(
        "{} clues (n = 2 asked); seeds: {}",
        clues.len(),
        if seeds.is_empty() { "none".into() } else { seeds.join(", ") }
    ))
}

/// A scope outside `memory.scopes` is refused with -32005.
pub(crate) async fn scope_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("memory") {
        return skip("memory not advertised");
    }
    let scopes = m.caps.strings(&["memory", "scopes"]).unwrap_or_default();
    let Some(scope) = ["global", "session"].into_iter().find(|s| !scopes.iter().any(|x| x == s)) else {
        return skip("both scopes are advertised");
    };
    let mut params = build_params();
    if let Some(p) = params.as_object_mut() {
        p.insert("scope".into(), json!(scope));
    }
    let r = m.conn.call("memory/build", params).await?;
    expect_option_unsupported(&r)
}

/// The `feedback` request every feedback check sends: two harmless signals (no integrity flag,
/// so nothing is quarantined) about hits of the broad query when there are any.
async fn feedback_params(m: &mut Main) -> Result<Value, String> {
    let mut ids: Vec<String> = m.baseline.iter().take(2).map(hit_key).collect();
    if ids.len() < 2 && m.caps.has("retrieve") {
        let k = m.k(2);
        if let Some(hs) =
            m.broad_hits(k, json!({})).await?.result().and_then(|r| r.get("hits")).and_then(Value::as_array)
        {
            ids = hs.iter().take(2).map(hit_key).collect();
        }
    }
    while ids.len() < 2 {
        ids.push(format!("conformance-hit-{}", ids.len() + 1));
    }
    Ok(json!({"query": m.broad, "signals": [
        {"hitId": ids[0], "used": true, "helpful": true, "reward": 0.5},
        {"hitId": ids[1], "used": false},
    ]}))
}

/// `feedback` answers `{accepted}`: an integer no larger than the number of signals sent.
pub(crate) async fn accepted(m: &mut Main) -> Res {
    if !m.caps.has("feedback") {
        return skip("feedback not advertised");
    }
    let params = feedback_params(m).await?;
    let r = m.conn.call("feedback", params).await?;
    let res = r.ok()?;
    match res.get("accepted").and_then(Value::as_u64) {
        Some(n) if n <= 2 => pass_note(format!("accepted {n} of 2 signals")),
        Some(n) => fail(format!("accepted {n} signals, but only 2 were sent")),
        None => fail(format!("feedback must answer with accepted, a non-negative integer; got {}", show(res))),
    }
}

/// A `feedback` call carrying a fresh `sessionId` is answered.
pub(crate) async fn session_hint(m: &mut Main) -> Res {
    if !m.caps.has("feedback") {
        return skip("feedback not advertised");
    }
    let mut params = feedback_params(m).await?;
    if let Some(p) = params.as_object_mut() {
        p.insert("sessionId".into(), json!(fresh_session_id("feedback-hint")));
    }
    let r = m.conn.call("feedback", params).await?;
    if r.result().is_some() {
        return pass_note("answered");
    }
    if r.code() == Some(-32015) {
        return warn("a fresh sessionId on feedback was refused with -32015 (NotFound): §7.7.3 makes it a hint");
    }
    fail(format!(
        "feedback carrying a sessionId must still be answered (a hint, never a requirement), got {}",
        r.brief()
    ))
}
