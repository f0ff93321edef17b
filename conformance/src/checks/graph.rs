//! `graph` (§7.9) beyond gating: each advertised op answers with the shape the schema requires
//! of it, the fields the prose lists for it, `neighbors` edges that join returned nodes, and a
//! `sessionId` carried on `graph` (§7.7.3). Every op is asked the same request wherever it is
//! asked ([`op_params`]).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::trajectory::fresh_session_id;
use crate::conn::Resp;
use crate::session::Main;
use crate::verdict::{Res, fail, hit_key, pass, pass_note, show, skip, warn};

/// Every op of §7.9.
pub(crate) const GRAPH_OPS: [&str; 5] = ["local", "global", "drift", "communities", "neighbors"];

/// The key the schema's `GraphResult` branch requires of each op's answer.
fn required_key(op: &str) -> &'static str {
    match op {
        "local" | "drift" => "hits",
        "global" | "communities" => "communities",
        _ => "nodes",
    }
}

/// The advertised ops the suite knows, in the order of §7.9.
fn advertised(m: &Main) -> Vec<&'static str> {
    let ops = m.caps.strings(&["graph", "ops"]).unwrap_or_default();
    GRAPH_OPS.into_iter().filter(|op| ops.iter().any(|o| o == op)).collect()
}

/// Where a `neighbors` seed came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SeedFrom {
    /// A hit id of the server's own `local`/`drift` answer: a node of its graph.
    Graph,
    /// A hit id of `retrieve`: a node only if the graph is over the retrieval corpus.
    Retrieve,
    /// No seed found: the query alone.
    Missing,
    /// The op takes no seed.
    NotNeeded,
}

/// A node id to start `neighbors` from: the first hit of the server's own `local` (or `drift`)
/// answer, else of the broad `retrieve`.
async fn seed(m: &mut Main) -> Result<(Option<String>, SeedFrom), String> {
    for op in ["local", "drift"] {
        if advertised(m).contains(&op) {
            let r = m.conn.call("graph", base_params(m, op)).await?;
            if let Some(h) = r.result().and_then(|x| x.get("hits")).and_then(Value::as_array).and_then(|h| h.first()) {
                return Ok((Some(hit_key(h)), SeedFrom::Graph));
            }
        }
    }
    if m.caps.has("retrieve") {
        let k = m.k(3);
        let r = m.broad_hits(k, json!({})).await?;
        if let Some(h) = r.result().and_then(|x| x.get("hits")).and_then(Value::as_array).and_then(|h| h.first()) {
            return Ok((Some(hit_key(h)), SeedFrom::Retrieve));
        }
    }
    Ok((None, SeedFrom::Missing))
}

fn base_params(m: &Main, op: &str) -> Value {
    json!({"op": op, "query": m.broad, "k": 3})
}

/// The request every check sends for `op`: the broad query and `k: 3`; `neighbors` also gets
/// a seed found by [`seed`].
pub(crate) async fn op_params(m: &mut Main, op: &str) -> Result<(Value, SeedFrom), String> {
    let mut p = base_params(m, op);
    if op != "neighbors" {
        return Ok((p, SeedFrom::NotNeeded));
    }
    let (id, from) = seed(m).await?;
    if let (Some(id), Some(obj)) = (id, p.as_object_mut()) {
        obj.insert("seedIds".into(), json!([id]));
        obj.insert("hops".into(), json!(1));
    }
    Ok((p, from))
}

/// `op`'s answer to [`op_params`]. Each check asks anew: the checks reading one op's answer
/// judge different properties of it, so none shares another's verdict.
pub(crate) async fn ask(m: &mut Main, op: &str) -> Result<(Resp, SeedFrom), String> {
    let (params, from) = op_params(m, op).await?;
    Ok((m.conn.call("graph", params).await?, from))
}

/// Whether an error answer to `neighbors` is the server refusing a seed the suite guessed from
/// `retrieve` (its graph may not be over the retrieval corpus), or the lack of any seed.
pub(crate) fn guessed_seed_missed(r: &Resp, from: SeedFrom) -> bool {
    matches!(from, SeedFrom::Retrieve | SeedFrom::Missing) && matches!(r.code(), Some(-32015 | -32602))
}

