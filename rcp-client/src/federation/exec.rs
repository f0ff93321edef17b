//! The federation core's calls: how a routed call is run and how a fanned-out call (`graph`,
//! `feedback`; memory's in [`super::memory`]) is asked and merged, once, for every front end that joins engines
//! ([`super::Federation`], rcp-gateway, the `rcpctl` commands and the MCP bridge through them).
//!
//! A front end describes its engines through [`Engines`] (connections by registry index and
//! what each advertised); the rules are those of [`super::route`], [`super::merge`] and
//! [`super::origin`]. Cancellation is the caller's: dropping a call's future drops the pending
//! engine calls, which cancels them downstream (§7.14).

use std::future::Future;
use std::time::Duration;

use rcp_wire::capabilities::Capabilities;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult, Signal};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::request;
use rcp_wire::{ErrorCode, Meta, RcpError, RequestId, Usage};
use serde_json::json;

use super::failure::no_answer;
use super::fan_out::{FanOut, Gathered, Reply, RequiredFailed, Target};
use super::merge::{Answer, merge_graph};
use super::origin::{Namespaces, OriginLedger};
use super::route::{EngineView, Need, fan_out, route_one};
use crate::client::Client;
use crate::error::ClientError;
use crate::registry::EngineSpec;

/// The engines a federation front end joins, by registry index.
pub trait Engines: Sync {
    /// How many registry entries there are.
    fn count(&self) -> usize;

    /// The registry entry `index`.
    fn spec(&self, index: usize) -> &EngineSpec;

    /// What engine `index` advertised (`None`: it has not answered `initialize`), which the
    /// routing rules route by.
    fn capabilities(&self, index: usize) -> Option<&Capabilities>;

    /// The namespace (see [`Namespaces`]) of the ids of engine `index`: its own index by
    /// default; a gateway's shards share their collection's.
    fn namespace(&self, index: usize) -> Option<usize> {
        Some(index)
    }

    /// A connection to engine `index`.
    fn client(&self, index: usize) -> impl Future<Output = Result<Client, ClientError>> + Send;
}

/// The engines that answered `initialize`, as the routing rules see them, with each one's
/// registry index.
pub fn views<E: Engines + ?Sized>(engines: &E) -> (Vec<usize>, Vec<EngineView<'_>>) {
    let mut indices = Vec::new();
    let mut views = Vec::new();
    for index in 0..engines.count() {
        if let Some(caps) = engines.capabilities(index) {
            let spec = engines.spec(index);
            indices.push(index);
            views.push(EngineView { id: &spec.id, priority: spec.priority, caps });
        }
    }
    (indices, views)
}

/// A routed call's answer: what the engine answered, which engine (registry index), and the
/// notes the caller reports (failovers, the serving engine).
#[derive(Debug, Clone)]
pub struct Served<R> {
    /// The engine's answer.
    pub answer: R,
    /// The registry index of the engine that gave it.
    pub index: usize,
    /// What happened on the way: engines that failed first, the engine that served.
    pub notes: Vec<String>,
}

