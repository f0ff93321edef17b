//! A federated `graph` (§16.4: "a federated `graph` op runs against those advertising `graph`
//! with that op"): fanned out to every engine advertising the op, with seeds sent only to the
//! engine they belong to when ids are namespaced, and the answers merged by rcp-client's
//! [`merge_graph`] (fused hits, united nodes and edges, communities kept per engine).

use rcp_client::Client;
use rcp_client::federation::merge::{Answer, merge_graph};
use rcp_client::federation::route::{Need, fan_out};
use rcp_client::federation::{FanOut, Gathered, Reply, RequiredFailed, Target, no_answer};
use rcp_server::{Graph, HandlerResult, RequestContext};
use rcp_wire::capabilities::GraphCapability;
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::{RcpError, Usage};
use serde_json::json;

use super::forward::Onward;
use super::startup::Gateway;

impl Gateway {
    /// The seeds engine `index` receives: all of them with shared ids; with namespaced ids,
    /// those in its collection's namespace, the namespace removed. `Err` skips the engine.
    fn seeds_for(&self, index: usize, seeds: Option<&Vec<String>>) -> Result<Option<Vec<String>>, String> {
        let Some(seeds) = seeds else { return Ok(None) };
        if !self.namespaces.enabled() {
            return Ok(Some(seeds.clone()));
        }
        let Some(owner) = self.namespace_of(index) else { return Err("is in no collection".into()) };
        let mine: Vec<String> = seeds
            .iter()
            .filter_map(|s| self.namespaces.split(s).filter(|(o, _)| *o == owner).map(|(_, id)| id.to_owned()))
            .collect();
        if mine.is_empty() {
            return Err("none of the seeds is in its collection".into());
        }
        Ok(Some(mine))
    }

    /// Seeds that name no collection, when ids are namespaced: `-32602` naming the first.
    fn check_seeds(&self, seeds: Option<&Vec<String>>) -> Result<(), RcpError> {
        if !self.namespaces.enabled() {
            return Ok(());
        }
        for (i, s) in seeds.into_iter().flatten().enumerate() {
            if self.namespaces.split(s).is_none() {
                return Err(RcpError::invalid_params(
                    format!("seedIds[{i}]"),
                    format!(
                        "'{s}' is not a namespaced id; this gateway's ids are '<collection>:<id>' with a collection among: {}",
                        self.collections().join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Graph for Gateway {
    fn capability(&self) -> GraphCapability {
        self.federated.capabilities.graph.clone().unwrap_or_default()
    }

    async fn graph(&self, params: GraphParams, ctx: RequestContext) -> HandlerResult<GraphResult> {
        self.check_seeds(params.seed_ids.as_ref())?;
        let next = match self.onward(params.meta.as_ref())? {
            Onward::Next(next) => next,
            Onward::Stop(why) => {
                return Ok(GraphResult {
                    usage: Some(Usage { notes: vec![why], ..Usage::default() }),
                    ..Default::default()
                });
            }
        };
        let (indices, views) = self.views();
        let plan = fan_out(&Need::Graph(&params.op), &views);
        let budget = self.engine_budget(&ctx);
        let asked: Vec<usize> = indices.clone();
        let clients = futures::future::join_all(asked.iter().map(|i| self.pool.client(*i))).await;
        let targets: Vec<Target<usize>> = asked
            .iter()
            .zip(clients)
            .map(|(index, client)| {
                let spec = &self.pool.entries()[*index].spec;
                Target { key: *index, id: spec.id.clone(), required: spec.required, client }
            })
            .collect();
        let meta = self.forwarded_meta(params.meta.as_ref(), &next, budget);
        let fan_out = FanOut::new(budget);
        let gathered = fan_out.run_with(
            targets,
            |index, _client: &Client| {
                let v = indices.iter().position(|i| i == index).ok_or("not connected at start-up")?;
                plan[v].clone()?;
                let seed_ids = self.seeds_for(*index, params.seed_ids.as_ref())?;
                Ok(GraphParams { seed_ids, cursor: None, meta: Some(meta.clone()), ..params.clone() })
            },
            |_, client, p| async move { client.graph(p).await },
        );
        let cancelled = ctx.cancellation().clone();
        let gathered: Gathered<usize, GraphResult> = tokio::select! {
            () = cancelled.cancelled() => return Err(RcpError::cancelled(Some("cancelled by the client; downstream calls cancelled"))),
            g = gathered => g.map_err(|RequiredFailed { id, error, .. }| {
                let mut err = error.to_rcp();
                err.message = format!("required engine '{id}' failed: {}", err.message);
                err
            })?,
        };
        let mut notes = Vec::new();
        let mut degraded = Vec::new();
        let mut failures = Vec::new();
        let mut answers = Vec::new();
        for (index, reply) in gathered.replies {
            let id = self.pool.entries()[index].spec.id.clone();
            match reply {
                Reply::Answered { result, .. } => {
                    for n in result.usage.iter().flat_map(|u| u.notes.iter()) {
                        notes.push(format!("engine '{id}': {n}"));
                    }
                    let owner = self.namespace_of(index).unwrap_or(index);
                    answers.push(Answer { name: id, index: owner, result });
                }
                Reply::Skipped(why) => {
                    // Engines without the op are not degraded: they were never meant to answer.
                    if views.iter().any(|v| v.id == id && Need::Graph(&params.op).unmet(v.caps).is_none()) {
                        notes.push(format!("engine '{id}' skipped: {why}"));
                    }
                }
                Reply::Failed(e) => {
                    notes.push(format!("engine '{id}' failed: {e}"));
                    degraded.push(id.clone());
                    failures.push((id, e));
                }
            }
        }
        if answers.is_empty() {
            return Err(no_answer(failures.iter().map(|(id, e)| (id.as_str(), e))));
        }
        for a in &answers {
            let entry = self.pool.entries().iter().position(|e| e.spec.id == a.name).unwrap_or(a.index);
            for h in a.result.hits.iter().flatten() {
                self.ledger.record(&self.namespaces.qualify(a.index, &h.key()), entry);
            }
        }
        let k = params.k.map(|k| usize::try_from(k).unwrap_or(usize::MAX));
        let mut merged = merge_graph(answers, &self.namespaces, k)?;
        let meta = merged.meta.get_or_insert_with(Default::default);
        meta.insert("degraded".into(), json!(degraded));
        meta.insert("gateway".into(), json!(self.options.identity));
        if !notes.is_empty() {
            merged.usage = Some(Usage { notes, ..Usage::default() });
        }
        Ok(merged)
    }
}
