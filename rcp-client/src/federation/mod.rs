//! [`Federation`]: fan one `retrieve` out to every engine of a registry and fuse the ranked
//! lists (§16.2, §16.3).
//!
//! Engines that do not advertise `retrieve` (or cannot honour the request's filter) are
//! skipped, not failed. Each engine gets its own client-side deadline, so a slow non-required
//! engine is dropped; a `required` engine's failure fails the whole query with its error; if
//! every engine fails the query fails with `-32010`, never an empty success. Skipped and failed
//! engines are listed in `usage.notes` and `_meta.degraded`. Fusion is RRF by default,
//! `weighted` on request, and `convex` only when every contributing engine advertises
//! `scoreFloor` (otherwise RRF, with a note).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rcp_protocol::capabilities::{Capability, RetrieveCapability};
use rcp_protocol::fusion::{self, EngineList, FusionMethod};
use rcp_protocol::{Hit, Meta, RcpError, RetrieveParams, RetrieveResult, Usage};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::client::{Client, ClientOptions};
use crate::error::ClientError;
use crate::registry::{Registry, RegistryError};
use crate::selector::connect;

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
    /// another connection attempt each time.
    pub reconnect_after: Duration,
}

impl Default for FederationOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions::default(),
            engine_timeout: Duration::from_secs(10),
            fusion: FusionMethod::default(),
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
    /// | {"id", "skipped"} | {"id", "error"}], "fusion": "<method>"}` (what `rcp federate
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

/// An engine's last connection outcome and when it happened.
type Connection = (Result<Client, ClientError>, Instant);

/// Queries every engine of a registry as one.
pub struct Federation {
    registry: Registry,
    options: FederationOptions,
    clients: Mutex<HashMap<String, Connection>>,
    attempts: AtomicUsize,
}

impl Federation {
    /// A federation over the engines of an `rcp.json`; nothing connects until first use.
    pub fn from_registry_file(path: impl AsRef<Path>) -> Result<Self, RegistryError> {
        Ok(Self::new(Registry::load(path)?, FederationOptions::default()))
    }

