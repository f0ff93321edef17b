//! The protocol's rules, applied once for every engine and every transport: what makes a
//! server built on this crate an RCP server whatever its engine does.
//!
//! - [`dispatch`]: the dispatcher, one inbound frame in and at most one answer out, through
//!   the rules of a request in the spec's order (lifecycle, gating, `_meta`, deadline,
//!   duplicate ids, context, guard, frame), the routes into the engine and the finishing of
//!   every result;
//! - [`validate`]: params checked against what the session negotiated and resolved, every
//!   default applied, into the requests handlers receive (§7.7, §8);
//! - [`session`]: what one connection negotiated (§13), and [`profile`] what each protocol
//!   revision permits (§7.1, §13.2); [`access`]: the scopes a caller holds (§15.6);
//! - [`outbound`]: where the frames a request sends on its own go (progress, logs), and
//!   [`panic`](mod@panic) the text a caught panic is answered with.
//!
//! Why one place: a rule implemented per transport or per engine is a rule some transport or
//! engine forgets. Transports (`crate::transport`) only frame bytes into the dispatcher, and
//! handlers (`crate::handler`) see only requests that passed every rule.

pub mod access;
pub(crate) mod dispatch;
pub(crate) mod outbound;
pub(crate) mod panic;
pub(crate) mod profile;
pub(crate) mod session;
pub(crate) mod validate;