/// Runs a routed call ([`route_one`]): to `chosen` (a registry id) when given, else to the
/// capable engine of highest priority. `call` is given the engine's client, under `budget`
/// per attempt. An engine that cannot be reached, times out or answers `-32010`/`-32014`
/// hands the call to the next engine of the same model; any other error of the engine's is
/// the answer, its message naming the engine. Every engine failing is `-32010` naming each.
pub async fn call_routed<E, R, Fut>(
    engines: &E,
    need: Need<'_>,
    chosen: Option<&str>,
    budget: Duration,
    call: impl Fn(Client) -> Fut,
) -> Result<Served<R>, RcpError>
where
    E: Engines + ?Sized,
    Fut: Future<Output = Result<R, ClientError>>,
{
    let (indices, views) = views(engines);
    let route = route_one(&need, &views, chosen)?;
    if route.is_empty() {
        return Err(RcpError::backend_unavailable(format!("no engine that answered initialize serves {need}")));
    }
    let mut failures: Vec<(String, ClientError)> = Vec::new();
    for v in route {
        let index = indices[v];
        let id = engines.spec(index).id.clone();
        let client = match engines.client(index).await {
            Ok(c) => c,
            Err(e) => {
                failures.push((id, e));
                continue;
            }
        };
        match tokio::time::timeout(budget, call(client)).await {
            Ok(Ok(answer)) => {
                let mut notes: Vec<String> = failures
                    .iter()
                    .map(|(failed, e)| format!("engine '{failed}' failed: {e}; served by '{id}' instead"))
                    .collect();
                notes.push(format!("served by engine '{id}'"));
                return Ok(Served { answer, index, notes });
            }
            Ok(Err(ClientError::Rpc(e)))
                if e.code != ErrorCode::BACKEND_UNAVAILABLE && e.code != ErrorCode::TIMEOUT =>
            {
                let mut e = e;
                e.message = format!("engine '{id}': {}", e.message);
                return Err(e);
            }
            Ok(Err(e)) => failures.push((id, e)),
            Err(_) => failures.push((id, ClientError::Timeout(budget.as_millis() as u64))),
        }
    }
    Err(no_answer(failures.iter().map(|(id, e)| (id.as_str(), e))))
}

/// A fanned-out call's merged answer, with what the caller reports: notes (engines skipped or
/// failed, their own notes) and the engines that should have answered and did not.
#[derive(Debug, Clone)]
pub struct Merged<R> {
    /// The merged answer.
    pub answer: R,
    /// Notes for `usage.notes`.
    pub notes: Vec<String>,
    /// Engines that failed (for `_meta.degraded`).
    pub degraded: Vec<String>,
}

/// Connects to every engine `plan` accepts and asks each with `call`, concurrently, under
/// `budget`; returns the answers (registry index, answer) with the notes and failures. A
/// `required` engine's failure is the call's error.
pub(super) async fn ask_all<E, P, R, Fut>(
    engines: &E,
    need: Need<'_>,
    budget: Duration,
    mut params_for: impl FnMut(usize) -> Result<P, String>,
    call: impl Fn(Client, P) -> Fut,
) -> Result<(Vec<(usize, R)>, Vec<String>, Vec<String>), RcpError>
where
    E: Engines + ?Sized,
    Fut: Future<Output = Result<R, ClientError>>,
{
    let (indices, views) = views(engines);
    let plan = fan_out(&need, &views);
    let capable: Vec<usize> = indices.iter().zip(&plan).filter(|(_, p)| p.is_ok()).map(|(i, _)| *i).collect();
    let clients = futures::future::join_all(capable.iter().map(|i| engines.client(*i))).await;
    let targets: Vec<Target<usize>> = capable
        .iter()
        .zip(clients)
        .map(|(index, client)| {
            let spec = engines.spec(*index);
            Target { key: *index, id: spec.id.clone(), required: spec.required, client }
        })
        .collect();
    let fan = FanOut::new(budget);
    let gathered: Gathered<usize, R> = fan
        .run_with(targets, |index, _| params_for(*index), |_, client, p| call(client, p))
        .await
        .map_err(|RequiredFailed { id, error, .. }| {
            let mut err = error.to_rcp();
            err.message = format!("required engine '{id}' failed: {}", err.message);
            err
        })?;
    let mut answers = Vec::new();
    let mut notes = Vec::new();
    let mut failures = Vec::new();
    for (index, reply) in gathered.replies {
        let id = &engines.spec(index).id;
        match reply {
            Reply::Answered { result, .. } => answers.push((index, result)),
            Reply::Skipped(why) => notes.push(format!("engine '{id}' skipped: {why}")),
            Reply::Failed(e) => {
                notes.push(format!("engine '{id}' failed: {e}"));
                failures.push((id.clone(), e));
            }
        }
    }
    if answers.is_empty() {
        return Err(no_answer(failures.iter().map(|(id, e)| (id.as_str(), e))));
    }
    Ok((answers, notes, failures.into_iter().map(|(id, _)| id).collect()))
}