/// Each advertised op's answer carries the key its schema branch requires.
pub(crate) async fn result_shape(m: &mut Main) -> Res {
    let ops = advertised(m);
    if ops.is_empty() {
        return skip("no graph op advertised");
    }
    let mut noted = Vec::new();
    for op in ops {
        let (r, from) = ask(m, op).await?;
        let Some(res) = r.result() else {
            if guessed_seed_missed(&r, from) {
                noted.push(format!("{op}: no seed of the graph's own was found ({})", r.brief()));
                continue;
            }
            return skip(format!("op '{op}' did not answer ({}); graph.ops-served reports it", r.brief()));
        };
        let key = required_key(op);
        if !res.get(key).is_some_and(Value::is_array) {
            return fail(format!("op '{op}' must answer with a {key} array (§7.9), got {}", show(res)));
        }
    }
    if noted.is_empty() { pass() } else { pass_note(noted.join("; ")) }
}

/// What the prose of §7.9 lists for `op` beyond the schema's required key, missing from `res`.
fn prose_gaps(op: &str, res: &Value) -> Vec<String> {
    let mut gaps = Vec::new();
    let array = |k: &str| res.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    match op {
        "global" if !res.get("summary").is_some_and(Value::is_string) => gaps.push("global: no summary".into()),
        "drift" if !res.get("followups").is_some_and(Value::is_array) => gaps.push("drift: no followups".into()),
        "neighbors" if !res.get("edges").is_some_and(Value::is_array) => gaps.push("neighbors: no edges".into()),
        _ => {}
    }
    if op == "communities" {
        for c in array("communities") {
            if c.get("level").is_none() || c.get("summary").is_none() {
                gaps.push(format!("communities: {} lacks level or summary", show(&c)));
                break;
            }
        }
    }
    if op == "global" {
        for c in array("communities") {
            if c.get("summary").is_none() || c.get("score").is_none() {
                gaps.push(format!("global: community {} lacks summary or score", show(&c)));
                break;
            }
        }
    }
    gaps
}

/// Each advertised op's answer has the fields the prose lists for it (the schema requires less:
/// an interop probe, never a failure).
pub(crate) async fn result_fields(m: &mut Main) -> Res {
    let ops = advertised(m);
    if ops.is_empty() {
        return skip("no graph op advertised");
    }
    let mut gaps = Vec::new();
    for op in &ops {
        if let (r, _) = ask(m, op).await?
            && let Some(res) = r.result()
        {
            gaps.extend(prose_gaps(op, res));
        }
    }
    if gaps.is_empty() {
        pass_note(format!("ops: {}", ops.join(", ")))
    } else {
        fail(format!("fields the prose of §7.9 lists are missing: {}", gaps.join("; ")))
    }
}

/// `neighbors`: every edge joins two of the returned nodes.
pub(crate) async fn neighbors_edges(m: &mut Main) -> Res {
    if !advertised(m).contains(&"neighbors") {
        return skip("neighbors not advertised");
    }
    let (r, from) = ask(m, "neighbors").await?;
    let Some(res) = r.result() else {
        return skip(format!("neighbors did not answer ({}; seed: {from:?})", r.brief()));
    };
    let nodes: HashSet<String> =
        res.get("nodes").and_then(Value::as_array).map(|n| n.iter().map(hit_key).collect()).unwrap_or_default();
    let edges = res.get("edges").and_then(Value::as_array).cloned().unwrap_or_default();
    let key = |v: Option<&Value>| v.map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned));
    let dangling: Vec<String> = edges
        .iter()
        .filter(|e| ![e.get("src"), e.get("dst")].into_iter().all(|end| key(end).is_some_and(|k| nodes.contains(&k))))
        .map(show)
        .collect();
    if dangling.is_empty() {
        pass_note(format!("{} nodes, {} edges, each between returned nodes", nodes.len(), edges.len()))
    } else {
        fail(format!(
            "{} of {} edges name a node the answer does not list (the spec does not require it; clients drawing \
             the graph need it): {}",
            dangling.len(),
            edges.len(),
            dangling.into_iter().take(3).collect::<Vec<_>>().join(", ")
        ))
    }
}

