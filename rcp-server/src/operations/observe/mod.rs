//! What the server counts, recorded where each decision is made (one place each): requests by
//! method and outcome, their latency and how many are in flight (the dispatcher, so stdio and
//! HTTP both count), and rejections before dispatch (the transports).
//!
//! Recording goes through the `metrics` facade, whose recorder is process-global; with the
//! `metrics` feature off every function here compiles to nothing. `handle` installs the
//! Prometheus recorder that `/metrics` renders.

// Only `/metrics` (the HTTP transport) installs the recorder: without `http` nothing renders.
#[cfg(feature = "metrics")]
#[cfg_attr(not(feature = "http"), allow(dead_code))]
mod prometheus;

#[cfg(all(feature = "metrics", feature = "http"))]
pub(crate) use prometheus::{handle, render};

/// Requests answered, by `method` and `outcome` (`ok` or the error code, e.g. `-32602`).
#[cfg(feature = "metrics")]
pub(crate) const REQUESTS: &str = "rcp_requests_total";
/// Time from dispatch to answer, by `method`, in seconds.
#[cfg(feature = "metrics")]
pub(crate) const LATENCY: &str = "rcp_request_duration_seconds";
/// Requests dispatched and not yet answered.
#[cfg(feature = "metrics")]
pub(crate) const IN_FLIGHT: &str = "rcp_requests_in_flight";
/// Requests refused before dispatch, by `reason` (see [`Rejection`]).
#[cfg(feature = "metrics")]
pub(crate) const REJECTIONS: &str = "rcp_rejections_total";

/// Why a request was refused before the dispatcher saw it.
// Without the HTTP transport only `Size` (stdio lines and batches) is ever counted.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// Missing or wrong bearer token (§15.6), including on `/metrics`.
    Auth,
    /// Over the per-client request rate (HTTP `429`).
    Rate,
    /// Over the per-client in-flight limit (`-32011`).
    InFlight,
    /// Over the connection cap (HTTP `503`).
    Connections,
    /// A body, line or batch over its size limit (`-32013`).
    Size,
    /// A body not received within the body timeout (HTTP `408`).
    Timeout,
}

impl Rejection {
    /// The `reason` label value.
    #[cfg(feature = "metrics")]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Rate => "rate",
            Self::InFlight => "in_flight",
            Self::Connections => "connections",
            Self::Size => "size",
            Self::Timeout => "timeout",
        }
    }
}

/// Counts one rejection.
pub(crate) fn reject(reason: Rejection) {
    #[cfg(feature = "metrics")]
    if prometheus::installed() {
        metrics::counter!(REJECTIONS, "reason" => reason.as_str()).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A `result` was sent.
    Ok,
    /// An `error` with this code was sent.
    Error(i64),
}

/// One dispatched request being counted: in flight from [`Observed::start`] until it is
/// finished or dropped (an abandoned request leaves the in-flight gauge too, uncounted).
///
/// Until `/metrics` installs the recorder (an HTTP server with the operations surface on),
/// nothing is recorded: a stdio server pays one atomic load.
#[derive(Debug)]
pub(crate) struct Observed {
    #[cfg(feature = "metrics")]
    counted: Option<(&'static str, std::time::Instant)>,
}

impl Observed {
    /// Starts observing a request to `method` (a spec method name, or `unknown`: the label
    /// set stays bounded whatever clients send).
    pub(crate) fn start(method: &'static str) -> Self {
        #[cfg(feature = "metrics")]
        {
            if !prometheus::installed() {
                return Self { counted: None };
            }
            metrics::gauge!(IN_FLIGHT).increment(1.0);
            Self { counted: Some((method, std::time::Instant::now())) }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = method;
            Self {}
        }
    }

    /// Records the outcome and latency.
    pub(crate) fn finish(self, outcome: Outcome) {
        #[cfg(feature = "metrics")]
        if let Some((method, started)) = self.counted {
            let outcome = match outcome {
                Outcome::Ok => std::borrow::Cow::Borrowed("ok"),
                Outcome::Error(code) => std::borrow::Cow::Owned(code.to_string()),
            };
            metrics::counter!(REQUESTS, "method" => method, "outcome" => outcome).increment(1);
            metrics::histogram!(LATENCY, "method" => method).record(started.elapsed().as_secs_f64());
        }
        #[cfg(not(feature = "metrics"))]
        let _ = outcome;
    }
}

#[cfg(feature = "metrics")]
impl Drop for Observed {
    fn drop(&mut self) {
        if self.counted.is_some() {
            metrics::gauge!(IN_FLIGHT).decrement(1.0);
        }
    }
}

/// Feedback signals recorded durably, of which `suspected` flagged poisoning or injection.
#[cfg(feature = "metrics")]
pub(crate) const FEEDBACK_SIGNALS: &str = "rcp_feedback_signals_total";
/// Hits quarantined by feedback right now.
#[cfg(feature = "metrics")]
pub(crate) const QUARANTINED: &str = "rcp_quarantined_hits";

/// Counts `n` feedback signals recorded, `suspected` of them integrity signals.
pub(crate) fn feedback_signals(n: u64, suspected: u64) {
    #[cfg(feature = "metrics")]
    if prometheus::installed() {
        metrics::counter!(FEEDBACK_SIGNALS, "kind" => "any").increment(n);
        metrics::counter!(FEEDBACK_SIGNALS, "kind" => "suspected").increment(suspected);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (n, suspected);
}

/// Sets how many hits are quarantined.
pub(crate) fn quarantined(n: usize) {
    #[cfg(feature = "metrics")]
    if prometheus::installed() {
        metrics::gauge!(QUARANTINED).set(n as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}
