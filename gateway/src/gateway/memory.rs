//! Memory through the gateway (§7.17): `memory/build` is routed to one engine (by scope, or
//! `_meta.engine`) and its memory id comes back as `<engine>:<id>`, since a memory belongs to
//! the engine that built it; `memory/recall` with such an id goes back to that engine alone,
//! and without one is fanned out to every engine with memory, the clues merged by weight and
//! the hits fused ([`merge_recall`]).

use rcp_client::federation::exec;
use rcp_client::federation::merge::{Answer, merge_recall, qualify_memory};
use rcp_client::federation::origin::NAMESPACE_SEPARATOR;
use rcp_client::federation::route::{Need, chosen_engine};
use rcp_server::{HandlerResult, Memory, RequestContext};
use rcp_wire::RcpError;
use rcp_wire::capabilities::MemoryCapability;
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};

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
        let budget = self.engine_budget(&ctx);
        let meta = self.forwarded_meta(params.meta.as_ref(), &next, budget);
        let merged = exec::memory_recall(self, &self.namespaces, &self.ledger, &params, meta, budget);
        let cancelled = ctx.cancellation().clone();
        let merged = tokio::select! {
            () = cancelled.cancelled() => return Err(RcpError::cancelled(Some("cancelled by the client; downstream calls cancelled"))),
            m = merged => m?,
        };
        for n in merged.notes {
            ctx.note(n);
        }
        Ok(merged.answer)
    }
}
