//! One request with an id, rule by rule (see [`super::rules`] for each rule).
//!
//! Every rule either lets the request on or answers it. The rules up to the handler call run
//! right here, while the transport reads; the call and its answer run in the returned future.

use std::sync::Arc;

use rcp_wire::RcpError;
use rcp_wire::methods::Method;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::Dispatcher;
use super::rules::deadline::Deadline;
use super::rules::in_flight::{self, DuplicateId};
use super::rules::lifecycle::{self, Answer};
use super::rules::{context, frame, gate, guard, meta};
use crate::handler::BoxFuture;
use crate::handler::context::{ContextParts, RequestContext};
use crate::operations::observe::Outcome;
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// Why a request was answered at once with an error instead of being run.
#[derive(Debug)]
pub(super) enum Refusal {
    /// A protocol error, answered with the request's id.
    Error(RcpError),
    /// The id is already in flight on this session (§4.7).
    DuplicateId(DuplicateId),
}

impl From<RcpError> for Refusal {
    fn from(e: RcpError) -> Self {
        Self::Error(e)
    }
}

impl From<DuplicateId> for Refusal {
    fn from(d: DuplicateId) -> Self {
        Self::DuplicateId(d)
    }
}

/// A request that got past the rules: answered at once (a lifecycle method) or running.
pub(super) enum Started {
    /// The lifecycle answer, already complete.
    Answered(Answer),
    /// The handler's run: its frame and how it ended.
    Running(BoxFuture<(Vec<u8>, Outcome)>),
}

/// Applies the rules to request `id` for method `name` on `session`, and starts its handler.
/// `out` carries the notifications the handler sends while it runs.
pub(super) fn start(
    dispatcher: &Dispatcher,
    session: &Arc<Session>,
    id: &str,
    name: &str,
    params: Option<&RawValue>,
    out: &Outbound,
) -> Result<Started, Refusal> {
    let method = Method::from_name(name);
    if let Some(answer) = method.and_then(|m| lifecycle::answer(&dispatcher.identity, session, id, m, params)) {
        return Ok(Started::Answered(answer?));
    }
    let (m, negotiated) = gate::admit(session, name, method)?;
    let request_id = in_flight::parse_id(id)?;
    let meta = meta::parse(params)?;
    let deadline = Deadline::of(&dispatcher.options, m, meta.as_ref())?;
    let in_flight = in_flight::enter(session, &request_id)?;
    let caps = &negotiated.capabilities;
    let ctx = RequestContext::new(ContextParts {
        id: request_id,
        method: m.name(),
        cancel: in_flight.token.clone(),
        deadline: deadline.at,
        progress: context::progress(caps, meta.as_ref(), out),
        log: context::log(caps, meta.as_ref(), negotiated.client_log, out),
        profile: negotiated.profile,
        capabilities: Arc::clone(caps),
        session_id: session.id().map(str::to_owned),
        meta,
        // A pipe's only peer is paced by its pipe, not refused (see `crate::transport`).
        executor: session.paced().cloned().unwrap_or_else(|| dispatcher.executor.clone()),
    });
    let call = dispatcher.routes.start(m, params, ctx.clone())?;
    let id = id.to_owned();
    Ok(Started::Running(Box::pin(async move {
        let started = Instant::now();
        let outcome = guard::run(call, m, &in_flight.token, deadline).await;
        // Nothing this request emits from here on reaches the client: its answer is next.
        ctx.close_notifications();
        in_flight.answered();
        trace(m, &id, started, &outcome);
        frame::answer(ctx.executor(), outcome, &id).await
    })))
}

/// The debug line of an answered request.
fn trace<T>(m: Method, id: &str, started: Instant, outcome: &Result<T, RcpError>) {
    let latency_us = started.elapsed().as_micros() as u64;
    match outcome {
        Ok(_) => tracing::debug!(method = m.name(), id = %id, latency_us, "ok"),
        Err(e) => tracing::debug!(method = m.name(), id = %id, latency_us, code = e.code.0, "error"),
    }
}
