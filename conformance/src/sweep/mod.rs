//! The malformed-params sweep (§14.1: "validate params and return `-32602` on malformed input
//! instead of crashing"), derived from the schema rather than written check by check.
//!
//! For `initialize` and every method the server advertises, a valid call is sent first; then,
//! for every path its params schema types ([`mutate`]), one call per forbidden value with that
//! value at that path and everything else valid. A conformant answer is an error `-32602` (or
//! `-32005` where the path names an option, `-32002` for a `protocolVersion` below 1), and the
//! server still answers `ping` afterwards. The referee's rule holds: a path the server coerces,
//! ignores, answers with another code or dies on is one defect, reported once with the first
//! request that showed it and its answer; the other mutations of that path only add to its count.
//!
//! `error.data.field` naming the path is a SHOULD (§12.1 lists it among the conventional fields a
//! server "SHOULD use", all optional), so a `-32602` without it, or naming another path, is a
//! warning on the method's summary, never a failure.
//!
//! Deterministic by default: the same mutations in the same order on every run. A seed
//! ([`SweepOptions::seed`]) adds more values of each forbidden type and shuffles the order; the
//! budget ([`SweepBudget`]) bounds the requests (or seconds) the whole sweep may spend.

pub(crate) mod mutate;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::config::{SweepBudget, SweepOptions};
use crate::conn::{Conn, Env, Resp};
use crate::report::truncate;
use crate::session::{Caps, Main, filter_value, init_params};
use mutate::{Mutation, Walker};

/// What the sweep has spent so far, across methods.
pub(crate) struct Spend {
    opts: SweepOptions,
    started: Instant,
    requests: u64,
}

impl Spend {
    pub(crate) fn new(opts: SweepOptions) -> Self {
        Spend { opts, started: Instant::now(), requests: 0 }
    }

    /// Whether one more mutation (a call and its ping) fits the budget.
    fn room(&self) -> bool {
        match self.opts.budget {
            SweepBudget::Requests(n) => self.requests + 2 <= n,
            SweepBudget::Time(d) => self.started.elapsed() < d,
        }
    }
}

/// One defective path: the first request that showed it and its answer.
#[derive(Debug, Clone)]
pub(crate) struct Defect {
    /// The path with array positions folded (`filter.and[].field`).
    pub key: String,
    /// The first offending request frame.
    pub request: Value,
    /// What was put at the path.
    pub kind: String,
    /// What the server did.
    pub answer: String,
    /// Other mutations of the same path with a defective answer.
    pub also: usize,
}

/// The sweep of one method.
#[derive(Debug, Default)]
pub(crate) struct MethodSweep {
    pub method: &'static str,
    /// Malformed calls sent.
    pub sent: usize,
    /// Paths probed (folded).
    pub paths: BTreeSet<String>,
    /// Defective paths, in the order found.
    pub defects: Vec<Defect>,
    /// Paths answered `-32602` without `error.data.field` naming them: path → what it said.
    pub unnamed: BTreeMap<String, String>,
    /// Why the method was not swept (its valid call was refused).
    pub skipped: Option<String>,
    /// Mutations left unsent by the budget.
    pub cut: usize,
    /// Valid alternative calls the server refused (their paths were not swept).
    pub refused: Vec<String>,
}

impl MethodSweep {
    fn new(method: &'static str) -> Self {
        MethodSweep { method, ..Default::default() }
    }

    fn note(&mut self, m: &Mutation, request: Value, verdict: Verdict) {
        match verdict {
            Verdict::Conformant => {}
            Verdict::Unnamed(said) => {
                self.unnamed.entry(m.key.clone()).or_insert(said);
            }
            Verdict::Defect(answer) => match self.defects.iter_mut().find(|d| d.key == m.key) {
                Some(d) => d.also += 1,
                None => {
                    self.defects.push(Defect { key: m.key.clone(), request, kind: m.kind.clone(), answer, also: 0 })
                }
            },
        }
    }
}

/// What one answer to a malformed call says.
enum Verdict {
    Conformant,
    /// `-32602` without `error.data.field` naming the path (what it named, if anything).
    Unnamed(String),
    Defect(String),
}

