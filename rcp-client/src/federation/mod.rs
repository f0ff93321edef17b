//! [`Federation`]: the engines of a registry as one (§16): `retrieve` fanned out to every
//! engine and the ranked lists fused (§16.2, §16.3), and every other method through the
//! federation core ([`exec`]): `graph` and `memory/recall` fanned out and merged; `embed`,
//! `embed/sparse`, `embed/multi`, `rerank`, `query/transform` and `memory/build` routed to one
//! engine; `feedback` routed back to the engines that produced each hit.
//!
//! The fan-out itself ([`FanOut`]) and the per-engine params ([`engine_params`]) are shared
//! with aggregators such as rcp-gateway.
//!
//! Engines that do not advertise `retrieve` (or cannot honour the request's filter) are
//! skipped, not failed. Each engine gets its own client-side deadline, so a slow non-required
//! engine is dropped; a `required` engine's failure fails the whole query with its error; if
//! every engine fails the query fails, never with an empty success: with an engine's own
//! refusal of the request (`-32602`, ...) when there is one, else `-32010` ([`no_answer`]). Skipped and failed
//! engines are listed in `usage.notes` and `_meta.degraded`. Fusion is RRF by default,
//! `weighted` on request, and `convex` only when every contributing engine advertises
//! `scoreFloor` (otherwise RRF, with a note).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rcp_wire::fusion::{self, EngineList, FusionMethod};
use rcp_wire::{Hit, Meta, RetrieveParams, RetrieveResult, Usage};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::breaker::{Backoff, Breaker, BreakerState, Failure};
use crate::client::{Client, ClientOptions};
use crate::error::{ClientError, ConnectError};
use crate::registry::{EngineSpec, Registry, RegistryError};
use crate::selector::connect;
use origin::{Namespaces, OriginLedger};

mod calls;
pub mod capabilities;
pub mod discover;
mod diversify;
pub mod exec;
mod failure;
mod fan_out;
pub mod memory;
pub mod merge;
pub mod origin;
mod params;
pub mod route;
mod snapshot;

pub use diversify::{MAX_MMR_POOL, diversify_fused, mmr_pool};
pub use failure::no_answer;
pub use fan_out::{FanOut, Gathered, ProgressSink, Reply, RequiredFailed, Target};
pub use params::{engine_params, fusion_method, preferred_fusion, unsuited};
pub use snapshot::Snapshot;

/// Options of a federation.
#[derive(Debug, Clone)]
pub struct FederationOptions {
    /// Options of each engine connection.
    pub client: ClientOptions,
    /// Client-side deadline per engine, for connecting and for each query.
    pub engine_timeout: Duration,
    /// Fusion strategy (default RRF, `rrfK` 60).
    pub fusion: FusionMethod,
    /// Hop budget sent as `_meta.federation.depth` (§16.2, default 3).
    pub depth: u32,
    /// Each engine is asked for `k × k_multiplier` hits (at least `k`) to give fusion headroom.
    pub k_multiplier: u64,
    /// After an engine fails to connect, queries skip it for this long instead of waiting for
    /// another connection attempt each time; also the first back-off of an engine that keeps
    /// failing (its [`Breaker`] opens at the default threshold and doubles the wait).
    pub reconnect_after: Duration,
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Default for FederationOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions::default(),
            engine_timeout: Duration::from_secs(10),
            fusion: preferred_fusion(),
            depth: 3,
            k_multiplier: 2,
            reconnect_after: Duration::from_secs(5),
        }
    }
}

/// What one engine contributed to a federated query.
#[derive(Debug, Clone)]
pub enum EngineOutcome {
    /// It answered.
    Answered {
        /// Its own ranking.
        hits: Vec<Hit>,
        /// Its latency.
        latency: Duration,
    },
    /// It was not asked (lacks `retrieve`, or cannot apply the filter).
    Skipped(String),
    /// It failed or timed out.
    Failed(ClientError),
}

/// A federated result: the fused list and each engine's own outcome.
#[derive(Debug, Clone)]
pub struct FederatedResult {
    /// The fused result (hits carry `meta.engine`, `meta.fusedScore`, per-engine ranks).
    pub result: RetrieveResult,
    /// Per engine, in registry order.
    pub engines: Vec<(String, EngineOutcome)>,
    /// The fusion actually used (after any fallback).
    pub fusion: FusionMethod,
}

