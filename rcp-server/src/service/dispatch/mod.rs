//! The dispatcher: one place where every rule of the protocol is applied, whatever the
//! transport. It turns one inbound frame (a request, a notification or a batch) into at most
//! one outbound frame.
//!
//! - [`envelope`]: the JSON-RPC envelope decoded, and the frames written back;
//! - [`request`]: one request with an id, through the [`rules`] in order: lifecycle, gating,
//!   `_meta`, deadline, duplicate ids, notifications, then the call under its guards, framed;
//! - [`routes`]: the registered method families, [`methods`] the families themselves (params
//!   validated, the handler called) and [`finish`] what every result is made to satisfy;
//! - [`Dispatcher`]: the parts a request is served from.
//!
//! Every request and every invalid frame is counted here, once, by method and outcome
//! (`crate::operations::observe`), so stdio and HTTP report the same figures.

mod envelope;
mod finish;
mod idempotency;
pub(crate) mod methods;
mod request;
mod routes;
pub(crate) mod rules;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use rcp_wire::RcpError;
use rcp_wire::notifications::{self, CancelParams};
use serde_json::value::RawValue;

pub(crate) use envelope::error_frame;
use envelope::{Inbound, decode, join_batch};
#[cfg(feature = "http")]
pub(crate) use envelope::{Shape, shape};
pub(crate) use idempotency::IdempotencyCache;
pub(crate) use routes::Routes;
pub(crate) use rules::lifecycle::Identity;
#[cfg(feature = "http")]
pub(crate) use rules::lifecycle::answered_at_once;

use crate::handler::BoxFuture;
use crate::operations::observe::{self, Observed, Outcome, Rejection};
use crate::server::exec::Executor;
use crate::server::options::ServerOptions;
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// The parts every request is served from: who the server is and what it enables (for the
/// lifecycle methods), the registered methods, the limits and deadlines, and the CPU executor
/// handlers run on. Shared, behind an `Arc`, by the server and every transport serving it.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    /// Identity and capabilities.
    pub identity: Identity,
    /// The registered method families.
    pub routes: Routes,
    /// Limits and deadlines.
    pub options: ServerOptions,
    /// The bounded pool CPU-bound handler work runs on.
    pub executor: Executor,
}

/// The one outcome of an inbound frame (a request, a notification or a batch), whichever rule
/// answered it: what the transport sends, and when.
pub(crate) enum Processed {
    /// Nothing to send (notifications, all-notification batches, stray responses).
    Nothing,
    /// The answer is ready.
    Ready(Vec<u8>),
    /// The answer will be ready when this future completes; transports spawn it.
    Pending(BoxFuture<Option<Vec<u8>>>),
    /// `shutdown` was received: stop reading, drain in-flight requests, then send this answer.
    Shutdown(Vec<u8>),
}

impl std::fmt::Debug for Processed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nothing => f.write_str("Nothing"),
            Self::Ready(b) => write!(f, "Ready({})", String::from_utf8_lossy(b)),
            Self::Pending(_) => f.write_str("Pending"),
            Self::Shutdown(_) => f.write_str("Shutdown"),
        }
    }
}

/// Processes one inbound frame (a single message or a batch) for `session`.
///
/// `out` receives notifications the request emits while it runs (progress, logs); the answer
/// itself is returned. This is the entry point transports use.
pub(crate) fn process(dispatcher: &Dispatcher, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
    let first = frame.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return process_batch(dispatcher, session, frame, out);
    }
    process_one(dispatcher, session, frame, out)
}

/// A batch (§11): every member processed, the answers joined into one array frame.
fn process_batch(dispatcher: &Dispatcher, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
    let members: Vec<&RawValue> = match serde_json::from_slice(frame) {
        Ok(m) => m,
        Err(e) => return Processed::Ready(error_frame(None, &RcpError::parse_error(e.to_string()))),
    };
    if members.is_empty() {
        return Processed::Ready(error_frame(None, &RcpError::invalid_request("empty batch")));
    }
    if members.len() > dispatcher.options.max_batch {
        observe::reject(Rejection::Size);
        let e = RcpError::payload_too_large(format!(
            "batch of {} requests exceeds the limit of {}",
            members.len(),
            dispatcher.options.max_batch
        ));
        return Processed::Ready(error_frame(None, &e));
    }
    let mut ready = Vec::new();
    let mut pending = Vec::new();
    for m in members {
        match process_one(dispatcher, session, m.get().as_bytes(), out) {
            Processed::Nothing => {}
            Processed::Ready(b) | Processed::Shutdown(b) => ready.push(b),
            Processed::Pending(f) => pending.push(f),
        }
    }
    if ready.is_empty() && pending.is_empty() {
        return Processed::Nothing;
    }
    if pending.is_empty() {
        return Processed::Ready(join_batch(ready));
    }
    Processed::Pending(Box::pin(async move {
        let rest = futures::future::join_all(pending).await;
        ready.extend(rest.into_iter().flatten());
        Some(join_batch(ready))
    }))
}

/// One message: a request is run through [`request::start`] (which counts it); a notification is
/// applied; anything else is answered or ignored as JSON-RPC says.
fn process_one(dispatcher: &Dispatcher, session: &Arc<Session>, frame: &[u8], out: &Outbound) -> Processed {
    match decode(frame) {
        Inbound::Invalid(answer) => {
            // Counted too, under `invalid`, with the code of the error frame just built.
            Observed::start("invalid").finish(Outcome::Error(envelope::error_code(&answer).unwrap_or(0)));
            Processed::Ready(answer)
        }
        Inbound::Response => Processed::Nothing,
        Inbound::Notification { method, params } => {
            notification(session, &method, params);
            Processed::Nothing
        }
        Inbound::Request { id, method, params } => request::start(dispatcher, session, id, &method, params, out),
    }
}

/// A notification (§4.5): `notifications/cancel` cancels an in-flight request (§7.14); every
/// other notification, known or not, is ignored and never answered.
fn notification(session: &Session, method: &str, params: Option<&RawValue>) {
    if method == notifications::CANCEL {
        match params.map(|p| serde_json::from_str::<CancelParams>(p.get())) {
            Some(Ok(c)) => {
                let found = session.cancel(&c.id);
                tracing::debug!(id = %c.id, found, "cancel");
            }
            _ => tracing::debug!("ignoring a malformed notifications/cancel"),
        }
    }
}
