//! One request with an id, rule by rule (see [`super::rules`] for each rule).
//!
//! Every rule either lets the request on or answers it. The rules up to the handler call run
//! right here, while the transport reads; the call and its answer run in the returned future.
//! Whichever way, the request comes to one [`Processed`], the outcome every transport reads.

use std::sync::Arc;

use rcp_wire::methods::Method;
use rcp_wire::{ErrorCode, RcpError};
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::envelope::error_frame;
use super::rules::deadline::Deadline;
use super::rules::in_flight::{self, DuplicateId};
use super::rules::lifecycle;
use super::rules::{context, frame, gate, guard, meta, trace};
use super::{Dispatcher, Processed};
use crate::handler::BoxFuture;
use crate::handler::context::{ContextParts, RequestContext};
use crate::operations::observe::{Observed, Outcome};
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// Why a request was answered at once with an error instead of being run.
#[derive(Debug)]
enum Refusal {
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

impl Refusal {
    /// The label the request is counted under.
    fn outcome(&self) -> Outcome {
        match self {
            Self::Error(e) => Outcome::Error(e.code.0),
            Self::DuplicateId(_) => Outcome::Error(ErrorCode::INVALID_REQUEST.0),
        }
    }

    /// The error frame: with the request's id, or uncorrelated for a duplicate id.
    fn frame(&self, id: &str) -> Vec<u8> {
        match self {
            Self::Error(e) => error_frame(Some(id), e),
            Self::DuplicateId(dup) => dup.frame(),
        }
    }
}

/// Request `id` for method `name` on `session`, through the rules: answered at once (a
/// lifecycle method, or a refusal) or running its handler. `out` carries the notifications the
/// handler sends while it runs. Every request is counted here, once, by method and outcome,
/// whatever the transport and however it ends.
pub(super) fn start(
    dispatcher: &Dispatcher,
    session: &Arc<Session>,
    id: &str,
    name: &str,
    params: Option<&RawValue>,
    out: &Outbound,
) -> Processed {
    let method = Method::from_name(name);
    let observed = Observed::start(method.map_or("unknown", Method::name));
    if let Some(answer) = method.and_then(|m| lifecycle::answer(&dispatcher.identity, session, id, m, params)) {
        return match answer {
            Ok(answer) => {
                observed.finish(Outcome::Ok);
                answer
            }
            Err(e) => refuse(observed, id, Refusal::Error(e)),
        };
    }
    match call(dispatcher, session, id, name, method, params, out) {
        Ok(run) => Processed::Pending(Box::pin(async move {
            let (frame, outcome) = run.await;
            observed.finish(outcome);
            Some(frame)
        })),
        Err(refusal) => refuse(observed, id, refusal),
    }
}

/// A refused request, counted and answered.
fn refuse(observed: Observed, id: &str, refusal: Refusal) -> Processed {
    observed.finish(refusal.outcome());
    Processed::Ready(refusal.frame(id))
}

/// The rules after lifecycle, in order, and the handler's run: its frame and how it ended.
fn call(
    dispatcher: &Dispatcher,
    session: &Arc<Session>,
    id: &str,
    name: &str,
    method: Option<Method>,
    params: Option<&RawValue>,
    out: &Outbound,
) -> Result<BoxFuture<(Vec<u8>, Outcome)>, Refusal> {
    let (m, negotiated) = gate::admit(session, name, method)?;
    let request_id = in_flight::parse_id(id)?;
    let meta = meta::parse(params)?;
    let trace_id = trace::trace_id(meta.as_ref());
    let traceparent = trace::traceparent(meta.as_ref());
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
        session: session.scope().clone(),
        trace_id,
        grant: session.grant(),
        meta,
        // A pipe's only peer is paced by its pipe, not refused (see `crate::transport`).
        executor: session.paced().cloned().unwrap_or_else(|| dispatcher.executor.clone()),
    });
    // Every line the request logs, its handler's included, names its method, id and trace id.
    let span = tracing::info_span!("request", method = m.name(), id = %id, trace_id = %ctx.trace_id());
    crate::telemetry::continue_trace(&span, ctx.trace_id(), traceparent.as_deref());
    let call = span.in_scope(|| dispatcher.routes.start(m, params, ctx.clone()))?;
    let id = id.to_owned();
    let answered = async move {
        let started = Instant::now();
        let outcome = guard::run(call, m, &in_flight.token, deadline).await;
        // Nothing this request emits from here on reaches the client: its answer is next.
        ctx.close_notifications();
        in_flight.answered();
        trace(m, &id, started, &outcome);
        frame::answer(ctx.executor(), outcome, &id).await
    };
    Ok(Box::pin(tracing::Instrument::instrument(answered, span)))
}

/// The debug line of an answered request.
fn trace<T>(m: Method, id: &str, started: Instant, outcome: &Result<T, RcpError>) {
    let latency_us = started.elapsed().as_micros() as u64;
    match outcome {
        Ok(_) => tracing::debug!(method = m.name(), id = %id, latency_us, "ok"),
        Err(e) => tracing::debug!(method = m.name(), id = %id, latency_us, code = e.code.0, "error"),
    }
}
