//! `feedback` through the gateway (§7.16), routed back to the origin: each signal goes to the
//! engines that returned its hit, as the gateway's origin ledger recorded them when it relayed
//! the hit (`retrieve`, `graph`, `memory/recall`), never by anything the client sends, so a
//! client cannot make one engine's hit count against another's. With namespaced ids the
//! namespace is removed first and must agree with the ledger. A signal about a hit the gateway
//! did not serve (or has forgotten: the ledger is bounded) is not routed and not accepted;
//! `_meta.unrouted` lists such hit ids and `_meta.engines` what each engine accepted.

use std::collections::BTreeMap;

use rcp_server::{Feedback, HandlerResult, RequestContext};
use rcp_wire::capabilities::Flag;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult, Signal};
use rcp_wire::{Meta, RcpError, RequestId};
use serde_json::json;

use super::forward::Onward;
use super::startup::Gateway;

impl Gateway {
    /// The engines a signal about `hit` reaches, with the id each knows it by.
    fn signal_targets(&self, hit: &str) -> Vec<(usize, String)> {
        let local = if self.namespaces.enabled() {
            match self.namespaces.split(hit) {
                Some((_, local)) => local.to_owned(),
                None => return Vec::new(),
            }
        } else {
            hit.to_owned()
        };
        self.ledger
            .origins(hit)
            .into_iter()
            .filter(|i| self.engine_caps.get(*i).and_then(Option::as_ref).is_some_and(|c| c.feedback.is_some()))
            .map(|i| (i, local.clone()))
            .collect()
    }
}

fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::String(s) => s.clone(),
        RequestId::Number(n) => n.to_string(),
    }
}

impl Feedback for Gateway {
    fn capability(&self) -> Flag {
        self.federated.capabilities.feedback.clone().unwrap_or_default()
    }

    async fn feedback(&self, params: FeedbackParams, ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        let next = match self.onward(params.meta.as_ref())? {
            Onward::Next(next) => next,
            Onward::Stop(why) => return Err(RcpError::backend_unavailable(why)),
        };
        // Per engine, the signals it receives and the positions they came from.
        let mut routed: BTreeMap<usize, (Vec<Signal>, Vec<usize>)> = BTreeMap::new();
        let mut unrouted: Vec<String> = Vec::new();
        for (position, signal) in params.signals.iter().enumerate() {
            let hit = id_text(&signal.hit_id);
            let targets = self.signal_targets(&hit);
            if targets.is_empty() {
                unrouted.push(hit);
                continue;
            }
            for (engine, local) in targets {
                let entry = routed.entry(engine).or_default();
                entry.0.push(Signal { hit_id: RequestId::String(local), ..signal.clone() });
                entry.1.push(position);
            }
        }
        let budget = self.engine_budget(&ctx);
        let meta = self.forwarded_meta(params.meta.as_ref(), &next, budget);
        let calls = routed.iter().map(|(engine, (signals, _))| {
            let call = FeedbackParams {
                session_id: params.session_id.clone(),
                query: params.query.clone(),
                signals: signals.clone(),
                meta: Some(meta.clone()),
            };
            async move {
                let client = self.pool.client(*engine).await?;
                tokio::time::timeout(budget, client.feedback(call))
                    .await
                    .unwrap_or(Err(rcp_client::ClientError::Timeout(budget.as_millis() as u64)))
            }
        });
        let answers = futures::future::join_all(calls).await;
        // A signal is accepted when every engine it was routed to took all it was sent.
        let mut refused = vec![false; params.signals.len()];
        let mut per_engine = Meta::new();
        for ((engine, (signals, positions)), answer) in routed.iter().zip(answers) {
            let id = self.pool.entries()[*engine].spec.id.clone();
            match answer {
                Ok(r) => {
                    per_engine.insert(id, json!(r.accepted));
                    if r.accepted < signals.len() as u64 {
                        positions.iter().for_each(|p| refused[*p] = true);
                    }
                }
                Err(e) => {
                    ctx.note(format!("engine '{id}' failed: {e}"));
                    per_engine.insert(id, json!(0));
                    positions.iter().for_each(|p| refused[*p] = true);
                }
            }
        }
        let routed_positions: std::collections::BTreeSet<usize> =
            routed.values().flat_map(|(_, positions)| positions.iter().copied()).collect();
        let accepted = routed_positions.iter().filter(|p| !refused[**p]).count() as u64;
        if !unrouted.is_empty() {
            ctx.note(format!(
                "{} signal(s) name hits this gateway did not serve (or no longer remembers): not routed",
                unrouted.len()
            ));
        }
        let mut out = Meta::new();
        out.insert("engines".into(), serde_json::Value::Object(per_engine));
        out.insert("unrouted".into(), json!(unrouted));
        Ok(FeedbackResult { accepted, meta: Some(out) })
    }
}
