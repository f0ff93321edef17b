//! Connections to the registry's engines: opened lazily, one per engine, replaced when the
//! transport dies, and backed off when the engine keeps failing: each engine has a
//! [`Breaker`] (exponential back-off with jitter, open after a few consecutive failures,
//! half-open probe once the back-off ends), so an engine that crashes after `initialize` is
//! not respawned on every request. The breakers' state is in `catalog/list` (`_meta.health`),
//! on `/metrics` and in the logs.
//!
//! Each entry connects with its own options (headers, bearer token from `tokenEnv`), which is
//! why the gateway keeps its own pool rather than `rcp_client::Federation`'s, whose
//! `ClientOptions` are shared by every engine.

use std::sync::Mutex as SyncMutex;
use std::time::{Duration, Instant};

use rcp_client::breaker::{Backoff, Breaker, BreakerHealth, BreakerState, Failure};
use rcp_client::registry::Transport;
use rcp_client::{Client, ClientError, ClientOptions, ConnectError, EngineSpec, Limits};
use rcp_wire::lifecycle::PeerInfo;
use tokio::sync::Mutex;

use crate::registry::GatewayEntry;

/// The environment variable through which a gateway tells the stdio engines it spawns which
/// gateways are above them, so a registry cycle of stdio gateways stops spawning at start-up.
pub const PATH_ENV: &str = "RCP_GATEWAY_PATH";

/// Options of the pool.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Deadline for spawning/connecting one engine and its `initialize`.
    pub connect_timeout: Duration,
    /// How an engine that keeps failing is backed off; `backoff.base` is also the pause after
    /// a failed connect before the breaker opens.
    pub backoff: Backoff,
    /// What each engine connection may hold (frame size and time, queue, logs).
    pub limits: Limits,
    /// The identity the gateway sends in `initialize.client`.
    pub client: PeerInfo,
    /// Gateways above this one and this one (joined into [`PATH_ENV`] for stdio children).
    pub ancestry: Vec<String>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("engines", &self.entries.len()).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Slot {
    client: Option<Client>,
    /// Calls the client had answered when it connected (its handshake).
    answers_at_connect: u64,
    /// The last connect error, returned while waiting to retry below the threshold.
    failed: Option<ClientError>,
}

/// One lazily connected client per registry entry, each behind its breaker.
pub struct Pool {
    entries: Vec<GatewayEntry>,
    slots: Vec<Mutex<Slot>>,
    /// Kept apart from the slots, whose lock is held while connecting, so health reads never
    /// wait for a connect.
    breakers: Vec<SyncMutex<Breaker>>,
    options: PoolOptions,
}

impl Pool {
    /// A pool over `entries`; nothing connects yet.
    pub fn new(entries: Vec<GatewayEntry>, options: PoolOptions) -> Self {
        let slots = entries.iter().map(|_| Mutex::new(Slot::default())).collect();
        let breakers = entries.iter().map(|_| SyncMutex::new(Breaker::new(options.backoff))).collect();
        Self { entries, slots, breakers, options }
    }

    /// The registry entries, in file order.
    pub fn entries(&self) -> &[GatewayEntry] {
        &self.entries
    }

    /// Each engine's breaker figures, in registry order.
    pub fn health(&self) -> Vec<BreakerHealth> {
        let now = Instant::now();
        self.breakers.iter().map(|b| with(b, |b| b.health(now))).collect()
    }

    /// Publishes each engine's breaker figures as `metrics` gauges and counters (rendered on
    /// `/metrics`): `rcp_gateway_engine_breaker_state` (0 closed, 1 half-open, 2 open),
    /// `rcp_gateway_engine_consecutive_failures`, `rcp_gateway_engine_failures_total` and
    /// `rcp_gateway_engine_connects_total`, labelled `engine`.
    pub fn publish_metrics(&self) {
        for (entry, h) in self.entries.iter().zip(self.health()) {
            let engine = entry.spec.id.clone();
            let state = match h.state {
                BreakerState::Closed => 0.0,
                BreakerState::HalfOpen => 1.0,
                BreakerState::Open => 2.0,
            };
            metrics::gauge!("rcp_gateway_engine_breaker_state", "engine" => engine.clone()).set(state);
            metrics::gauge!("rcp_gateway_engine_consecutive_failures", "engine" => engine.clone())
                .set(f64::from(h.consecutive_failures));
            metrics::counter!("rcp_gateway_engine_failures_total", "engine" => engine.clone())
                .absolute(h.failures_total);
            metrics::counter!("rcp_gateway_engine_connects_total", "engine" => engine).absolute(h.connects_total);
        }
    }

