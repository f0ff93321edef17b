//! Memory through the gateway (§7.17): both methods run the federation core's memory rules
//! ([`rcp_client::federation::memory`]) on the engines as the request reaches them
//! ([`Gateway::onward_engines`]), cancelled with the request.

use rcp_client::federation::memory;
use rcp_server::{HandlerResult, Memory, RequestContext};
use rcp_wire::capabilities::MemoryCapability;
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};

use super::forward::unless_cancelled;
use super::startup::Gateway;

impl Memory for Gateway {
    /// The engines' scopes, but `session`: the gateway reaches its engines over connections
    /// every caller shares, so an engine's session memory would outlive the caller's session
    /// and be recalled by other callers.
    fn capability(&self) -> MemoryCapability {
        let mut cap = self.federated.capabilities.memory.clone().unwrap_or_default();
        cap.scopes.retain(|s| s != "session");
        cap
    }

    async fn build(&self, params: MemoryBuildParams, ctx: RequestContext) -> HandlerResult<MemoryBuildResult> {
        let (relay, meta, budget) = self.onward_engines(params.meta.as_ref(), &ctx)?;
        let served = memory::build(&relay, &params, meta, budget);
        let served = unless_cancelled(&ctx, "the engine's call", served).await??;
        for n in served.notes {
            ctx.note(n);
        }
        let mut result = served.answer;
        result.meta = None;
        Ok(result)
    }

    async fn recall(&self, params: MemoryRecallParams, ctx: RequestContext) -> HandlerResult<MemoryRecallResult> {
        let (relay, meta, budget) = self.onward_engines(params.meta.as_ref(), &ctx)?;
        let merged = memory::recall(&relay, &self.namespaces, &self.ledger, &params, meta, budget);
        let merged = unless_cancelled(&ctx, "downstream calls", merged).await??;
        for n in merged.notes {
            ctx.note(n);
        }
        Ok(merged.answer)
    }
}
