//! Memory through the gateway (§7.17): `memory/build` is routed to one engine (by scope, or
//! `_meta.engine`) and its memory id comes back as `<engine>:<id>`, since a memory belongs to
//! the engine that built it; `memory/recall` with such an id goes back to that engine alone,
//! and without one is fanned out to every engine with memory, the clues merged by weight and
//! the hits fused ([`merge_recall`]).

use rcp_client::federation::merge::{Answer, merge_recall, qualify_memory};
use rcp_client::federation::origin::NAMESPACE_SEPARATOR;
use rcp_client::federation::route::{Need, chosen_engine, fan_out};
use rcp_client::federation::{FanOut, Gathered, Reply, Target, no_answer};
use rcp_server::{HandlerResult, Memory, RequestContext};
use rcp_wire::capabilities::MemoryCapability;
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_wire::{Meta, RcpError};
use serde_json::json;

use super::forward::Onward;
use super::startup::Gateway;

impl Gateway {
    /// The engine a federated memory id names and the engine's own id: `-32602` when the id
    /// is not `<engine>:<id>` with an engine of this gateway.
    fn memory_owner<'a>(&self, memory_id: &'a str) -> Result<(&str, &'a str), RcpError> {
        let known = || self.pool.entries().iter().map(|e| e.spec.id.as_str()).collect::<Vec<_>>().join(", ");
        let (engine, local) = memory_id.split_once(NAMESPACE_SEPARATOR).ok_or_else(|| {
            RcpError::invalid_params(
                "memoryId",
                format!("'{memory_id}' is not a memory of this gateway ('<engine>:<id>', engine among: {})", known()),
            )
        })?;
        let entry = self.pool.entries().iter().find(|e| e.spec.id == engine).ok_or_else(|| {
            RcpError::invalid_params("memoryId", format!("no engine '{engine}' in this gateway; engines: {}", known()))
        })?;
        Ok((entry.spec.id.as_str(), local))
    }
}

impl Memory for Gateway {
    fn capability(&self) -> MemoryCapability {
        self.federated.capabilities.memory.clone().unwrap_or_default()
    }

    async fn build(&self, params: MemoryBuildParams, ctx: RequestContext) -> HandlerResult<MemoryBuildResult> {
        let meta = params.meta.clone();
        let (chosen, local) = match params.memory_id.as_deref() {
            Some(id) => {
                let (engine, local) = self.memory_owner(id)?;
                (Some(engine), Some(local.to_owned()))
            }
            None => (chosen_engine(meta.as_ref())?, None),
        };
        let (mut result, index) = self
            .routed(Need::MemoryBuild(params.scope.as_deref()), chosen, meta.as_ref(), &ctx, |client, meta| {
                let params = MemoryBuildParams { memory_id: local.clone(), meta: Some(meta), ..params.clone() };
                async move { client.memory_build(params).await }
            })
            .await?;
        result.memory_id = qualify_memory(&self.pool.entries()[index].spec.id, &result.memory_id);
        result.meta = None;
        Ok(result)
    }

    async fn recall(&self, params: MemoryRecallParams, ctx: RequestContext) -> HandlerResult<MemoryRecallResult> {
        let n = params.n.map_or(usize::MAX, |n| n as usize);
        if let Some(id) = params.memory_id.as_deref() {
            let (engine, local) = self.memory_owner(id)?;
            let meta = params.meta.clone();
            let (result, index) = self
                .routed(Need::MemoryRecall, Some(engine), meta.as_ref(), &ctx, |client, meta| {
                    let params =
                        MemoryRecallParams { memory_id: Some(local.to_owned()), meta: Some(meta), ..params.clone() };
                    async move { client.memory_recall(params).await }
                })
                .await?;
            let owner = self.namespace_of(index).unwrap_or(index);
            return merge_recall(vec![Answer { name: engine.to_owned(), index: owner, result }], &self.namespaces, n);
        }
        let next = match self.onward(params.meta.as_ref())? {
            Onward::Next(next) => next,
            Onward::Stop(why) => return Err(RcpError::backend_unavailable(why)),
        };
        let (indices, views) = self.views();
        let plan = fan_out(&Need::MemoryRecall, &views);
        let budget = self.engine_budget(&ctx);
        let capable: Vec<usize> = indices.iter().zip(&plan).filter(|(_, p)| p.is_ok()).map(|(i, _)| *i).collect();
        let clients = futures::future::join_all(capable.iter().map(|i| self.pool.client(*i))).await;
        let targets: Vec<Target<usize>> = capable
            .iter()
            .zip(clients)
            .map(|(index, client)| {
                let spec = &self.pool.entries()[*index].spec;
                Target { key: *index, id: spec.id.clone(), required: spec.required, client }
            })
            .collect();
        let meta: Meta = self.forwarded_meta(params.meta.as_ref(), &next, budget);
        let fan_out = FanOut::new(budget);
        let fan = fan_out.run_with(
            targets,
            |_, _| Ok(MemoryRecallParams { meta: Some(meta.clone()), ..params.clone() }),
            |_, client, p| async move { client.memory_recall(p).await },
        );
        let cancelled = ctx.cancellation().clone();
        let gathered: Gathered<usize, MemoryRecallResult> = tokio::select! {
            () = cancelled.cancelled() => return Err(RcpError::cancelled(Some("cancelled by the client; downstream calls cancelled"))),
            g = fan => g.map_err(|f| {
                let mut err = f.error.to_rcp();
                err.message = format!("required engine '{}' failed: {}", f.id, err.message);
                err
            })?,
        };
        let mut answers = Vec::new();
        let mut failures = Vec::new();
        for (index, reply) in gathered.replies {
            let id = self.pool.entries()[index].spec.id.clone();
            match reply {
                Reply::Answered { result, .. } => {
                    let owner = self.namespace_of(index).unwrap_or(index);
                    for h in result.hits.iter().flatten() {
                        self.ledger.record(&self.namespaces.qualify(owner, &h.key()), index);
                    }
                    answers.push(Answer { name: id, index: owner, result });
                }
                Reply::Skipped(why) => ctx.note(format!("engine '{id}' skipped: {why}")),
                Reply::Failed(e) => {
                    ctx.note(format!("engine '{id}' failed: {e}"));
                    failures.push((id, e));
                }
            }
        }
        if answers.is_empty() {
            return Err(no_answer(failures.iter().map(|(id, e)| (id.as_str(), e))));
        }
        let mut merged = merge_recall(answers, &self.namespaces, n)?;
        let degraded: Vec<&str> = failures.iter().map(|(id, _)| id.as_str()).collect();
        merged.meta.get_or_insert_with(Default::default).insert("degraded".into(), json!(degraded));
        Ok(merged)
    }
}