    /// The live client of entry `index`, connecting (or reconnecting a dead one) if needed,
    /// unless its breaker says to wait: then the last failure (below the threshold) or
    /// [`ConnectError::CircuitOpen`], at once.
    pub async fn client(&self, index: usize) -> Result<Client, ClientError> {
        let (Some(entry), Some(slot), Some(breaker)) =
            (self.entries.get(index), self.slots.get(index), self.breakers.get(index))
        else {
            return Err(ClientError::Connect(ConnectError::Unavailable(format!("no engine #{index}"))));
        };
        let id = &entry.spec.id;
        let mut slot = slot.lock().await;
        if let Some(c) = &slot.client {
            match c.closed_reason() {
                None => {
                    if c.answers() > slot.answers_at_connect && with(breaker, Breaker::healthy) {
                        tracing::info!(engine = %id, "engine serving again; failures forgotten, circuit closed");
                    }
                    return Ok(c.clone());
                }
                Some(reason) => {
                    let served = c.answers() > slot.answers_at_connect;
                    slot.client = None;
                    let (opened, health) = with(breaker, |b| {
                        if served {
                            b.healthy();
                        }
                        let opened = b.failure(Failure::Closed, reason.clone(), Instant::now());
                        (opened, b.health(Instant::now()))
                    });
                    log_failure(id, opened, &health, &reason);
                }
            }
        }
        if let Err(retry_in) = with(breaker, |b| b.check(Instant::now())) {
            let (failures, last) =
                with(breaker, |b| (b.consecutive_failures(), b.last_error().unwrap_or_default().to_owned()));
            if failures < self.options.backoff.threshold
                && let Some(e) = &slot.failed
            {
                return Err(e.clone());
            }
            return Err(ClientError::Connect(ConnectError::CircuitOpen {
                engine: id.clone(),
                failures,
                retry_in,
                last,
            }));
        }
        let probing = with(breaker, |b| b.state() == BreakerState::HalfOpen);
        if probing {
            tracing::info!(engine = %id, "back-off over; probing the engine (half-open)");
        }
        let connected = tokio::time::timeout(self.options.connect_timeout, self.connect(entry))
            .await
            .unwrap_or_else(|_| Err(ClientError::Timeout(self.options.connect_timeout.as_millis() as u64)));
        match connected {
            Ok(c) => {
                with(breaker, Breaker::connected);
                slot.failed = None;
                slot.answers_at_connect = c.answers();
                slot.client = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                let (opened, health) = with(breaker, |b| {
                    let opened = b.failure(Failure::Connect, e.to_string(), Instant::now());
                    (opened, b.health(Instant::now()))
                });
                log_failure(id, opened, &health, &e.to_string());
                slot.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Connects every engine concurrently; returns each outcome in registry order.
    pub async fn connect_all(&self) -> Vec<Result<Client, ClientError>> {
        futures::future::join_all((0..self.entries.len()).map(|i| self.client(i))).await
    }

    async fn connect(&self, entry: &GatewayEntry) -> Result<Client, ClientError> {
        // `selector::connect` adds the entry's own `headers` and `tokenEnv` bearer token.
        let options = ClientOptions {
            client: self.options.client.clone(),
            connect_timeout: self.options.connect_timeout,
            // Each call sets its own deadline.
            request_timeout: None,
            http_headers: Vec::new(),
            label: entry.spec.id.clone(),
            limits: self.options.limits,
            ..ClientOptions::default()
        };
        let spec = self.spawn_spec(&entry.spec);
        rcp_client::selector::connect(&spec, &options).await
    }

    /// A stdio command runs under `env RCP_GATEWAY_PATH=...` so that a gateway it starts knows
    /// its ancestry (the client offers no way to set a child's environment).
    fn spawn_spec(&self, spec: &EngineSpec) -> EngineSpec {
        let mut spec = spec.clone();
        if let Transport::Stdio { command } = &mut spec.transport {
            let mut wrapped = vec!["env".to_owned(), format!("{PATH_ENV}={}", self.options.ancestry.join(","))];
            wrapped.append(command);
            *command = wrapped;
        }
        spec
    }
}

/// Runs `f` on the breaker (a poisoned lock is taken over: the breaker holds only figures).
fn with<T>(breaker: &SyncMutex<Breaker>, f: impl FnOnce(&mut Breaker) -> T) -> T {
    let mut b = breaker.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut b)
}

/// Logs one failure of engine `id`; a warning that says so when it opened the breaker.
fn log_failure(id: &str, opened: bool, health: &BreakerHealth, error: &str) {
    let failures = health.consecutive_failures;
    if opened {
        let retry_in_ms = health.retry_in.unwrap_or_default().as_millis() as u64;
        tracing::warn!(engine = %id, failures, retry_in_ms, %error, "circuit open: engine failed {failures} times in a row; backing off");
    } else {
        tracing::warn!(engine = %id, failures, %error, "engine failed; reconnecting on next use");
    }
}
