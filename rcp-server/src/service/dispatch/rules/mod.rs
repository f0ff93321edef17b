//! The rules a request with an id passes on its way to a handler and back, in the order
//! [`super::request`] applies them. Each is one small unit with its own tests, and each either
//! lets the request on or answers it:
//!
//! 1. [`lifecycle`]: `initialize`, `info`, `ping` and `shutdown` are answered by the framework,
//!    before `initialize` too and never gated (§7.1, §7.2, §7.12, §7.15, §13);
//! 2. [`gate`]: no id on a notification; an initialised session; a method of the negotiated
//!    revision; its capability advertised (§7, §12, §13);
//! 3. [`meta`]: `_meta`, read only when the params carry one; [`trace`]: the request's trace id
//!    (`_meta.traceId`, or one assigned), on every log line of the request;
//! 4. [`deadline`]: the server's budget, which `_meta.deadlineMs` may only shorten (§13.1);
//! 5. [`in_flight`]: one request per id at a time on a session (§4.7);
//! 6. [`context`]: which progress and log frames the handler may send (§9, §17.1);
//! 7. [`guard`]: cancellation, the deadline and a panic each end the call with its error
//!    (§7.14, §13.1);
//! 8. [`frame`]: the answer framed once, from the finished result (§4.3, §12).
//!
//! Between 6 and 7 the method's family validates the params and starts the handler
//! ([`super::routes`]).

pub(crate) mod context;
pub(crate) mod deadline;
pub(crate) mod frame;
pub(crate) mod gate;
pub(crate) mod guard;
pub(crate) mod in_flight;
pub(crate) mod lifecycle;
pub(crate) mod meta;
pub(crate) mod trace;
