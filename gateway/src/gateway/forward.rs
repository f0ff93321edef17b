//! What every call the gateway forwards carries (§16.2), one rule for fanned-out and routed
//! calls alike: the caller's `_meta` without the keys the gateway reads itself, the hop budget
//! decremented with the gateway's identity appended, and a strictly smaller deadline.

use std::time::Duration;

use rcp_server::RequestContext;
use rcp_wire::{Meta, RcpError};
use serde_json::json;

use super::limits::GATEWAY_META_KEYS;
use super::startup::Gateway;
use crate::hop::Hop;

/// Where a request stands on the federation path.
#[derive(Debug, Clone)]
pub(super) enum Onward {
    /// Forward with this hop.
    Next(Hop),
    /// Do not forward: the note says why (a cycle, or the hop budget is spent).
    Stop(String),
}

impl Gateway {
    /// The hop a request forwards with, or why it must not be forwarded (§16.2).
    pub(super) fn onward(&self, meta: Option<&Meta>) -> Result<Onward, RcpError> {
        let hop = Hop::from_meta(meta, self.options.depth)?;
        let me = &self.options.identity;
        if hop.visited(me) {
            return Ok(Onward::Stop(format!(
                "gateway '{me}' is already on the federation path {:?}: not forwarded (cycle)",
                hop.path
            )));
        }
        Ok(match hop.forward(me) {
            Some(next) => Onward::Next(next),
            None => Onward::Stop(format!("federation depth exhausted at gateway '{me}': not forwarded")),
        })
    }

    /// The longest one engine may take for a call of this request: the engine timeout within
    /// the request's remaining time, less a reserve for the gateway's own work.
    pub(super) fn engine_budget(&self, ctx: &RequestContext) -> Duration {
        let remaining = ctx.remaining();
        let reserve = (remaining / 10).max(Duration::from_millis(5));
        self.options.engine_timeout.min(remaining.saturating_sub(reserve)).max(Duration::from_millis(1))
    }

    /// The `_meta` one engine receives: the caller's keys but the gateway's own, `next` as
    /// `_meta.federation` and `budget` as `_meta.deadlineMs`.
    pub(super) fn forwarded_meta(&self, meta: Option<&Meta>, next: &Hop, budget: Duration) -> Meta {
        let mut out = Meta::new();
        for (key, v) in meta.iter().flat_map(|m| m.iter()) {
            if !GATEWAY_META_KEYS.contains(&key.as_str()) {
                out.insert(key.clone(), v.clone());
            }
        }
        out.insert("federation".into(), next.to_value());
        out.insert("deadlineMs".into(), json!(budget.as_millis() as u64));
        out
    }
}
