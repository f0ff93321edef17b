//! One request with an id: routed through [`Method`], gated against the session's negotiated
//! capabilities (§7, §12), given its context (deadline §13.1, progress §9, logs §17.1,
//! cancellation §7.14), and run with timeouts, cancellation and panics turned into errors.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use rcp_protocol::gating;
use rcp_protocol::methods::Method;
use rcp_protocol::notifications::LogLevel;
use rcp_protocol::{Meta, RcpError, RequestId};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::Processed;
use super::finish::frame_on;
use super::frame::error_frame;
use super::lifecycle::Lifecycle;
use super::methods;
use crate::context::{ContextParts, RequestContext};
use crate::handler::BoxFuture;
use crate::observe::Outcome;
use crate::outbound::Outbound;
use crate::server::Server;
use crate::session::Session;
use crate::validate;

/// Why a request was answered at once with an error instead of being dispatched.
#[derive(Debug)]
pub(super) enum Refusal {
    /// A protocol error, answered with the request's id.
    Error(RcpError),
    /// The id is already in flight on this session (§4.7); answered with a `null` id.
    DuplicateId(RequestId),
}

/// A request that was admitted: answered at once (lifecycle methods) or running.
pub(super) enum Started {
    /// The lifecycle answer, already complete.
    Answered(Processed),
    /// The handler's run: its frame and how it ended.
    Running(BoxFuture<(Vec<u8>, Outcome)>),
}

impl From<RcpError> for Refusal {
    fn from(e: RcpError) -> Self {
        Self::Error(e)
    }
}

#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

impl Server {
    /// Routes, gates and starts one request; lifecycle methods are answered at once.
    pub(super) fn request(
        &self,
        session: &Arc<Session>,
        id: &str,
        name: &str,
        params: Option<&RawValue>,
        out: &Outbound,
    ) -> Result<Started, Refusal> {
        let method = Method::from_name(name);
        if let Some(lifecycle) = method.and_then(Lifecycle::of) {
            return Ok(Started::Answered(self.lifecycle(session, id, lifecycle, params)?));
        }
        if name.starts_with("notifications/") {
            return Err(
                RcpError::invalid_request(format!("'{name}' is a notification and must not carry an id")).into()
            );
        }
        let Some(neg) = session.negotiated() else {
            return Err(RcpError::not_initialized(name).into());
        };
        let Some(m) = method.filter(|m| neg.profile.permits_method(*m)) else {
            return Err(RcpError::unknown_method(name).into());
        };
        let caps = &neg.capabilities;
        gating::method(caps, m).map_err(|missing| missing.error())?;

        let request_id: RequestId = serde_json::from_str(id).map_err(|_| RcpError::invalid_request("bad id"))?;
        let meta = params
            .filter(|p| memchr::memmem::find(p.get().as_bytes(), b"\"_meta\"").is_some())
            .map(|p| serde_json::from_str::<MetaOnly>(p.get()))
            .transpose()
            .map_err(|e| RcpError::invalid_params("_meta", e.to_string()))?
            .unwrap_or_default()
            .meta;
        let deadline_ms = validate::deadline_ms(meta.as_ref())?;
        if deadline_ms == Some(0) {
            // Already expired on arrival (§13.1): answered at once, the handler never runs.
            return Err(RcpError::timeout(0).into());
        }
        let Some(in_flight) = session.begin(&request_id) else {
            return Err(Refusal::DuplicateId(request_id));
        };

        let mut budget = match m {
            Method::IndexAdd | Method::IndexDelete | Method::MemoryBuild => self.shared.options.write_deadline,
            _ => self.shared.options.request_deadline,
        };
        if let Some(ms) = deadline_ms {
            budget = budget.min(Duration::from_millis(ms));
        }
        let deadline = Instant::now() + budget;
        let progress = caps
            .streaming
            .as_ref()
            .and(meta.as_ref().and_then(|m| m.get("progressToken")))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .map(|t| (t.clone(), out.clone()));
        let request_level =
            meta.as_ref().and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
        let log = caps.log.as_ref().and(request_level.or(neg.client_log)).map(|level| (level, out.clone()));
        let ctx = RequestContext::new(ContextParts {
            id: request_id,
            method: m.name(),
            cancel: in_flight.token.clone(),
            deadline,
            progress,
            log,
            profile: neg.profile,
            capabilities: Arc::clone(caps),
            session_id: session.id().map(str::to_owned),
            meta,
            executor: self.shared.executor.clone(),
        });

        let gate = ctx.clone();
        let call = methods::call(&self.shared, m, params, ctx)?;
        let id = id.to_owned();
        let token = in_flight.token.clone();
        let budget_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
        Ok(Started::Running(Box::pin(async move {
            let started = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = token.cancelled() => Err(RcpError::cancelled(None)),
                r = AssertUnwindSafe(call).catch_unwind() => match r {
                    Ok(r) => r,
                    Err(p) => {
                        let msg = crate::panic::message(p.as_ref());
                        tracing::error!(method = m.name(), panic = %msg, "handler panicked");
                        Err(RcpError::internal(format!("handler panicked: {msg}")))
                    }
                },
                _ = tokio::time::sleep_until(deadline) => {
                    token.cancel();
                    Err(RcpError::timeout(budget_ms))
                }
            };
            // Nothing this request emits from here on reaches the client: its answer is next.
            gate.close_notifications();
            in_flight.answered();
            let elapsed = started.elapsed();
            match &outcome {
                Ok(_) => tracing::debug!(method = m.name(), id = %id, latency_us = elapsed.as_micros() as u64, "ok"),
                Err(e) => {
                    tracing::debug!(method = m.name(), id = %id, latency_us = elapsed.as_micros() as u64, code = e.code.0, "error")
                }
            }
            let framed = match outcome {
                Ok(body) => frame_on(gate.executor(), body, &id).await,
                Err(e) => Err(e),
            };
            match framed {
                Ok(frame) => (frame, Outcome::Ok),
                Err(e) => (error_frame(Some(&id), &e), Outcome::Error(e.code.0)),
            }
        })))
    }
}
