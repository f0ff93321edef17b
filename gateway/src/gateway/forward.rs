//! What every call the gateway forwards carries (§16.2), one rule for fanned-out and routed
//! calls alike: the caller's `_meta` without the keys the gateway reads itself, the hop budget
//! decremented with the gateway's identity appended, a strictly smaller deadline, and the
//! caller's log level; the engines' log frames of the call come back to the caller with the
//! engine named (§17.1, [`Relay`]); and the caller's cancellation cancels the engines' calls.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rcp_client::federation::exec::Engines;
use rcp_client::{Client, ClientError, EngineSpec, LogSink};
use rcp_server::RequestContext;
use rcp_wire::capabilities::Capabilities;
use rcp_wire::notifications::{LogLevel, LogParams};
use rcp_wire::{Meta, RcpError};
use serde_json::{Value, json};

use super::grants;
use super::limits::GATEWAY_META_KEYS;
use super::startup::Gateway;
use crate::hop::Hop;

/// Log levels from the least severe up.
const LEVELS: [LogLevel; 5] = [LogLevel::Debug, LogLevel::Info, LogLevel::Notice, LogLevel::Warning, LogLevel::Error];

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
    /// `_meta.federation`, `budget` as `_meta.deadlineMs`, and `_meta.logLevel` when the
    /// caller receives logs at `log` (asked in its request or for its session).
    pub(super) fn forwarded_meta(
        &self,
        meta: Option<&Meta>,
        next: &Hop,
        budget: Duration,
        ctx: &RequestContext,
    ) -> Meta {
        let mut out = Meta::new();
        for (key, v) in meta.iter().flat_map(|m| m.iter()) {
            if !GATEWAY_META_KEYS.contains(&key.as_str()) {
                out.insert(key.clone(), v.clone());
            }
        }
        out.insert("federation".into(), next.to_value());
        out.insert("deadlineMs".into(), json!(budget.as_millis() as u64));
        out.extend(trace_meta(ctx));
        if let Some(level) = log_level(ctx) {
            out.insert("logLevel".into(), json!(level.as_str()));
        }
        out
    }

    /// The engines as one request reaches them: only those its caller's grant reaches
    /// ([`Gateway::reaches_entry`]), their log frames of its calls relayed to its caller
    /// ([`Relay`]).
    pub(super) fn relay(&self, ctx: &RequestContext) -> Relay<'_> {
        let scope = grants::scope_of(ctx);
        let reached = (0..self.pool.entries().len()).map(|i| self.reaches_entry(ctx.grant(), scope, i)).collect();
        Relay { gateway: self, logs: log_sink(ctx), reached }
    }

    /// Where the request of `ctx` goes on: the engines as it reaches them ([`Self::relay`]), the
    /// `_meta` they receive and the time each may take; `-32010` when it may not be forwarded
    /// (a cycle, or the hop budget is spent).
    pub(super) fn onward_engines(
        &self,
        meta: Option<&Meta>,
        ctx: &RequestContext,
    ) -> Result<(Relay<'_>, Meta, Duration), RcpError> {
        let next = match self.onward(meta)? {
            Onward::Next(next) => next,
            Onward::Stop(why) => return Err(RcpError::backend_unavailable(why)),
        };
        let budget = self.engine_budget(ctx);
        let forwarded = self.forwarded_meta(meta, &next, budget, ctx);
        Ok((self.relay(ctx), forwarded, budget))
    }
}

/// The trace a call to another server continues (§17.2): the request's trace id (the caller's
/// or the one this gateway assigned) as `_meta.traceId`, and with span export the current span
/// as `_meta.traceparent`, so the engine's spans hang under the call that reached it.
pub(super) fn trace_meta(ctx: &RequestContext) -> Meta {
    let mut meta = Meta::new();
    meta.insert("traceId".into(), json!(ctx.trace_id()));
    if let Some(parent) = rcp_server::telemetry::traceparent() {
        meta.insert(rcp_server::telemetry::TRACEPARENT_KEY.into(), json!(parent));
    }
    meta
}

/// The lowest level of log frame that reaches the caller of `ctx`, if any does.
pub(super) fn log_level(ctx: &RequestContext) -> Option<LogLevel> {
    LEVELS.into_iter().find(|l| ctx.log_enabled(*l))
}

/// Where an engine's log frames of a call go: to the caller as the gateway's own, within the
/// caller's level, the message prefixed with the engine and `data` naming it
/// (`{"engine", "logger", "data"}`: the engine's logger and data kept apart).
fn log_sink(ctx: &RequestContext) -> Option<LogSink> {
    log_level(ctx)?;
    let ctx = ctx.clone();
    Some(Arc::new(move |engine: &str, l: LogParams| {
        let mut data = Meta::new();
        data.insert("engine".into(), json!(engine));
        if let Some(logger) = l.logger {
            data.insert("logger".into(), json!(logger));
        }
        if let Some(d) = l.data {
            data.insert("data".into(), Value::Object(d));
        }
        ctx.log_with(l.level, format!("engine '{engine}': {}", l.message), Some(data));
    }))
}

/// `call`, unless the caller cancels first (§7.14): then `-32800` saying what was cancelled
/// downstream (dropping `call` drops the engines' pending calls, which cancels them).
pub(super) async fn unless_cancelled<T>(
    ctx: &RequestContext,
    downstream: &str,
    call: impl Future<Output = T>,
) -> Result<T, RcpError> {
    let cancelled = ctx.cancellation().clone();
    tokio::select! {
        () = cancelled.cancelled() => Err(RcpError::cancelled(Some(&format!("cancelled by the client; {downstream} cancelled")))),
        r = call => Ok(r),
    }
}

/// The gateway's engines as one request reaches them: the same engines, routing and
/// connections, but those outside the caller's grant, which the routing rules see as never
/// having answered (no capabilities, no connection); each connection's calls relay their log
/// frames to the request's caller when it receives logs ([`Client::relaying_logs`]).
pub(super) struct Relay<'g> {
    gateway: &'g Gateway,
    logs: Option<LogSink>,
    /// By registry index: whether the caller's grant reaches the entry.
    reached: Vec<bool>,
}

impl Relay<'_> {
    /// `client`, relaying its calls' log frames when the caller receives logs.
    pub(super) fn wrap(&self, client: Client) -> Client {
        match &self.logs {
            Some(sink) => client.relaying_logs(Arc::clone(sink)),
            None => client,
        }
    }
}

impl Engines for Relay<'_> {
    fn count(&self) -> usize {
        self.gateway.count()
    }

    fn spec(&self, index: usize) -> &EngineSpec {
        self.gateway.spec(index)
    }

    fn capabilities(&self, index: usize) -> Option<&Capabilities> {
        self.reached.get(index).copied().unwrap_or(false).then(|| self.gateway.capabilities(index)).flatten()
    }

    fn namespace(&self, index: usize) -> Option<usize> {
        self.gateway.namespace(index)
    }

    fn client(&self, index: usize) -> impl Future<Output = Result<Client, ClientError>> + Send {
        let reached = self.reached.get(index).copied().unwrap_or(false);
        let pending = self.gateway.client(index);
        async move {
            if !reached {
                return Err(ClientError::Rpc(RcpError::unauthorized()));
            }
            pending.await.map(|c| self.wrap(c))
        }
    }
}