impl FederatedResult {
    /// The result as JSON: `{"fused": <RetrieveResult>, "engines": [{"id", "hits", "latencyMs"}
    /// | {"id", "skipped"} | {"id", "error"}], "fusion": "<method>"}` (what `rcpctl federate
    /// --json` prints and the inspector's Compare panel reads).
    pub fn to_json(&self) -> Value {
        let engines: Vec<Value> = self
            .engines
            .iter()
            .map(|(id, o)| match o {
                EngineOutcome::Answered { hits, latency } => {
                    json!({"id": id, "hits": hits, "latencyMs": latency.as_millis() as u64})
                }
                EngineOutcome::Skipped(r) => json!({"id": id, "skipped": r}),
                EngineOutcome::Failed(e) => json!({"id": id, "error": e.to_rcp()}),
            })
            .collect();
        json!({"fused": self.result, "engines": engines, "fusion": self.fusion.name()})
    }
}

/// An engine's last connection outcome and its breaker.
struct Connection {
    last: Result<Client, ClientError>,
    /// Calls the client had answered when it connected (its handshake).
    answers_at_connect: u64,
    breaker: Breaker,
}

/// Queries every engine of a registry as one.
pub struct Federation {
    registry: Registry,
    options: FederationOptions,
    clients: Mutex<HashMap<String, Connection>>,
    attempts: AtomicUsize,
    /// How ids are named (the registry's `corpora`), by registry index.
    namespaces: Namespaces,
    /// Which engines returned each id this federation answered with (for `feedback`).
    ledger: OriginLedger,
}

impl Federation {
    /// A federation over the engines of an `rcp.json`; nothing connects until first use.
    pub fn from_registry_file(path: impl AsRef<Path>) -> Result<Self, RegistryError> {
        Ok(Self::new(Registry::load(path)?, FederationOptions::default()))
    }

    /// A federation over the engines reachable from one aggregator (§16.1 dynamic discovery,
    /// [`discover::discover`] with the options' hop budget), and the notes of that discovery.
    pub async fn discover(
        aggregator: EngineSpec,
        options: FederationOptions,
    ) -> Result<(Self, Vec<String>), ClientError> {
        let found = discover::discover(aggregator, &options.client, options.depth).await?;
        Ok((Self::new(found.registry, options), found.notes))
    }

    /// A federation over `registry`.
    pub fn new(registry: Registry, options: FederationOptions) -> Self {
        let namespaces = Namespaces::new(registry.corpora, registry.engines.iter().map(|e| e.id.clone()));
        Self {
            registry,
            options,
            clients: Mutex::new(HashMap::new()),
            attempts: AtomicUsize::new(0),
            namespaces,
            ledger: OriginLedger::default(),
        }
    }