/// The seeds engine `index` receives: all of them with shared ids; with namespaced ids, those
/// in its namespace, the namespace removed (`Err`: none is, so it is not asked).
fn seeds_for<E: Engines + ?Sized>(
    engines: &E,
    ns: &Namespaces,
    index: usize,
    seeds: Option<&Vec<String>>,
) -> Result<Option<Vec<String>>, String> {
    let Some(seeds) = seeds else { return Ok(None) };
    if !ns.enabled() {
        return Ok(Some(seeds.clone()));
    }
    let owner = engines.namespace(index).ok_or("has no namespace")?;
    let mine: Vec<String> =
        seeds.iter().filter_map(|s| ns.split(s).filter(|(o, _)| *o == owner).map(|(_, id)| id.to_owned())).collect();
    if mine.is_empty() {
        return Err("none of the seeds is in its namespace".into());
    }
    Ok(Some(mine))
}

/// A federated `graph` (§16.4): the op asked of every engine advertising it (seeds sent to
/// the engine they belong to when ids are namespaced), each with `meta` as its `_meta`; the
/// answers merged ([`merge_graph`]) and every hit recorded in `ledger`.
pub async fn graph<E: Engines + ?Sized>(
    engines: &E,
    ns: &Namespaces,
    ledger: &OriginLedger,
    params: &GraphParams,
    meta: Meta,
    budget: Duration,
) -> Result<Merged<GraphResult>, RcpError> {
    if ns.enabled()
        && let Some((i, s)) = params.seed_ids.iter().flatten().enumerate().find(|(_, s)| ns.split(s).is_none())
    {
        return Err(RcpError::invalid_params(
            format!("seedIds[{i}]"),
            format!("'{s}' is not a namespaced id ('<engine>:<id>') of this federation"),
        ));
    }
    let (answers, mut notes, degraded) = ask_all(
        engines,
        Need::Graph(&params.op),
        budget,
        |index| {
            let seed_ids = seeds_for(engines, ns, index, params.seed_ids.as_ref())?;
            Ok(GraphParams { seed_ids, cursor: None, meta: Some(meta.clone()), ..params.clone() })
        },
        |client, p| async move { client.graph(p).await },
    )
    .await?;
    let answers: Vec<Answer<GraphResult>> = answers
        .into_iter()
        .map(|(index, result)| {
            let id = engines.spec(index).id.clone();
            notes.extend(result.usage.iter().flat_map(|u| u.notes.iter()).map(|n| format!("engine '{id}': {n}")));
            let owner = engines.namespace(index).unwrap_or(index);
            for h in result.hits.iter().flatten() {
                ledger.record(&ns.qualify(owner, &h.key()), index);
            }
            Answer { name: id, index: owner, result }
        })
        .collect();
    let k = params.k.map(|k| usize::try_from(k).unwrap_or(usize::MAX));
    let mut answer = merge_graph(answers, ns, k)?;
    answer.meta.get_or_insert_with(Meta::new).insert("degraded".into(), json!(degraded));
    if !notes.is_empty() {
        answer.usage = Some(Usage { notes: notes.clone(), ..Usage::default() });
    }
    Ok(Merged { answer, notes, degraded })
}

fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::String(s) => s.clone(),
        RequestId::Number(n) => n.to_string(),
    }
}

