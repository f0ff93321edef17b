//! The error of a fan-out in which no engine answered (§12, §16.2): the rule
//! [`super::Federation`] and rcp-gateway's aggregator share.
//!
//! When an engine refused the request itself (`-32602` invalid params, `-32005` an option it
//! does not support, `-32013` too large), the request is at fault and retrying it cannot help:
//! that refusal is the answer, with its code and `error.data` (field, limit) kept and its
//! message naming the engine. Only when every engine failed for reasons of its own (down,
//! timed out, crashed) is the answer `-32010` backend unavailable, with each engine's cause in
//! `error.data.engines` and `retryable` saying whether a retry may succeed.

use rcp_wire::{ErrorCode, RcpError};
use serde_json::json;

use crate::error::ClientError;

/// The codes with which an engine says the request itself is at fault.
const REQUEST_AT_FAULT: [ErrorCode; 3] =
    [ErrorCode::INVALID_PARAMS, ErrorCode::OPTION_UNSUPPORTED, ErrorCode::PAYLOAD_TOO_LARGE];

/// The error of a fan-out in which no engine answered; `failures` are the engines that failed
/// (registry id and error), in registry order. See the module documentation for the rule.
pub fn no_answer<'a>(failures: impl IntoIterator<Item = (&'a str, &'a ClientError)>) -> RcpError {
    let failures: Vec<(&str, &ClientError)> = failures.into_iter().collect();
    let refusal = failures.iter().find_map(|(id, e)| {
        let e = e.to_rcp();
        REQUEST_AT_FAULT.contains(&e.code).then_some((*id, e))
    });
    if let Some((id, mut e)) = refusal {
        e.message = format!("engine '{id}': {}", e.message);
        return e;
    }
    let causes: Vec<String> = failures.iter().map(|(id, e)| format!("engine '{id}': {e}")).collect();
    let detail = if causes.is_empty() { "no engine could be asked".to_owned() } else { causes.join("; ") };
    let retryable = failures.is_empty() || failures.iter().any(|(_, e)| is_transient(e));
    let mut err = RcpError::backend_unavailable(format!("every engine failed: {detail}")).with_retryable(retryable);
    let engines: Vec<_> = failures
        .iter()
        .map(|(id, e)| {
            let r = e.to_rcp();
            json!({"id": id, "code": r.code.0, "message": r.message})
        })
        .collect();
    if let Some(data) = err.data.as_mut() {
        data.extra.insert("engines".to_owned(), engines.into());
    }
    err
}

/// Whether an engine's failure may pass: it could not be reached, timed out or crashed, or its
/// error is retryable (§12.2).
fn is_transient(e: &ClientError) -> bool {
    matches!(e, ClientError::Closed(_) | ClientError::Connect(_)) || e.retry_hint().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Disconnect;

    #[test]
    fn an_engine_refusing_the_request_is_the_answer_not_an_outage() {
        let down = ClientError::Closed(Disconnect::Eof);
        let refused = ClientError::Rpc(RcpError::invalid_params("query", "5000 terms; at most 1024").with_limit(1024));
        let e = no_answer([("a", &down), ("b", &refused)]);
        assert_eq!((e.code, e.field(), e.limit()), (ErrorCode::INVALID_PARAMS, Some("query"), Some(1024)), "{e}");
        assert!(e.message.starts_with("engine 'b': "), "{e}");
        assert_ne!(e.data.as_ref().and_then(|d| d.retryable), Some(true));
    }

    #[test]
    fn only_real_unavailability_is_32010_with_each_cause() {
        let down = ClientError::Closed(Disconnect::Eof);
        let slow = ClientError::Timeout(500);
        let e = no_answer([("a", &down), ("b", &slow)]);
        assert_eq!(e.code, ErrorCode::BACKEND_UNAVAILABLE);
        let data = e.data.as_ref().unwrap();
        assert_eq!(data.retryable, Some(true));
        assert_eq!(data.extra["engines"][1]["id"], "b");
        assert_eq!(data.extra["engines"][1]["code"], -32014);
        assert!(data.detail.as_deref().unwrap().contains("engine 'a': transport closed"), "{e}");

        let version = ClientError::VersionTooOld { negotiated: 1, minimum: 2 };
        assert_eq!(no_answer([("a", &version)]).data.unwrap().retryable, Some(false));
    }
}