    /// Replaces the options (before first use).
    pub fn with_options(mut self, options: FederationOptions) -> Self {
        self.options = options;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Connects every engine concurrently (each within `engine_timeout`); already-connected
    /// engines are kept. Returns each engine's connection outcome.
    pub async fn connect(&self) -> Vec<(String, Result<Client, ClientError>)> {
        let mut clients = self.clients.lock().await;
        // (Re)connect engines that never connected or whose transport has since died, unless
        // their breaker says to wait (a failed connect, or an engine that keeps failing).
        let now = Instant::now();
        let backoff = Backoff { base: self.options.reconnect_after, ..Backoff::default() };
        let todo: Vec<_> = self
            .registry
            .engines
            .iter()
            .filter(|e| {
                let Some(conn) = clients.get_mut(&e.id) else { return true };
                if let Ok(c) = &conn.last {
                    let served = c.answers() > conn.answers_at_connect;
                    match c.closed_reason() {
                        None => {
                            if served {
                                conn.breaker.healthy();
                            }
                            return false;
                        }
                        Some(reason) => {
                            if served {
                                conn.breaker.healthy();
                            }
                            conn.breaker.failure(Failure::Closed, reason, now);
                        }
                    }
                }
                match conn.breaker.check(now) {
                    Ok(()) => true,
                    Err(retry_in) => {
                        if conn.breaker.state() != BreakerState::Closed || conn.last.is_ok() {
                            conn.last = Err(ClientError::Connect(ConnectError::CircuitOpen {
                                engine: e.id.clone(),
                                failures: conn.breaker.consecutive_failures(),
                                retry_in,
                                last: conn.breaker.last_error().unwrap_or_default().to_owned(),
                            }));
                        }
                        false
                    }
                }
            })
            .collect();
        self.attempts.fetch_add(todo.len(), Ordering::Relaxed);
        let client_options =
            ClientOptions { request_timeout: Some(self.options.engine_timeout), ..self.options.client.clone() };
        let attempts = todo.iter().map(|spec| async {
            let r = tokio::time::timeout(self.options.engine_timeout, connect(spec, &client_options))
                .await
                .unwrap_or_else(|_| Err(ClientError::Timeout(self.options.engine_timeout.as_millis() as u64)));
            (spec.id.clone(), r)
        });
        for (id, r) in futures::future::join_all(attempts).await {
            let conn = clients.entry(id).or_insert_with(|| Connection {
                last: Err(ClientError::Connect(ConnectError::Unavailable("not connected yet".into()))),
                answers_at_connect: 0,
                breaker: Breaker::new(backoff),
            });
            match &r {
                Ok(c) => {
                    conn.breaker.connected();
                    conn.answers_at_connect = c.answers();
                }
                Err(e) => {
                    conn.breaker.failure(Failure::Connect, e.to_string(), Instant::now());
                }
            }
            conn.last = r;
        }
        self.registry
            .engines
            .iter()
            .filter_map(|e| clients.get(&e.id).map(|c| (e.id.clone(), c.last.clone())))
            .collect()
    }

    /// How many connection attempts have been made (one per engine per attempt).
    pub fn connection_attempts(&self) -> usize {
        self.attempts.load(Ordering::Relaxed)
    }

    async fn connected(&self) -> Vec<(String, Result<Client, ClientError>)> {
        self.connect().await
    }

    /// Capability keys of every connected engine, united: what the federation can do at all
    /// (§16.4).
    pub async fn effective_capabilities(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (_, c) in self.connected().await {
            if let Ok(c) = c {
                out.extend(c.capabilities().keys());
            }
        }
        out
    }

    /// Capability keys every connected engine has: what the federation guarantees (§16.4).
    pub async fn guaranteed_capabilities(&self) -> BTreeSet<String> {
        let mut sets = self
            .connected()
            .await
            .into_iter()
            .filter_map(|(_, c)| c.ok())
            .map(|c| c.capabilities().keys().into_iter().collect::<BTreeSet<_>>());
        let Some(first) = sets.next() else { return BTreeSet::new() };
        sets.fold(first, |acc, s| acc.intersection(&s).cloned().collect())
    }

    /// Fans `params` out and fuses the answers into at most `params.k` hits.
    pub async fn retrieve(&self, params: RetrieveParams) -> Result<FederatedResult, ClientError> {
        let started = Instant::now();
        let k = params.k.max(1);
        let want = usize::try_from(k).unwrap_or(usize::MAX);
        // With `mmr`, the engines are asked for the pool MMR chooses from, fused that deep.
        let pool = if params.mmr.is_some() { mmr_pool(&params) } else { want };
        let asked_k = u64::try_from(pool).unwrap_or(u64::MAX);
        let targets = self
            .connected()
            .await
            .into_iter()
            .map(|(id, client)| {
                let required = self.registry.get(&id).is_some_and(|s| s.required);
                Target { key: id.clone(), id, required, client }
            })
            .collect();
        // A pinned `indexVersion` names each engine's own snapshot (§7.7.1, `Snapshot`).
        let pin = params.index_version.as_deref().map(Snapshot::parse).transpose().map_err(ClientError::Rpc)?;
        let gathered = FanOut::new(self.options.engine_timeout)
            .run(targets, |id, client| {
                if let Some(why) = unsuited(&client.capabilities(), &params) {
                    return Err(why);
                }
                let mut p = self.engine_params(client, &params, asked_k);
                if let Some(pin) = &pin {
                    pin.pin(id, &mut p);
                }
                Ok(p)
            })
            .await
            .map_err(|failed| failed.error)?;
        if gathered.asked == 0 && gathered.replies.iter().all(|(_, r)| matches!(r, Reply::Skipped(_))) {
            return Err(ClientError::CapabilityMissing {
                method: "retrieve".into(),
                capability: "retrieve (no engine advertises it)".into(),
            });
        }
        let clients: HashMap<String, Client> = gathered.clients.into_iter().collect();
        let mut notes = Vec::new();
        let mut outcomes: Vec<(String, EngineOutcome)> = Vec::new();
        let mut lists = Vec::new();
        let mut candidates = 0u64;
        let mut versions: Vec<(String, Option<String>)> = Vec::new();
        for (id, reply) in gathered.replies {
            let outcome = match reply {
                Reply::Answered { result, latency } => {
                    versions.push((id.clone(), result.index_version.clone()));
                    candidates += result.usage.as_ref().and_then(|u| u.candidates).unwrap_or(result.hits.len() as u64);
                    let weight = self.registry.get(&id).map_or(1.0, |s| s.weight);
                    let index = self.registry.engines.iter().position(|e| e.id == id).unwrap_or_default();
                    let hits: Vec<Hit> = result
                        .hits
                        .iter()
                        .map(|h| {
                            let mut h = h.clone();
                            if self.namespaces.enabled() {
                                h.id = rcp_wire::RequestId::String(self.namespaces.qualify(index, &h.key()));
                            }
                            self.ledger.record(&h.key(), index);
                            h
                        })
                        .collect();
                    let mut list = EngineList::new(id.clone(), hits).with_weight(weight);
                    let floor = clients.get(&id).and_then(|c| c.capabilities().retrieve).and_then(|r| r.score_floor);
                    if let Some(floor) = floor {
                        list = list.with_score_floor(floor);
                    }
                    lists.push(list);
                    EngineOutcome::Answered { hits: result.hits, latency }
                }
                Reply::Skipped(why) => {
                    notes.push(format!("engine '{id}' skipped: {why}"));
                    EngineOutcome::Skipped(why)
                }
                Reply::Failed(e) => {
                    let verb = if clients.contains_key(&id) { "failed" } else { "unavailable" };
                    notes.push(format!("engine '{id}' {verb}: {e}"));
                    EngineOutcome::Failed(e)
                }
            };
            outcomes.push((id, outcome));
        }
        if lists.is_empty() {
            let failures = outcomes.iter().filter_map(|(id, o)| match o {
                EngineOutcome::Failed(e) => Some((id.as_str(), e)),
                _ => None,
            });
            return Err(ClientError::Rpc(no_answer(failures)));
        }
        let served = Snapshot::of(versions.iter().map(|(id, v)| (id.as_str(), v.as_deref())));
        let index_version = Snapshot::settle(pin.as_ref(), served).map_err(ClientError::Rpc)?;
        let method = fusion_method(&self.options.fusion, &params);
        let fused = fusion::fuse_or_fallback(&lists, &method, pool).map_err(|e| ClientError::Rpc(e.into()))?;
        notes.extend(fused.note.clone());
        let (hits, mmr_note) = diversify_fused(fused.hits, &params, want.min(pool));
        notes.extend(mmr_note);
        let degraded: Vec<&str> = outcomes
            .iter()
            .filter(|(_, o)| !matches!(o, EngineOutcome::Answered { .. }))
            .map(|(id, _)| id.as_str())
            .collect();
        let mut meta = Meta::new();
        meta.insert("degraded".into(), json!(degraded));
        meta.insert("federation".into(), json!({"depth": self.options.depth, "path": []}));
        meta.insert("fusion".into(), json!(fused.method.name()));
        let usage = Usage {
            candidates: Some(candidates),
            latency_ms: Some(started.elapsed().as_millis() as u64),
            notes,
            ..Usage::default()
        };
        let result =
            RetrieveResult { hits, usage: Some(usage), meta: Some(meta), index_version, ..RetrieveResult::default() };
        Ok(FederatedResult { result, engines: outcomes, fusion: fused.method })
    }

    /// The params one engine receives: [`engine_params`] plus the federation hop budget.
    fn engine_params(&self, client: &Client, params: &RetrieveParams, k: u64) -> RetrieveParams {
        let rc = client.capabilities().retrieve.clone().unwrap_or_default();
        let mut p = engine_params(params, &rc, k, self.options.k_multiplier);
        let meta = p.meta.get_or_insert_with(Meta::new);
        meta.insert("federation".into(), json!({"depth": self.options.depth, "path": Value::Array(Vec::new())}));
        p
    }
}
