//! An aggregator's duties (§16.2, §16.3), certified from outside: for each case the suite
//! writes a registry of its own [probe engines](probe), starts the aggregator over it, sends one
//! `retrieve`, and reads both the answer and what each probe received. Any aggregator that reads
//! §16.1's `rcp.json` can be certified this way, whoever wrote it.

pub(crate) mod probe;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::config::{Aggregator, Target};
use crate::conn::{Conn, Env, Resp};
use crate::verdict::{Res, fail, hit_key, hits, pass, pass_note, verdict};

/// The `_meta.federation.path` entry the suite sends as the originating client.
const ORIGIN: &str = "rcp-conformance";

/// One probe engine of a case: its registry id, its hits (`id`, score, text) or the error it
/// fails with, and whether the registry marks it `required`.
struct Probe {
    id: &'static str,
    hits: &'static [(&'static str, f64, &'static str)],
    fail: Option<i64>,
    required: bool,
}

const fn answers(id: &'static str, hits: &'static [(&'static str, f64, &'static str)]) -> Probe {
    Probe { id, hits, fail: None, required: false }
}

const fn fails(id: &'static str, code: i64) -> Probe {
    Probe { id, hits: &[], fail: Some(code), required: false }
}

/// Two healthy probes sharing one document, `shared`, whose body `b` holds at greater length.
const A_HITS: &[(&str, f64, &str)] = &[("shared", 2.0, "short body"), ("a-only", 1.0, "alpha")];
const B_HITS: &[(&str, f64, &str)] =
    &[("shared", 3.0, "the longer and richer body of the shared document"), ("b-only", 1.5, "beta")];