/// The params schemas of the schema shipped in this crate, by `$defs` name.
fn defs() -> Map<String, Value> {
    serde_json::from_str::<Value>(crate::schema::BUILTIN_SCHEMA)
        .ok()
        .and_then(|s| s.get("$defs").and_then(Value::as_object).cloned())
        .unwrap_or_default()
}

/// Paths whose inside the sweep leaves alone: the client's `capabilities` in `initialize` are
/// typed in the schema with the server's capability shapes, but §7.1 gives the server nothing to
/// do with most of them, so a server that ignores `capabilities.embed: "1.0"` is not coercing
/// anything. The object itself must still be an object.
const OPAQUE: &[&str] = &["capabilities"];

/// The mutations of one method's valid call, in the run's order, with the budget's cut.
fn mutations(defs: &Map<String, Value>, def: &str, base: &Value, opts: SweepOptions) -> Vec<Mutation> {
    let mut w = Walker::new(defs, opts.seed.is_some()).opaque(OPAQUE);
    w.params(&json!({"$ref": format!("#/$defs/{def}")}), base);
    let mut out = w.out;
    if let Some(seed) = opts.seed {
        shuffle(&mut out, seed ^ def.len() as u64);
    }
    out
}

/// A Fisher–Yates shuffle driven by splitmix64: reproducible from the seed alone.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// Judges the answer to one malformed call.
fn judge(method: &str, m: &Mutation, r: &Resp) -> Verdict {
    match r.code() {
        Some(-32602) => match r.data_str("field") {
            Some(f) if names(f, m) => Verdict::Conformant,
            Some(f) => Verdict::Unnamed(format!("error.data.field '{f}'")),
            None => Verdict::Unnamed("no error.data.field".into()),
        },
        Some(-32005) if m.option => Verdict::Conformant,
        Some(-32002) if method == "initialize" && m.key == "protocolVersion" => Verdict::Conformant,
        Some(_) => Verdict::Defect(format!("answered {} instead of -32602", r.brief())),
        None if r.result().is_some() => Verdict::Defect(format!("accepted it: {}", r.brief())),
        None => Verdict::Defect(format!("answered neither a result nor an error: {}", r.brief())),
    }
}

/// Whether `error.data.field` names the mutated path: one names a segment of the other
/// (`inputs` for `inputs[0]`, `filter.field` or `field` for `filter.field`).
fn names(field: &str, m: &Mutation) -> bool {
    let segs = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|p| !p.is_empty()).map(str::to_owned).collect()
    };
    let (f, p) = (segs(field), segs(&m.path));
    f.contains(&m.leaf) || f.last().is_some_and(|last| p.contains(last))
}

/// Sends one malformed call and a `ping` after it; `Err` when the server did not answer one of
/// them (it crashed or hung).
async fn probe(conn: &mut Conn, method: &str, m: &Mutation, spend: &mut Spend) -> (Value, Result<Verdict, String>) {
    let id = conn.fresh_id();
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": m.params});
    spend.requests += 2;
    let verdict = match conn.call_id(id.clone(), method, Some(m.params.clone())).await {
        Ok(r) => judge(method, m, &r),
        Err(e) => return (request, Err(format!("no answer: {e}"))),
    };
    match conn.call("ping", json!({})).await {
        Ok(r) if r.result().is_some() => (request, Ok(verdict)),
        Ok(r) => (request, Err(format!("ping after it answered {}", r.brief()))),
        Err(e) => (request, Err(format!("the server no longer answers ping after it: {e}"))),
    }
}

