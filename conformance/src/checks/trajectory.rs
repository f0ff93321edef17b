//! Agentic sessions (§7.7.3): a `sessionId` is a hint every `retrieve` server answers through,
//! whether it advertises `session` or not; a server advertising `session.dedup` may leave out of
//! a trajectory's later answers the hits it already returned, and a miss of that MAY is reported
//! as information, never as a failure.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::conn::Resp;
use crate::session::Main;
use crate::verdict::{Res, fail, hit_key, hits, pass_note, skip, warn};

const NO_RETRIEVE: &str = "retrieve not advertised";

/// A session id no earlier run can have used, so the trajectory it names has returned nothing
/// yet (servers may share trajectories across connections, §7.7.3: the id is the client's).
pub(crate) fn fresh_session_id(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("rcp-conformance-{tag}-{}-{nanos:x}", std::process::id())
}

/// The hit ids of an answer, in rank order.
fn ids(hs: &[Value]) -> Vec<String> {
    hs.iter().map(hit_key).collect()
}

/// The hits of an answer to a retrieve carrying a `sessionId`, or why it was not one.
fn answered(r: &Resp, k: u64, call: &str) -> Result<Vec<Value>, String> {
    let hs = hits(r).map_err(|_| {
        format!(
            "the {call} retrieve carrying a sessionId must still be answered (a hint, never a requirement), got {}",
            r.brief()
        )
    })?;
    if hs.len() as u64 > k {
        return Err(format!("the {call} retrieve carrying a sessionId returned {} hits for k={k}", hs.len()));
    }
    Ok(hs)
}

/// A fresh `sessionId`, then the same one again, are both answered like any retrieve; the first
/// answer, from a trajectory that has returned nothing yet, is compared with the same request
/// without `sessionId` (a difference is noted, not failed: the server may not be deterministic).
pub(crate) async fn hint(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let k = m.k(3);
    let plain = hits(&m.broad_hits(k, json!({})).await?)?;
    let id = fresh_session_id("hint");
    let r = m.broad_hits(k, json!({"sessionId": id})).await?;
    if r.code() == Some(-32015) && m.caps.has("session") {
        return warn(
            "a fresh, client-chosen sessionId was refused with -32015 (NotFound): §12 lists sessionId under \
             NotFound, but §7.7.3 makes it a hint, never a requirement, and a trajectory starts with an id \
             the server has not seen",
        );
    }
    let first = match answered(&r, k, "first") {
        Ok(hs) => hs,
        Err(why) => return fail(why),
    };
    let r = m.broad_hits(k, json!({"sessionId": id})).await?;
    if let Err(why) = answered(&r, k, "second") {
        return fail(why);
    }
    let advertised = if m.caps.has("session") { "session advertised" } else { "session not advertised" };
    if ids(&first) == ids(&plain) {
        pass_note(format!("{advertised}; a fresh sessionId was answered as the request without it"))
    } else {
        pass_note(format!(
            "{advertised}; answered, but the first hits of a fresh trajectory differ from the same request without \
             sessionId ({:?} vs {:?})",
            ids(&first),
            ids(&plain)
        ))
    }
}

/// Two retrieves of the broad query in one fresh trajectory: with `session.dedup` advertised,
/// the second returns none of the first's hits.
pub(crate) async fn dedup(m: &mut Main) -> Res {
    if !m.caps.flag(&["session", "dedup"]) {
        return skip("session.dedup not advertised");
    }
    let k = m.k(3);
    let id = fresh_session_id("dedup");
    let first = hits(&m.broad_hits(k, json!({"sessionId": id})).await?)?;
    if first.is_empty() {
        return skip("the broad query returned no hits to deduplicate (use --query to pick one)");
    }
    let second = hits(&m.broad_hits(k, json!({"sessionId": id})).await?)?;
    let seen: HashSet<String> = ids(&first).into_iter().collect();
    let repeated: Vec<String> = ids(&second).into_iter().filter(|h| seen.contains(h)).collect();
    if repeated.is_empty() {
        return pass_note(format!("{} hits, then {} new ones in the same trajectory", first.len(), second.len()));
    }
    fail(format!(
        "session.dedup is advertised, but the second retrieve of one trajectory returned {} of the first's hits again \
         ({})",
        repeated.len(),
        repeated.join(", ")
    ))
}