/// What one case saw: the aggregator's answer and the `_meta` of each `retrieve` every probe
/// received, by probe id.
struct Seen {
    answer: Resp,
    received: Vec<(&'static str, Vec<Value>)>,
}

impl Seen {
    fn received_by(&self, id: &str) -> &[Value] {
        self.received.iter().find(|(p, _)| *p == id).map_or(&[], |(_, r)| r.as_slice())
    }
}

/// Runs one case: the aggregator over `probes`, one `retrieve` with `meta` as its `_meta`.
async fn case(env: &Env, agg: &Aggregator, probes: &[Probe], meta: Value) -> Result<Seen, String> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("rcp-conformance-federation-{}-{nanos:x}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let outcome = run_case(env, agg, probes, meta, &dir).await;
    // The directory holds only what this case wrote.
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

async fn run_case(env: &Env, agg: &Aggregator, probes: &[Probe], meta: Value, dir: &Path) -> Result<Seen, String> {
    let events = |id: &str| dir.join(format!("{id}.events"));
    let engines: Vec<Value> = probes
        .iter()
        .map(|p| {
            let mut command = agg.probe.clone();
            command.extend(["--name".into(), format!("probe-{}", p.id)]);
            command.extend(["--events".into(), events(p.id).to_string_lossy().into_owned()]);
            if let Some(code) = p.fail {
                command.extend(["--fail".into(), code.to_string()]);
            }
            for (id, score, text) in p.hits {
                command.extend(["--hit".into(), format!("{id}|{score}|{text}")]);
            }
            json!({"id": p.id, "transport": "stdio", "command": command, "required": p.required})
        })
        .collect();
    let registry = dir.join("rcp.json");
    std::fs::write(&registry, json!({"engines": engines}).to_string()).map_err(|e| format!("registry: {e}"))?;
    let registry = registry.to_string_lossy().into_owned();
    let mut command = agg.command.iter().map(|a| a.replace("{registry}", &registry));
    let program = command.next().ok_or("the aggregator command is empty")?;
    let env = Env { target: Target::Stdio { program, args: command.collect() }, ..env.clone() };
    let mut conn = Conn::open(&env).await?;
    let init = conn.call("initialize", json!({"protocolVersion": 1})).await;
    let answer = match init {
        Ok(r) if r.result().is_some() => conn.call("retrieve", json!({"query": "probe", "k": 10, "_meta": meta})).await,
        Ok(r) => Err(format!("the aggregator refused initialize: {}", r.brief())),
        Err(e) => Err(e),
    };
    conn.close().await;
    let answer = answer?;
    let received = probes
        .iter()
        .map(|p| {
            let lines = std::fs::read_to_string(events(p.id)).unwrap_or_default();
            (p.id, lines.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
        })
        .collect();
    Ok(Seen { answer, received })
}

fn fed_meta(depth: u64) -> Value {
    json!({"federation": {"depth": depth, "path": [ORIGIN]}})
}

pub(crate) async fn all_failed(env: &Env, agg: &Aggregator) -> Res {
    // Neither probe fails with -32010 itself: relaying one engine's error is not the answer.
    let seen = case(env, agg, &[fails("a", -32603), fails("b", -32011)], fed_meta(3)).await?;
    match seen.answer.code() {
        Some(-32010) => pass(),
        _ => fail(format!(
            "every engine failed, so the aggregator must answer -32010 (not an empty success); got {}",
            seen.answer.brief()
        )),
    }
}

/// The registry id of the failing probe of the partial cases: distinctive, so a note naming it
/// is not found by accident.
const DOWN: &str = "probe-down-7f";

pub(crate) async fn partial(env: &Env, agg: &Aggregator) -> Res {
    let seen = case(env, agg, &[fails(DOWN, -32010), answers("b", B_HITS)], fed_meta(3)).await?;
    let Ok(hs) = hits(&seen.answer) else {
        return fail(format!("one engine answered, so the federated query must succeed; got {}", seen.answer.brief()));
    };
    verdict(hs.iter().any(|h| hit_key(h) == "b-only"), || format!("the answering engine's hits are missing: {hs:?}"))
}

pub(crate) async fn partial_noted(env: &Env, agg: &Aggregator) -> Res {
    let seen = case(env, agg, &[fails(DOWN, -32010), answers("b", B_HITS)], fed_meta(3)).await?;
    let listed = |pointer: &str| -> Vec<String> {
        let items = seen.answer.result().and_then(|r| r.pointer(pointer)).and_then(Value::as_array);
        items.into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    let in_notes = listed("/usage/notes").iter().any(|n| n.contains(DOWN));
    let in_degraded = listed("/_meta/degraded").iter().any(|d| d == DOWN);
    match (in_notes, in_degraded) {
        (true, _) => pass(),
        (false, true) => pass_note("the failed engine is in _meta.degraded but not in usage.notes"),
        _ => fail(format!("the failed engine should be recorded in usage.notes; got {}", seen.answer.brief())),
    }
}

pub(crate) async fn required(env: &Env, agg: &Aggregator) -> Res {
    let probes = [Probe { required: true, ..fails("a", -32011) }, answers("b", B_HITS)];
    let seen = case(env, agg, &probes, fed_meta(3)).await?;
    match seen.answer.code() {
        Some(-32011) => pass(),
        _ => fail(format!(
            "a required engine failed with -32011: the whole query must fail with that code; got {}",
            seen.answer.brief()
        )),
    }
}

pub(crate) async fn hop_forwarded(env: &Env, agg: &Aggregator) -> Res {
    let seen = case(env, agg, &[answers("a", A_HITS)], fed_meta(2)).await?;
    let Some(meta) = seen.received_by("a").first() else {
        return fail(format!("with depth 2 the request must reach the engine; it did not ({})", seen.answer.brief()));
    };
    let fed = meta.get("federation");
    let depth = fed.and_then(|f| f.get("depth")).and_then(Value::as_u64);
    let path: Vec<&str> = fed
        .and_then(|f| f.get("path"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let appended = path.len() == 2 && path[0] == ORIGIN && !path[1].is_empty();
    verdict(depth == Some(1) && appended, || {
        format!(
            "sent depth 2, path [\"{ORIGIN}\"]: the engine must receive depth 1 and the path with the aggregator's identity appended; it received _meta.federation = {}",
            fed.map_or("(none)".into(), Value::to_string)
        )
    })
}

pub(crate) async fn hop_exhausted(env: &Env, agg: &Aggregator) -> Res {
    let seen = case(env, agg, &[answers("a", A_HITS)], fed_meta(0)).await?;
    if !seen.received_by("a").is_empty() {
        return fail("a request arriving with depth 0 was forwarded to an engine");
    }
    verdict(seen.answer.result().is_some(), || {
        format!(
            "a request arriving with depth 0 is answered from the aggregator's own index; got {}",
            seen.answer.brief()
        )
    })
}

pub(crate) async fn deadline(env: &Env, agg: &Aggregator) -> Res {
    let mut meta = fed_meta(3);
    meta["deadlineMs"] = json!(8_000);
    let seen = case(env, agg, &[answers("a", A_HITS)], meta).await?;
    let Some(got) = seen.received_by("a").first() else {
        return fail(format!("the request did not reach the engine ({})", seen.answer.brief()));
    };
    match got.get("deadlineMs").and_then(Value::as_u64) {
        Some(ms) if ms < 8_000 => pass(),
        Some(ms) => fail(format!("sent deadlineMs 8000; the engine received {ms}, not a strictly smaller value")),
        None => fail("sent deadlineMs 8000; the engine received none"),
    }
}

/// The fused answer of the two healthy probes.
async fn fused(env: &Env, agg: &Aggregator) -> Result<Vec<Value>, String> {
    let seen = case(env, agg, &[answers("a", A_HITS), answers("b", B_HITS)], fed_meta(3)).await?;
    hits(&seen.answer).map_err(|_| format!("two engines answered, yet the query failed: {}", seen.answer.brief()))
}

pub(crate) async fn dedup(env: &Env, agg: &Aggregator) -> Res {
    let hs = fused(env, agg).await?;
    let shared = hs.iter().filter(|h| hit_key(h) == "shared").count();
    verdict(shared == 1, || {
        format!("document 'shared', returned by both engines, appears {shared} times in the fused list")
    })
}

pub(crate) async fn richest_body(env: &Env, agg: &Aggregator) -> Res {
    let hs = fused(env, agg).await?;
    let text = hs.iter().find(|h| hit_key(h) == "shared").and_then(|h| h.get("text")).and_then(Value::as_str);
    verdict(text == Some(B_HITS[0].2), || format!("the fused 'shared' should keep the longest body; it has {text:?}"))
}

pub(crate) async fn origin(env: &Env, agg: &Aggregator) -> Res {
    let hs = fused(env, agg).await?;
    let missing: Vec<String> =
        hs.iter().filter(|h| h.pointer("/meta/engine").is_none_or(|e| !e.is_string())).map(hit_key).collect();
    verdict(missing.is_empty(), || format!("fused hits without meta.engine: {missing:?}"))
}