/// Sweeps `initialize` on fresh sessions: a call the server accepts (or that kills it) costs a
/// new session or process, a rejected one leaves the session open for the next (§13: a failed
/// `initialize` can be retried).
pub(crate) async fn initialize(env: &Env, spend: &mut Spend) -> MethodSweep {
    let mut out = MethodSweep::new("initialize");
    let defs = defs();
    let mut base = init_params(1);
    base["client"] = json!({"name": "rcp-conformance", "version": env!("CARGO_PKG_VERSION")});
    let all = mutations(&defs, "params.initialize", &base, spend.opts);
    let mut conn: Option<Conn> = None;
    for (i, m) in all.iter().enumerate() {
        if !spend.room() {
            out.cut = all.len() - i;
            break;
        }
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Conn::open(env).await {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    out.skipped = Some(format!("a fresh session could not be opened: {e}"));
                    break;
                }
            },
        };
        out.sent += 1;
        out.paths.insert(m.key.clone());
        let (request, verdict) = probe(c, "initialize", m, spend).await;
        let fresh_needed = !matches!(verdict, Ok(Verdict::Conformant | Verdict::Unnamed(_)));
        out.note(m, request, verdict.unwrap_or_else(Verdict::Defect));
        if fresh_needed && let Some(mut old) = conn.take() {
            old.close().await;
        }
    }
    // The valid call last, on the session the rejected mutations left uninitialized (a fresh
    // one otherwise): a server that refuses it too says nothing about malformed params.
    if out.skipped.is_none() {
        let c = match conn.as_mut() {
            Some(c) => Ok(c),
            None => Conn::open(env).await.map(|c| conn.insert(c)),
        };
        let answer = match c {
            Ok(c) => {
                c.call("initialize", base.clone()).await.map(|r| r.result().is_some().then_some(()).ok_or(r.brief()))
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(Ok(())) => {}
            Ok(Err(said)) | Err(said) => {
                out.skipped = Some(format!("its valid call {base} was not answered with a result: {said}"));
                out.defects.clear();
                out.unnamed.clear();
            }
        }
    }
    if let Some(mut c) = conn.take() {
        c.close().await;
    }
    out
}

/// A valid call of each advertised method the schema types, with its params `$defs` name.
fn valid_calls(m: &Main) -> Vec<Planned> {
    let caps = &m.caps;
    let mut calls = Vec::new();
    if caps.has("retrieve") {
        let mut p = json!({"query": m.broad, "k": m.k(3)});
        if let Some(f) = filter_leaf(caps) {
            p["filter"] = f;
        }
        calls.push(("retrieve", "params.retrieve".into(), p));
    }
    for method in crate::roster::plain_sweeps() {
        if let (Some(cap), Some(params)) = (method.capability, method.probe())
            && caps.has(cap)
        {
            calls.push((method.name, method.params_def(), params));
        }
    }
    if caps.has("transform")
        && let Some(method) = caps.strings(&["transform", "methods"]).and_then(|ms| ms.into_iter().next())
    {
        calls.push((
            "query/transform",
            "params.query-transform".into(),
            json!({"query": "conformance probe", "method": method}),
        ));
    }
    if caps.has("graph") {
        let ops = caps.strings(&["graph", "ops"]).unwrap_or_else(|| vec!["local".into()]);
        if let Some(op) = ["local", "global", "drift"].into_iter().find(|o| ops.iter().any(|a| a == o)) {
            calls.push(("graph", "params.graph".into(), json!({"op": op, "query": "conformance probe", "k": 2})));
        }
    }
    if caps.has("feedback") {
        let signal = json!({"hitId": "rcp-conformance-sweep", "used": true, "reward": 0.5});
        calls.push(("feedback", "params.feedback".into(), json!({"query": "conformance probe", "signals": [signal]})));
    }
    if caps.has("index") {
        calls.push(("index/delete", "params.index-delete".into(), json!({"ids": ["rcp-conformance-sweep-absent"]})));
        if caps.flag(&["index", "writable"]) {
            let doc = json!({"id": SWEEP_DOC, "text": "conformance sweep probe", "meta": {}});
            calls.push(("index/add", "params.index-add".into(), json!({"documents": [doc]})));
        }
    }
    calls
}

/// The id of the document the `index/add` sweep adds (and deletes at the end).
const SWEEP_DOC: &str = "rcp-conformance-sweep";

/// A filter leaf on the first advertised field, when `eq` is allowed.
fn filter_leaf(caps: &Caps) -> Option<Value> {
    if !caps.has("filter") {
        return None;
    }
    let (field, ftype) = caps.filter_fields().into_iter().next()?;
    if caps.strings(&["filter", "operators"]).is_some_and(|ops| !ops.iter().any(|o| o == "eq")) {
        return None;
    }
    let value = filter_value(ftype.as_deref(), "eq")?;
    Some(json!({"field": field, "op": "eq", "value": value}))
}

