//! Rule: a running call ends in exactly one way, whichever comes first: the client cancels it
//! (`-32006`, §7.14), it panics (`-32603`; the session and the server go on), it finishes, or
//! its deadline passes (`-32014`, §13.1; the cancellation token then fires too, so work off the
//! async runtime stops early).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use rcp_wire::RcpError;
use rcp_wire::methods::Method;
use tokio_util::sync::CancellationToken;

use super::deadline::Deadline;
use super::frame::Body;

/// Runs `call`, a handler call to `method`, under its request's cancellation and deadline.
pub(crate) async fn run(
    call: impl Future<Output = Result<Body, RcpError>>,
    method: Method,
    cancel: &CancellationToken,
    deadline: Deadline,
) -> Result<Body, RcpError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(RcpError::cancelled(None)),
        r = AssertUnwindSafe(call).catch_unwind() => match r {
            Ok(r) => r,
            Err(p) => {
                let msg = crate::service::panic::message(p.as_ref());
                tracing::error!(method = method.name(), panic = %msg, "handler panicked");
                Err(RcpError::internal(format!("handler panicked: {msg}")))
            }
        },
        _ = tokio::time::sleep_until(deadline.at) => {
            cancel.cancel();
            Err(RcpError::timeout(deadline.budget_ms()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rcp_wire::ErrorCode;
    use tokio::time::Instant;

    use super::*;
    use crate::service::dispatch::rules::frame::body;

    fn within(ms: u64) -> Deadline {
        let budget = Duration::from_millis(ms);
        Deadline { at: Instant::now() + budget, budget }
    }

    fn code(r: Result<Body, RcpError>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[tokio::test]
    async fn a_finished_call_is_its_result() {
        let done = async { Ok(body(1)) };
        assert!(run(done, Method::Retrieve, &CancellationToken::new(), within(1_000)).await.is_ok());
    }

    #[tokio::test]
    async fn a_cancelled_call_answers_cancelled() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let never = std::future::pending();
        assert_eq!(code(run(never, Method::Retrieve, &cancel, within(1_000)).await), Some(ErrorCode::CANCELLED));
    }

    #[tokio::test]
    async fn a_late_call_times_out_and_fires_its_token() {
        let cancel = CancellationToken::new();
        let never = std::future::pending();
        assert_eq!(code(run(never, Method::Retrieve, &cancel, within(10)).await), Some(ErrorCode::TIMEOUT));
        assert!(cancel.is_cancelled(), "work off the runtime is told to stop");
    }

    async fn panicking() -> Result<Body, RcpError> {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_panic_is_an_internal_error() {
        let r = run(panicking(), Method::Retrieve, &CancellationToken::new(), within(1_000)).await;
        let e = r.err();
        assert_eq!(e.as_ref().map(|e| e.code), Some(ErrorCode::INTERNAL_ERROR));
        assert!(e.is_some_and(|e| serde_json::to_string(&e).is_ok_and(|s| s.contains("boom"))));
    }
}
