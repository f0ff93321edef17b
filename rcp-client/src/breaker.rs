//! [`Breaker`]: exponential back-off with jitter and a circuit breaker for one engine, so an
//! engine that fails to connect, or dies after `initialize`, is not respawned on every call.
//!
//! Below [`Backoff::threshold`] consecutive failures the breaker is closed: a connection that
//! closed is replaced at once, a failed connect is retried after [`Backoff::base`]. At the
//! threshold it opens: calls fail fast, with no spawn and no connect, for `base × 2^k` (capped
//! at [`Backoff::max`], ±[`Backoff::jitter`]), `k` counting the failures past the threshold;
//! then one attempt is let through (half-open). The breaker closes again when a connection
//! answers a call after its handshake ([`Breaker::healthy`]).

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

/// How an engine that keeps failing is backed off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Consecutive failures that open the breaker. Default 3.
    pub threshold: u32,
    /// The first back-off (and the pause after a failed connect below the threshold).
    /// Default 1 s.
    pub base: Duration,
    /// The longest back-off. Default 60 s.
    pub max: Duration,
    /// Each back-off is scaled by a random factor in `1 ± jitter`, so engines that failed
    /// together are not retried together. Default 0.2.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { threshold: 3, base: Duration::from_secs(1), max: Duration::from_secs(60), jitter: 0.2 }
    }
}

impl Backoff {
    /// The back-off after `past` failures beyond the threshold (0 for the first), jittered.
    pub fn delay(&self, past: u32) -> Duration {
        let nominal = self.base.saturating_mul(1u32.checked_shl(past.min(31)).unwrap_or(u32::MAX)).min(self.max);
        let jitter = self.jitter.clamp(0.0, 1.0);
        let r = (RandomState::new().hash_one(Instant::now()) >> 11) as f64 / (1u64 << 53) as f64;
        nominal.mul_f64(1.0 - jitter + 2.0 * jitter * r)
    }
}

/// The breaker's state (§ the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through; failures are counted.
    Closed,
    /// Calls fail fast until the back-off ends.
    Open,
    /// The back-off ended: one attempt is under way or allowed; the next failure opens the
    /// breaker again for longer, a served call closes it.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half-open`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
        }
    }
}

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Spawning or connecting (or the handshake) failed.
    Connect,
    /// A connection that was up closed (the engine exited, crashed or broke a limit).
    Closed,
}

/// A breaker's figures, for health reports, metrics and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerHealth {
    /// The state now.
    pub state: BreakerState,
    /// Failures since the engine last served a call.
    pub consecutive_failures: u32,
    /// Failures since the start.
    pub failures_total: u64,
    /// Connections made since the start (each one a spawn, for a stdio engine).
    pub connects_total: u64,
    /// Time left before the next attempt is allowed, when one is being waited for.
    pub retry_in: Option<Duration>,
    /// The last failure, as text.
    pub last_error: Option<String>,
}

/// The back-off and circuit breaker of one engine.
#[derive(Debug, Clone)]
pub struct Breaker {
    policy: Backoff,
    state: BreakerState,
    failures: u32,
    failures_total: u64,
    connects_total: u64,
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

impl Breaker {
    /// A closed breaker under `policy`.
    pub fn new(policy: Backoff) -> Self {
        Self {
            policy,
            state: BreakerState::Closed,
            failures: 0,
            failures_total: 0,
            connects_total: 0,
            retry_at: None,
            last_error: None,
        }
    }

    /// Whether an attempt may be made now; `Err(time left)` while backing off. An open
    /// breaker whose back-off ended turns half-open and lets this attempt through.
    pub fn check(&mut self, now: Instant) -> Result<(), Duration> {
        if let Some(at) = self.retry_at {
            if now < at {
                return Err(at - now);
            }
            self.retry_at = None;
            if self.state == BreakerState::Open {
                self.state = BreakerState::HalfOpen;
            }
        }
        Ok(())
    }

    /// Records a failure; `true` when it opened the breaker (worth a warning).
    pub fn failure(&mut self, kind: Failure, error: String, now: Instant) -> bool {
        self.failures = self.failures.saturating_add(1);
        self.failures_total += 1;
        self.last_error = Some(error);
        if self.failures >= self.policy.threshold.max(1) {
            self.state = BreakerState::Open;
            self.retry_at = Some(now + self.policy.delay(self.failures - self.policy.threshold.max(1)));
            return true;
        }
        self.retry_at = (kind == Failure::Connect).then(|| now + self.policy.base);
        false
    }

    /// Records a connection made (the handshake answered).
    pub fn connected(&mut self) {
        self.connects_total += 1;
    }

    /// Records that the engine served a call: the breaker closes and the failures are
    /// forgotten; `true` when it had failures to forget.
    pub fn healthy(&mut self) -> bool {
        let had = self.failures > 0;
        self.failures = 0;
        self.state = BreakerState::Closed;
        self.retry_at = None;
        had
    }

    /// The state.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Failures since the engine last served a call.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// The last failure, as text.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The figures now.
    pub fn health(&self, now: Instant) -> BreakerHealth {
        BreakerHealth {
            state: self.state,
            consecutive_failures: self.failures,
            failures_total: self.failures_total,
            connects_total: self.connects_total,
            retry_in: self.retry_at.map(|at| at.saturating_duration_since(now)),
            last_error: self.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breaker_opens_at_the_threshold_backs_off_exponentially_and_closes_when_served() {
        let policy =
            Backoff { threshold: 2, base: Duration::from_millis(100), max: Duration::from_secs(1), jitter: 0.2 };
        let mut b = Breaker::new(policy);
        let t0 = Instant::now();
        assert!(!b.failure(Failure::Closed, "crashed".into(), t0));
        assert_eq!(b.check(t0), Ok(()), "a closed connection below the threshold is replaced at once");
        assert!(b.failure(Failure::Closed, "crashed".into(), t0));
        assert_eq!(b.state(), BreakerState::Open);
        let wait = b.check(t0).expect_err("open");
        assert!((80..=120).contains(&wait.as_millis()), "{wait:?}");
        let t1 = t0 + Duration::from_millis(130);
        assert_eq!(b.check(t1), Ok(()));
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.failure(Failure::Connect, "refused".into(), t1);
        let wait = b.check(t1).expect_err("open again, for longer");
        assert!((160..=240).contains(&wait.as_millis()), "{wait:?}");
        for _ in 0..10 {
            b.failure(Failure::Closed, "crashed".into(), t1);
        }
        assert!(b.check(t1).expect_err("capped").as_millis() <= 1200);
        assert!(b.healthy());
        assert_eq!((b.state(), b.consecutive_failures(), b.check(t1)), (BreakerState::Closed, 0, Ok(())));
        assert_eq!(b.health(t1).failures_total, 13);
    }
}
