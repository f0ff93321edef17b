//! A federated `graph` (§16.4: "a federated `graph` op runs against those advertising `graph`
//! with that op"): rcp-client's [`exec::graph`] over the gateway's engines — every engine
//! advertising the op is asked (seeds sent only to the collection they belong to when ids are
//! namespaced) and the answers merged (fused hits, united nodes and edges, communities kept per
//! engine) — within the request's hop budget, deadline and cancellation.

use rcp_client::federation::exec;
use rcp_server::{Graph, HandlerResult, RequestContext};
use rcp_wire::Usage;
use rcp_wire::capabilities::GraphCapability;
use rcp_wire::graph::{GraphParams, GraphResult};
use serde_json::json;

use super::forward::{Onward, unless_cancelled};
use super::startup::Gateway;

impl Graph for Gateway {
    fn capability(&self) -> GraphCapability {
        self.federated.capabilities.graph.clone().unwrap_or_default()
    }

    async fn graph(&self, params: GraphParams, ctx: RequestContext) -> HandlerResult<GraphResult> {
        let next = match self.onward(params.meta.as_ref())? {
            Onward::Next(next) => next,
            Onward::Stop(why) => {
                return Ok(GraphResult {
                    usage: Some(Usage { notes: vec![why], ..Usage::default() }),
                    ..Default::default()
                });
            }
        };
        let budget = self.engine_budget(&ctx);
        let meta = self.forwarded_meta(params.meta.as_ref(), &next, budget, &ctx);
        let relay = self.relay(&ctx);
        let merged = exec::graph(&relay, &self.namespaces, &self.ledger, &params, meta, budget);
        let mut merged = unless_cancelled(&ctx, "downstream calls", merged).await??;
        merged.answer.meta.get_or_insert_with(Default::default).insert("gateway".into(), json!(self.options.identity));
        Ok(merged.answer)
    }
}