/// One method to sweep: its name, its params `$defs` name and a valid call.
pub(crate) type Planned = (&'static str, String, Value);

/// The methods the main session sweeps, each with a valid call, in order.
pub(crate) fn plan(m: &Main) -> Vec<Planned> {
    valid_calls(m)
}

/// Sweeps one method on the main session (reviving a stdio server a mutation killed).
pub(crate) async fn method(m: &mut Main, (method, def, base): Planned, spend: &mut Spend) -> MethodSweep {
    let mut ms = MethodSweep::new(method);
    match m.conn.call(method, base.clone()).await {
        Ok(r) if r.result().is_some() => {}
        Ok(r) => {
            ms.skipped = Some(format!("its valid call {} was answered {}", truncate(&base.to_string(), 200), r.brief()))
        }
        Err(e) => ms.skipped = Some(format!("its valid call was not answered: {e}")),
    }
    if ms.skipped.is_none() {
        let all = mutations(&defs(), &def, &base, spend.opts);
        // The valid alternatives (a query as a content block) the server accepts.
        let mut alternatives: Vec<(Value, bool)> = Vec::new();
        for (i, mu) in all.iter().enumerate() {
            if !spend.room() {
                ms.cut = all.len() - i;
                break;
            }
            m.ensure_alive().await;
            if let Some(alt) = &mu.alternative {
                let accepted = match alternatives.iter().find(|(a, _)| a == alt) {
                    Some((_, ok)) => *ok,
                    None => {
                        spend.requests += 1;
                        let r = m.conn.call(method, alt.clone()).await;
                        let ok = r.as_ref().is_ok_and(|r| r.result().is_some());
                        if !ok {
                            let said = r.map_or_else(|e| e, |r| r.brief());
                            ms.refused.push(format!("{} (answered {said})", truncate(&alt.to_string(), 160)));
                        }
                        alternatives.push((alt.clone(), ok));
                        ok
                    }
                };
                if !accepted {
                    continue;
                }
            }
            ms.sent += 1;
            ms.paths.insert(mu.key.clone());
            let (request, verdict) = probe(&mut m.conn, method, mu, spend).await;
            ms.note(mu, request, verdict.unwrap_or_else(Verdict::Defect));
        }
    }
    if method == "index/add" {
        m.ensure_alive().await;
        let _ = m.conn.call("index/delete", json!({"ids": [SWEEP_DOC]})).await;
    }
    ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeded_order_is_reproducible_and_differs_from_the_default() {
        let defs = defs();
        let base = json!({"query": "q", "k": 3});
        let plain = SweepOptions::default();
        let seeded = SweepOptions { seed: Some(7), ..plain };
        let keys = |o| mutations(&defs, "params.retrieve", &base, o).into_iter().map(|m| m.params).collect::<Vec<_>>();
        assert_eq!(keys(plain), keys(plain));
        assert_eq!(keys(seeded), keys(seeded));
        assert_ne!(keys(plain), keys(seeded));
        assert!(keys(seeded).len() > keys(plain).len(), "a seed sends more values of each forbidden type");
    }

    #[test]
    fn a_field_naming_the_path_or_its_parent_counts() {
        let m = Mutation {
            path: "filter.and[0].field".into(),
            key: "filter.and[].field".into(),
            kind: String::new(),
            params: json!({}),
            option: false,
            leaf: "field".into(),
            alternative: None,
        };
        assert!(names("filter.and[0].field", &m));
        assert!(names("filter", &m));
        assert!(!names("k", &m));
    }

    #[test]
    fn one_defect_per_path_however_many_mutations_show_it() {
        let m = |path: &str| Mutation {
            path: path.into(),
            key: path.into(),
            kind: "x".into(),
            params: json!({}),
            option: false,
            leaf: path.into(),
            alternative: None,
        };
        let mut s = MethodSweep::new("retrieve");
        s.note(&m("k"), json!(1), Verdict::Defect("accepted".into()));
        s.note(&m("k"), json!(2), Verdict::Defect("accepted".into()));
        s.note(&m("query"), json!(3), Verdict::Defect("accepted".into()));
        s.note(&m("seed"), json!(4), Verdict::Conformant);
        assert_eq!(s.defects.len(), 2);
        assert_eq!((s.defects[0].request.clone(), s.defects[0].also), (json!(1), 1));
    }
}