    /// A federation over `registry`.
    pub fn new(registry: Registry, options: FederationOptions) -> Self {
        Self { registry, options, clients: Mutex::new(HashMap::new()), attempts: AtomicUsize::new(0) }
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
        // (Re)connect engines that never connected, whose transport has since died, or whose
        // last failed attempt is older than `reconnect_after`.
        let now = Instant::now();
        let todo: Vec<_> = self
            .registry
            .engines
            .iter()
            .filter(|e| match clients.get(&e.id) {
                None => true,
                Some((Ok(c), _)) => c.closed_reason().is_some(),
                Some((Err(_), at)) => now.duration_since(*at) >= self.options.reconnect_after,
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
            clients.insert(id, (r, Instant::now()));
        }
        self.registry
            .engines
            .iter()
            .filter_map(|e| clients.get(&e.id).map(|(r, _)| (e.id.clone(), r.clone())))
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
        let engines = self.connected().await;
        let mut notes = Vec::new();
        let mut outcomes: Vec<(String, EngineOutcome)> = Vec::new();
        let mut calls = Vec::new();
        for (id, client) in engines {
            let spec = self.registry.get(&id).cloned();
            let client = match client {
                Ok(c) => c,
                Err(e) => {
                    if spec.as_ref().is_some_and(|s| s.required) {
                        return Err(e);
                    }
                    notes.push(format!("engine '{id}' unavailable: {e}"));
                    outcomes.push((id, EngineOutcome::Failed(e)));
                    continue;
                }
            };
            if !client.supports(Capability::Retrieve) {
                notes.push(format!("engine '{id}' skipped: does not advertise retrieve"));
                outcomes.push((id, EngineOutcome::Skipped("does not advertise retrieve".into())));
                continue;
            }
            if params.filter.is_some() && !client.supports(Capability::Filter) {
                notes.push(format!("engine '{id}' skipped: cannot apply the filter"));
                outcomes.push((id, EngineOutcome::Skipped("does not advertise filter".into())));
                continue;
            }
            let p = self.engine_params(&client, &params, k);
            let timeout = self.options.engine_timeout;
            calls.push(async move {
                let t = Instant::now();
                let r = tokio::time::timeout(timeout, client.retrieve(p))
                    .await
                    .unwrap_or(Err(ClientError::Timeout(timeout.as_millis() as u64)));
                (id, client, r, t.elapsed())
            });
        }
        if calls.is_empty() && outcomes.iter().all(|(_, o)| matches!(o, EngineOutcome::Skipped(_))) {
            return Err(ClientError::CapabilityMissing {
                method: "retrieve".into(),
                capability: "retrieve (no engine advertises it)".into(),
            });
        }
        let mut lists = Vec::new();
        let mut candidates = 0u64;
        for (id, client, r, latency) in futures::future::join_all(calls).await {
            let spec = self.registry.get(&id);
            match r {
                Ok(res) => {
                    candidates += res.usage.as_ref().and_then(|u| u.candidates).unwrap_or(res.hits.len() as u64);
                    let mut list =
                        EngineList::new(id.clone(), res.hits.clone()).with_weight(spec.map_or(1.0, |s| s.weight));
                    if let Some(floor) = client.capabilities().retrieve.and_then(|r| r.score_floor) {
                        list = list.with_score_floor(floor);
                    }
                    lists.push(list);
                    outcomes.push((id, EngineOutcome::Answered { hits: res.hits, latency }));
                }
                Err(e) => {
                    if spec.is_some_and(|s| s.required) {
                        return Err(e);
                    }
                    notes.push(format!("engine '{id}' failed: {e}"));
                    outcomes.push((id, EngineOutcome::Failed(e)));
                }
            }
        }
        if lists.is_empty() {
            let detail = notes.join("; ");
            return Err(ClientError::Rpc(RcpError::backend_unavailable(format!("every engine failed: {detail}"))));
        }
        // Registry order, whatever the arrival order: fusion is order-independent, and so is
        // everything reported here.
        let order: HashMap<&str, usize> =
            self.registry.engines.iter().enumerate().map(|(i, e)| (e.id.as_str(), i)).collect();
        outcomes.sort_by_key(|(id, _)| order.get(id.as_str()).copied().unwrap_or(usize::MAX));
        lists.sort_by_key(|l| order.get(l.engine.as_str()).copied().unwrap_or(usize::MAX));
        let method = match (&self.options.fusion, params.fusion.as_ref().and_then(|f| f.method.as_deref())) {
            (_, Some(name)) => FusionMethod::from_name(name).unwrap_or_default(),
            (m, None) => m.clone(),
        };
        let method = match (method, params.fusion.as_ref()) {
            (FusionMethod::Rrf { .. }, Some(f)) if f.rrf_k.is_some() => {
                FusionMethod::Rrf { rrf_k: f64::from(f.rrf_k.unwrap_or(60)) }
            }
            (FusionMethod::Convex { alpha_engine, .. }, Some(f)) if f.alpha.is_some() => {
                FusionMethod::Convex { alpha: f.alpha.unwrap_or(0.5), alpha_engine }
            }
            (m, _) => m,
        };
        let fused = fusion::fuse_or_fallback(&lists, &method, usize::try_from(k).unwrap_or(usize::MAX))
            .map_err(|e| ClientError::Rpc(e.into()))?;
        notes.extend(fused.note.clone());
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
            RetrieveResult { hits: fused.hits, usage: Some(usage), meta: Some(meta), ..RetrieveResult::default() };
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

/// The params one engine of a fan-out receives, for [`Federation`] and for aggregators such as
/// rcp-gateway alike: `k` raised by `multiplier` for fusion headroom (never above the engine's
/// `maxK`, never below `k` within it), `candidateK` kept at or above it, no `cursor` or
/// `fusion` (both belong to the fused answer), and only the options the engine advertises
/// (`mode`, `mmr`, built-in `rerank`), keeping the funnel `candidateK >= topN >= k` intact.
/// `_meta` is the caller's to set.
pub fn engine_params(params: &RetrieveParams, rc: &RetrieveCapability, k: u64, multiplier: u64) -> RetrieveParams {
    let max_k = rc.max_k.unwrap_or(u64::MAX);
    let mut p = params.clone();
    p.k = k.saturating_mul(multiplier.max(1)).min(max_k).max(k.min(max_k));
    p.candidate_k = p.candidate_k.map(|c| c.max(p.k).min(max_k));
    p.fusion = None;
    p.cursor = None;
    if p.mode.as_ref().is_some_and(|m| !rc.modes.as_ref().is_some_and(|ms| ms.contains(m))) {
        p.mode = None;
    }
    if p.mmr.is_some() && rc.mmr != Some(true) {
        p.mmr = None;
    }
    if p.rerank.is_some() && rc.rerank_builtin != Some(true) {
        p.rerank = None;
    }
    if let Some(rcp_protocol::retrieve::RerankOption::Stage(stage)) = p.rerank.as_mut() {
        stage.top_n = stage.top_n.map(|n| n.max(p.k));
    }
    p
}