/// Over a corpus `retrieve` finds documents in, the graph ops answer with something: an
/// empty answer is valid (§7.9), but a graph with no node over a non-empty corpus gives a client
/// nothing to walk, and is how a graph that was never built looks (an interop probe: a warning,
/// never a failure). Ops that refuse are judged by `graph.ops-served`.
pub(crate) async fn non_empty(m: &mut Main) -> Res {
    let ops = advertised(m);
    if ops.is_empty() {
        return skip("no graph op advertised");
    }
    if !m.caps.has("retrieve") {
        return skip("retrieve not advertised: nothing tells whether the corpus is empty");
    }
    let k = m.k(3);
    let r = m.broad_hits(k, json!({})).await?;
    if r.result().and_then(|x| x.get("hits")).and_then(Value::as_array).is_none_or(Vec::is_empty) {
        return skip("retrieve finds nothing for the broad query: an empty graph may be right");
    }
    let (mut judged, mut empty) = (Vec::new(), Vec::new());
    for op in ops {
        let (r, _) = ask(m, op).await?;
        let Some(res) = r.result() else { continue };
        let key = required_key(op);
        let n = res.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        judged.push(format!("{op}: {n} {key}"));
        if n == 0 {
            empty.push(op);
        }
    }
    match (judged.is_empty(), empty.is_empty()) {
        (true, _) => skip("no graph op answered"),
        (false, true) => pass_note(judged.join(", ")),
        (false, false) => warn(format!(
            "retrieve finds documents for the broad query, but {} answered empty ({}): is the graph built over \
             the corpus?",
            empty.join(", "),
            judged.join(", ")
        )),
    }
}

/// The op a trajectory check uses: one returning hits (`local`, `drift`), else the first.
fn trajectory_op(m: &Main) -> Option<&'static str> {
    let ops = advertised(m);
    ops.iter().copied().find(|o| matches!(*o, "local" | "drift")).or_else(|| ops.first().copied())
}

/// A `graph` call carrying a fresh `sessionId`, then the same one again, is answered.
pub(crate) async fn session_hint(m: &mut Main) -> Res {
    let Some(op) = trajectory_op(m) else { return skip("no graph op advertised") };
    let (mut params, from) = op_params(m, op).await?;
    let id = fresh_session_id("graph-hint");
    if let Some(p) = params.as_object_mut() {
        p.insert("sessionId".into(), json!(id));
    }
    for call in ["first", "second"] {
        let r = m.conn.call("graph", params.clone()).await?;
        if r.result().is_none() && !guessed_seed_missed(&r, from) {
            if r.code() == Some(-32015) {
                return warn(format!(
                    "the {call} graph call with a fresh sessionId was refused with -32015 (NotFound): §7.7.3 makes \
                     it a hint, never a requirement"
                ));
            }
            return fail(format!(
                "the {call} '{op}' call carrying a sessionId must still be answered (a hint, never a requirement), got {}",
                r.brief()
            ));
        }
    }
    pass_note(format!("op '{op}' answered twice in one trajectory"))
}

/// With `session.dedup`, two `local`/`drift` calls in one fresh trajectory return no hit twice.
pub(crate) async fn session_dedup(m: &mut Main) -> Res {
    if !m.caps.flag(&["session", "dedup"]) {
        return skip("session.dedup not advertised");
    }
    let Some(op) = trajectory_op(m).filter(|o| matches!(*o, "local" | "drift")) else {
        return skip("neither local nor drift is advertised");
    };
    let (mut params, _) = op_params(m, op).await?;
    if let Some(p) = params.as_object_mut() {
        p.insert("sessionId".into(), json!(fresh_session_id("graph-dedup")));
    }
    let mut seen: Vec<Vec<String>> = Vec::new();
    for _ in 0..2 {
        let r = m.conn.call("graph", params.clone()).await?;
        let hits = r.result().and_then(|x| x.get("hits")).and_then(Value::as_array).cloned();
        let Some(hits) = hits else { return skip(format!("'{op}' answered without hits: {}", r.brief())) };
        seen.push(hits.iter().map(hit_key).collect());
    }
    if seen[0].is_empty() {
        return skip(format!("'{op}' returned no hits to deduplicate"));
    }
    let again: Vec<&String> = seen[1].iter().filter(|h| seen[0].contains(h)).collect();
    if again.is_empty() {
        pass_note(format!("{} hits, then {} new ones in the same trajectory", seen[0].len(), seen[1].len()))
    } else {
        fail(format!(
            "session.dedup is advertised, but the second '{op}' call of one trajectory returned {} of the first's \
             hits again",
            again.len()
        ))
    }
}
