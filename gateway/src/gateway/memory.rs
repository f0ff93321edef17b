//! Memory through the gateway (§7.17): `memory/build` is routed to one engine (by scope, or
//! `_meta.engine`) and its memory id comes back as `<engine>:<id>`, since a memory belongs to
//! the engine that built it; `memory/recall` with such an id goes back to that engine alone,
//! and without one is fanned out to every engine with memory, the clues merged by weight and
//! the hits fused ([`merge_recall`]).

use rcp_client::federation::exec;
use rcp_client::federation::merge::{Answer, memory_owner, merge_recall, qualify_memory};
use rcp_client::federation::route::{Need, chosen_engine};
use rcp_server::{HandlerResult, Memory, RequestContext};
use rcp_wire::RcpError;
use rcp_wire::capabilities::MemoryCapability;
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};

use super::forward::{Onward, log_level, unless_cancelled};
use super::startup::Gateway;

impl Gateway {
    /// The engine a federated memory id names and the engine's own id ([`memory_owner`]).
    fn memory_owner<'a>(&self, memory_id: &'a str) -> Result<(&str, &'a str), RcpError> {
        memory_owner(self.pool.entries().iter().map(|e| e.spec.id.as_str()), memory_id)
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
        let meta = self.forwarded_meta(params.meta.as_ref(), &next, budget, log_level(&ctx));
        let relay = self.relay(&ctx);
        let merged = exec::memory_recall(&relay, &self.namespaces, &self.ledger, &params, meta, budget);
        let merged = unless_cancelled(&ctx, "downstream calls", merged).await??;
        for n in merged.notes {
            ctx.note(n);
        }
        Ok(merged.answer)
    }
}
