//! Retries following §12.2: exponential backoff with jitter, honouring `retryAfterMs`;
//! only retryable codes are retried (`InternalError` at most once).

use std::future::Future;
use std::time::Duration;

use rcp_wire::ErrorCode;

use crate::error::ClientError;

/// How persistently to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in total, the first included.
    pub max_attempts: u32,
    /// Delay before the first retry; doubled each time.
    pub base_delay: Duration,
    /// Ceiling on any single delay (a larger `retryAfterMs` is still honoured).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 4, base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(5) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (1-based), given the server's hint: the larger
    /// of the hint and a jittered exponential backoff in `[d/2, d]`.
    pub fn delay(&self, attempt: u32, retry_after_ms: Option<u64>, jitter: f64) -> Duration {
        let exp = self.base_delay.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(self.max_delay);
        let jittered = exp.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0));
        jittered.max(Duration::from_millis(retry_after_ms.unwrap_or(0)))
    }
}

/// A small per-process jitter source (no cryptographic quality needed).
fn jitter() -> f64 {
    use std::cell::Cell;
    thread_local!(static STATE: Cell<u64> = const { Cell::new(0) });
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            x = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
                | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// Runs `op` until it succeeds, fails with a non-retryable error, or attempts run out.
/// `op` receives the attempt number (1-based).
pub async fn retry<T, F, Fut>(policy: &RetryPolicy, mut op: F) -> Result<T, ClientError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut internal_seen = false;
    let mut attempt = 1;
    loop {
        let err = match op(attempt).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Some(after) = err.retry_hint() else { return Err(err) };
        if err.code() == Some(ErrorCode::INTERNAL_ERROR) {
            if internal_seen {
                return Err(err);
            }
            internal_seen = true;
        }
        if attempt >= policy.max_attempts {
            return Err(err);
        }
        let wait = policy.delay(attempt, after, jitter());
        tracing::debug!(attempt, wait_ms = wait.as_millis() as u64, error = %err, "retrying");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcp_wire::RcpError;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn delay_doubles_is_capped_and_honours_retry_after() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
        };
        assert_eq!(p.delay(1, None, 1.0), Duration::from_millis(100));
        assert_eq!(p.delay(2, None, 1.0), Duration::from_millis(200));
        assert_eq!(p.delay(3, None, 1.0), Duration::from_millis(300));
        assert_eq!(p.delay(2, None, 0.0), Duration::from_millis(100));
        assert_eq!(p.delay(1, Some(2000), 0.3), Duration::from_millis(2000));
    }

    #[tokio::test]
    async fn retries_only_what_section_12_2_allows() {
        let p =
            RetryPolicy { max_attempts: 4, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) };
        let calls = AtomicU32::new(0);
        let r: Result<u32, _> = retry(&p, |n| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { if n < 3 { Err(ClientError::Rpc(RcpError::rate_limited(1))) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = retry(&p, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ClientError::Rpc(RcpError::invalid_params("k", "bad"))) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "-32602 is never retried");
        let calls = AtomicU32::new(0);
        let _: Result<(), _> = retry(&p, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ClientError::Rpc(RcpError::internal("boom"))) }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "-32603 is retried once");
    }
}
