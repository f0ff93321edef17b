//! What a server shows the people who run it, and how they run it:
//!
//! - [`status`]: what an engine reports about itself (readiness for `/readyz`, the gauges of
//!   `/metrics`, the start-up line);
//! - [`observe`]: what the server counts (requests by method and outcome, latency,
//!   rejections), recorded where each decision is made;
//! - `logging`: diagnostics on stderr, never stdout (which carries protocol frames only);
//! - [`telemetry`]: traces across hops (the trace id, W3C `traceparent`, and with the `otlp`
//!   feature OpenTelemetry spans exported over OTLP);
//! - `cli`: the engine-binary scaffold (`serve` flags, data directories, the `quarantine`
//!   command), so every engine binary is run the same way.
//!
//! None of it changes an answer: operations sit beside the protocol, never in its path.

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub(crate) mod logging;
pub(crate) mod observe;
pub(crate) mod status;
pub mod telemetry;