/// `feedback` routed back to the origin (§7.16): each signal goes to the engines `ledger`
/// recorded as having returned its hit (that advertise `feedback`), with the namespace
/// removed; a namespaced id the ledger does not know goes to its namespace's engines (the id
/// names them itself). A shared id is never routed by anything but the ledger, so a client
/// cannot make one engine's hit count against another's. A signal is accepted when every engine it
/// went to took all it was sent; `_meta.engines` says what each engine accepted and
/// `_meta.unrouted` lists hits the federation did not serve (or has forgotten).
pub async fn feedback<E: Engines + ?Sized>(
    engines: &E,
    ns: &Namespaces,
    ledger: &OriginLedger,
    params: &FeedbackParams,
    meta: Meta,
    budget: Duration,
) -> Result<Merged<FeedbackResult>, RcpError> {
    let mut routed: std::collections::BTreeMap<usize, (Vec<Signal>, Vec<usize>)> = Default::default();
    let mut unrouted: Vec<String> = Vec::new();
    for (position, signal) in params.signals.iter().enumerate() {
        let hit = id_text(&signal.hit_id);
        let local = if ns.enabled() { ns.split(&hit).map(|(_, l)| l.to_owned()) } else { Some(hit.clone()) };
        // The ledger says which engines returned the hit; a namespaced id the ledger does not
        // know (served by another process of this federation, or forgotten) names its
        // namespace's engines itself.
        let mut origins = ledger.origins(&hit);
        if origins.is_empty()
            && let Some((owner, _)) = ns.split(&hit)
        {
            origins = (0..engines.count()).filter(|i| engines.namespace(*i) == Some(owner)).collect();
        }
        let targets: Vec<usize> =
            origins.into_iter().filter(|i| engines.capabilities(*i).is_some_and(|c| c.feedback.is_some())).collect();
        match local {
            Some(local) if !targets.is_empty() => {
                for t in targets {
                    let entry = routed.entry(t).or_default();
                    entry.0.push(Signal { hit_id: RequestId::String(local.clone()), ..signal.clone() });
                    entry.1.push(position);
                }
            }
            _ => unrouted.push(hit),
        }
    }
    let calls = routed.iter().map(|(index, (signals, _))| {
        let call = FeedbackParams {
            session_id: params.session_id.clone(),
            query: params.query.clone(),
            signals: signals.clone(),
            meta: Some(meta.clone()),
        };
        async move {
            let client = engines.client(*index).await?;
            tokio::time::timeout(budget, client.request::<request::Feedback>(&call))
                .await
                .unwrap_or(Err(ClientError::Timeout(budget.as_millis() as u64)))
        }
    });
    let answers = futures::future::join_all(calls).await;
    let mut refused = vec![false; params.signals.len()];
    let mut per_engine = Meta::new();
    let mut notes = Vec::new();
    let mut degraded = Vec::new();
    for ((index, (signals, positions)), answer) in routed.iter().zip(answers) {
        let id = engines.spec(*index).id.clone();
        match answer {
            Ok(r) => {
                per_engine.insert(id, json!(r.accepted));
                if r.accepted < signals.len() as u64 {
                    positions.iter().for_each(|p| refused[*p] = true);
                }
            }
            Err(e) => {
                notes.push(format!("engine '{id}' failed: {e}"));
                per_engine.insert(id.clone(), json!(0));
                degraded.push(id);
                positions.iter().for_each(|p| refused[*p] = true);
            }
        }
    }
    let routed_positions: std::collections::BTreeSet<usize> =
        routed.values().flat_map(|(_, positions)| positions.iter().copied()).collect();
    let accepted = routed_positions.iter().filter(|p| !refused[**p]).count() as u64;
    if !unrouted.is_empty() {
        notes.push(format!(
            "{} signal(s) name hits this federation did not serve (or no longer remembers): not routed",
            unrouted.len()
        ));
    }
    let mut out = Meta::new();
    out.insert("engines".into(), serde_json::Value::Object(per_engine));
    out.insert("unrouted".into(), json!(unrouted));
    Ok(Merged { answer: FeedbackResult { accepted, meta: Some(out) }, notes, degraded })
}
