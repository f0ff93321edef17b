//! Admission control per client (IP address): a token-bucket request rate (HTTP `429` with
//! `Retry-After` when exceeded) and a cap on requests in flight (`-32011`).
//!
//! The table of clients stays bounded however many addresses call: a client with nothing in
//! flight and a full bucket carries no state and is forgotten (at once without a rate limit,
//! by a sweep once the table has grown since the last one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::options::RateLimit;

struct ClientState {
    tokens: f64,
    refilled: Instant,
    in_flight: usize,
}

/// Clients at which the first sweep runs; later sweeps run when the table has doubled since.
const SWEEP_AT: usize = 1024;

/// The clients with state, and the size at which the next sweep runs.
struct Clients {
    states: HashMap<IpAddr, ClientState>,
    sweep_at: usize,
}

impl ClientState {
    /// Whether forgetting this client changes nothing: no request in flight, and a bucket that
    /// would be full by now.
    fn idle(&self, rate: Option<RateLimit>, now: Instant) -> bool {
        self.in_flight == 0
            && rate
                .is_none_or(|r| self.tokens + now.duration_since(self.refilled).as_secs_f64() * r.per_second >= r.burst)
    }
}

/// The per-client budgets of one router.
pub(super) struct Admission {
    rate_limit: Option<RateLimit>,
    max_in_flight: usize,
    clients: Mutex<Clients>,
}

/// A client's in-flight slot, released when the request ends, however it ends.
pub(super) struct Slot {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Ok(mut clients) = self.admission.clients.lock() else { return };
        if let Some(c) = clients.states.get_mut(&self.ip) {
            c.in_flight = c.in_flight.saturating_sub(1);
            if self.admission.rate_limit.is_none() && c.in_flight == 0 {
                clients.states.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    /// Budgets with this rate (none: unlimited) and this many requests in flight per client.
    pub(super) fn new(rate_limit: Option<RateLimit>, max_in_flight: usize) -> Self {
        Self { rate_limit, max_in_flight, clients: Mutex::new(Clients { states: HashMap::new(), sweep_at: SWEEP_AT }) }
    }

    /// Takes one token of `ip`'s request rate; `Err` says how long to wait when it has none.
    /// Decided from the headers alone, before the body is read.
    pub(super) fn pace(&self, ip: IpAddr) -> Result<(), Duration> {
        let Some(r) = self.rate_limit else { return Ok(()) };
        let Ok(mut clients) = self.clients.lock() else { return Err(Duration::from_secs(1)) };
        let now = Instant::now();
        if clients.states.len() >= clients.sweep_at {
            clients.states.retain(|_, c| !c.idle(Some(r), now));
            clients.sweep_at = (clients.states.len() * 2).max(SWEEP_AT);
        }
        let c = clients.states.entry(ip).or_insert(ClientState { tokens: r.burst, refilled: now, in_flight: 0 });
        let elapsed = now.duration_since(c.refilled).as_secs_f64();
        c.tokens = (c.tokens + elapsed * r.per_second).min(r.burst);
        c.refilled = now;
        if c.tokens < 1.0 {
            let wait = (1.0 - c.tokens) / r.per_second.max(f64::MIN_POSITIVE);
            return Err(Duration::from_secs_f64(wait.min(3600.0)));
        }
        c.tokens -= 1.0;
        Ok(())
    }

    /// Takes one of `ip`'s in-flight slots, or `None` when all are taken. Called once the
    /// body is read, so a client still sending (or stalling) holds no slot.
    pub(super) fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut clients = self.clients.lock().ok()?;
        let burst = self.rate_limit.map_or(0.0, |r| r.burst);
        let c =
            clients.states.entry(ip).or_insert(ClientState { tokens: burst, refilled: Instant::now(), in_flight: 0 });
        if c.in_flight >= self.max_in_flight {
            return None;
        }
        c.in_flight += 1;
        Some(Slot { admission: Arc::clone(self), ip })
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
        let slot = admission.enter(A);
        assert!(slot.is_some());
        assert!(admission.enter(A).is_none());
        assert!(admission.enter(B).is_some());
        drop(slot);
        assert!(admission.enter(A).is_some());
    }

    #[test]
    fn clients_without_state_are_forgotten() {
        let admission = Arc::new(Admission::new(None, 4));
        for i in 0..5000u32 {
            drop(admission.enter(IpAddr::V4(Ipv4Addr::from(i))));
        }
        assert!(admission.clients.lock().expect("lock").states.is_empty());
        let paced = Arc::new(Admission::new(Some(RateLimit { per_second: 1e9, burst: 1.0 }), 4));
        for i in 0..10_000u32 {
            assert!(paced.pace(IpAddr::V4(Ipv4Addr::from(i))).is_ok());
        }
        let held = paced.clients.lock().expect("lock").states.len();
        assert!(held <= 2 * SWEEP_AT, "{held} clients kept");
    }

    #[test]
    fn the_rate_limit_admits_a_burst_then_asks_to_wait() {
        let admission = Arc::new(Admission::new(Some(RateLimit { per_second: 1.0, burst: 2.0 }), 100));
        assert!(admission.pace(A).is_ok());
        assert!(admission.pace(A).is_ok());
        match admission.pace(A) {
            Err(wait) => assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1)),
            Ok(()) => panic!("the third request in a burst of two must wait"),
        }
        assert!(admission.enter(A).is_some(), "the rate does not take in-flight slots");
    }
}
