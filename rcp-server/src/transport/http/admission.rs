//! Admission control per client (IP address): a token-bucket request rate (HTTP `429` with
//! `Retry-After` when exceeded) and a cap on requests in flight (`-32011`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::RateLimit;

struct ClientState {
    tokens: f64,
    refilled: Instant,
    in_flight: usize,
}

/// The per-client budgets of one router.
pub(super) struct Admission {
    rate_limit: Option<RateLimit>,
    max_in_flight: usize,
    clients: Mutex<HashMap<IpAddr, ClientState>>,
}

/// The decision on one request.
pub(super) enum Verdict {
    /// Serve it; the slot is released when dropped.
    Admitted(Slot),
    /// Over the request rate; retry after this long.
    RateLimited(Duration),
    /// Too many requests of this client in flight.
    Busy,
}

/// A client's in-flight slot, released when the request ends, however it ends.
pub(super) struct Slot {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut clients) = self.admission.clients.lock()
            && let Some(c) = clients.get_mut(&self.ip)
        {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }
}

impl Admission {
    /// Budgets with this rate (none: unlimited) and this many requests in flight per client.
    pub(super) fn new(rate_limit: Option<RateLimit>, max_in_flight: usize) -> Self {
        Self { rate_limit, max_in_flight, clients: Mutex::new(HashMap::new()) }
    }

    /// Admits one request of `ip`, or says why not.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Verdict {
        let Ok(mut clients) = self.clients.lock() else { return Verdict::Busy };
        let now = Instant::now();
        let burst = self.rate_limit.map_or(f64::INFINITY, |r| r.burst);
        let c = clients.entry(ip).or_insert(ClientState { tokens: burst, refilled: now, in_flight: 0 });
        if let Some(r) = self.rate_limit {
            let elapsed = now.duration_since(c.refilled).as_secs_f64();
            c.tokens = (c.tokens + elapsed * r.per_second).min(r.burst);
            c.refilled = now;
            if c.tokens < 1.0 {
                let wait = (1.0 - c.tokens) / r.per_second.max(f64::MIN_POSITIVE);
                return Verdict::RateLimited(Duration::from_secs_f64(wait.min(3600.0)));
            }
            c.tokens -= 1.0;
        }
        if c.in_flight >= self.max_in_flight {
            return Verdict::Busy;
        }
        c.in_flight += 1;
        Verdict::Admitted(Slot { admission: Arc::clone(self), ip })
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const B: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

    #[test]
    fn in_flight_slots_are_per_client_and_released_on_drop() {
        let admission = Arc::new(Admission::new(None, 1));
        let slot = admission.admit(A);
        assert!(matches!(slot, Verdict::Admitted(_)));
        assert!(matches!(admission.admit(A), Verdict::Busy));
        assert!(matches!(admission.admit(B), Verdict::Admitted(_)));
        drop(slot);
        assert!(matches!(admission.admit(A), Verdict::Admitted(_)));
    }

    #[test]
    fn the_rate_limit_admits_a_burst_then_asks_to_wait() {
        let admission = Arc::new(Admission::new(Some(RateLimit { per_second: 1.0, burst: 2.0 }), 100));
        assert!(matches!(admission.admit(A), Verdict::Admitted(_)));
        assert!(matches!(admission.admit(A), Verdict::Admitted(_)));
        match admission.admit(A) {
            Verdict::RateLimited(wait) => assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1)),
            _ => panic!("the third request in a burst of two must wait"),
        }
    }
}
