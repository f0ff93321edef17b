//! `feedback` through the gateway (§7.16), routed back to the origin by rcp-client's
//! [`exec::feedback`]: each signal goes to the engines that returned its hit, as the gateway's
//! origin ledger recorded them when it relayed the hit (`retrieve`, `graph`, `memory/recall`),
//! never by anything the client sends, so a client cannot make one engine's hit count against
//! another's. A signal about a hit the gateway did not serve (or has forgotten: the ledger is
//! bounded) is not routed and not accepted; `_meta.unrouted` lists such hit ids and
//! `_meta.engines` what each engine accepted.

use rcp_client::federation::exec;
use rcp_server::{Feedback, HandlerResult, RequestContext};
use rcp_wire::capabilities::Flag;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};

use super::forward::unless_cancelled;
use super::startup::Gateway;

impl Feedback for Gateway {
    fn capability(&self) -> Flag {
        self.federated.capabilities.feedback.clone().unwrap_or_default()
    }

    async fn feedback(&self, params: FeedbackParams, ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        let (relay, meta, budget) = self.onward_engines(params.meta.as_ref(), &ctx)?;
        let merged = exec::feedback(&relay, &self.namespaces, &self.ledger, &params, meta, budget);
        let merged = unless_cancelled(&ctx, "downstream calls", merged).await??;
        for n in merged.notes {
            ctx.note(n);
        }
        Ok(merged.answer)
    }
}
