//! Rule: every request has a trace id (§17.2: correlation ids belong in `_meta.traceId`). It is
//! the caller's when `_meta.traceId` is a string of at most [`MAX_TRACE_ID_BYTES`] visible ASCII
//! characters, else one this server assigns: 32 hex digits, as W3C trace ids, a per-process
//! random half and a counter, so assigning costs no system call. Every log line of the request
//! carries it (the `request` span), and a forwarding engine (the gateway) passes it on in the
//! `_meta` of its engines' calls, so one request can be followed across hops; a caller's W3C
//! `_meta.traceparent` is read here too, for the exported spans ([`crate::telemetry`]).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rcp_wire::Meta;

/// The longest caller trace id kept, in bytes; a longer one is replaced (and the two are logged).
pub(crate) const MAX_TRACE_ID_BYTES: usize = 128;

/// The `_meta` key of the trace id.
pub(crate) const TRACE_ID_KEY: &str = "traceId";

/// The request's trace id: the caller's, when usable, else a fresh one.
pub(crate) fn trace_id(meta: Option<&Meta>) -> String {
    match meta.and_then(|m| m.get(TRACE_ID_KEY)) {
        Some(serde_json::Value::String(s)) if usable(s) => s.clone(),
        Some(other) => {
            let fresh = fresh();
            let sent = other.to_string();
            let sent = sent.get(..MAX_TRACE_ID_BYTES).unwrap_or(&sent);
            tracing::debug!(%sent, assigned = %fresh, "_meta.traceId is not a short visible-ASCII string; assigned one");
            fresh
        }
        None => fresh(),
    }
}

/// The caller's W3C `traceparent` (`_meta.traceparent`), when it is a short string; whether it
/// is well-formed is judged where it is used ([`crate::telemetry`]).
pub(crate) fn traceparent(meta: Option<&Meta>) -> Option<String> {
    match meta?.get(crate::telemetry::TRACEPARENT_KEY)? {
        serde_json::Value::String(s) if s.len() <= 64 => Some(s.clone()),
        _ => None,
    }
}

fn usable(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_TRACE_ID_BYTES && s.bytes().all(|b| b.is_ascii_graphic())
}

/// A new trace id: this process's random 64 bits, then a counter.
fn fresh() -> String {
    static PROCESS: LazyLock<u64> = LazyLock::new(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{:016x}{:016x}", *PROCESS, NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(v: serde_json::Value) -> Meta {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn the_callers_id_is_kept_and_anything_else_replaced() {
        assert_eq!(trace_id(Some(&meta(json!({"traceId": "abc-123"})))), "abc-123");
        let assigned = [
            trace_id(None),
            trace_id(Some(&meta(json!({"traceId": 7})))),
            trace_id(Some(&meta(json!({"traceId": "has space"})))),
            trace_id(Some(&meta(json!({"traceId": "x".repeat(MAX_TRACE_ID_BYTES + 1)})))),
        ];
        for id in &assigned {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
        assert_ne!(assigned[0], assigned[1], "each request its own");
    }
}
