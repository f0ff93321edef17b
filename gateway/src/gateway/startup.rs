//! [`Gateway`]: an RCP aggregator (§7.13, §16). It answers `catalog/list` from its engines'
//! own `initialize`, fuses inside its own `retrieve`, and routes `index/add`/`index/delete` to
//! the shard that owns each id.
//!
//! The framework reads a handler's capability once, when the server is built, so
//! [`Gateway::start`] connects to the engines first and computes what the federation can
//! promise from the engines that answered; engines that connect later are queried but do not
//! widen the advertised capabilities until the gateway restarts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rcp_client::registry::Transport;
use rcp_client::{Client, ClientError};
use rcp_protocol::capabilities::{Capabilities, CatalogCapability, IndexCapability, RetrieveCapability};
use rcp_protocol::catalog::{CatalogEntry, CatalogListResult, Endpoint};
use rcp_protocol::filter::FilterCapability;
use rcp_protocol::fusion::{self, EngineList, FusionMethod};
use rcp_protocol::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_protocol::lifecycle::{ConformanceLevel, PeerInfo};
use rcp_protocol::{ErrorCode, Hit, Meta, RcpError, RetrieveParams, RetrieveResult, Usage};
use rcp_server::{Catalog, HandlerResult, Index, RequestContext, Retrieve, RetrieveRequest, Server, ServerBuilder};
use serde_json::{Value, json};

use crate::capabilities::{FederatedRetrieve, federate_retrieve};
use crate::hop::Hop;
use crate::pool::{PATH_ENV, Pool, PoolOptions};
use crate::registry::GatewayRegistry;
use crate::shard;

/// `_meta` key of `retrieve` restricting the fan-out to some collections (an array of names).
pub const META_COLLECTIONS: &str = "collections";
/// `_meta` key of `index/add`/`index/delete` naming the collection written to.
pub const META_COLLECTION: &str = "collection";

/// Options of a gateway.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The gateway's identity: its `initialize.server.name` and what it appends to
    /// `_meta.federation.path` (§16.2). Two gateways of one deployment must differ.
    pub identity: String,
    /// Hop budget of a request that arrives without `_meta.federation` (§16.2, default 3).
    pub depth: u32,
    /// Longest wait for one engine's answer (the request's own deadline may shorten it).
    pub engine_timeout: Duration,
    /// Deadline for connecting to one engine.
    pub connect_timeout: Duration,
    /// After a failed connection, the engine is skipped for this long.
    pub reconnect_after: Duration,
    /// Each engine is asked for `k × k_multiplier` hits, for fusion headroom (§16.2).
    pub k_multiplier: u64,
    /// Fusion of collections when the request names none (§16.3; default RRF).
    pub fusion: FusionMethod,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            identity: "rcp-gateway".into(),
            depth: 3,
            engine_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            reconnect_after: Duration::from_secs(5),
            k_multiplier: 2,
            fusion: FusionMethod::default(),
        }
    }
}

/// One collection: the registry entries (shards) it spans, in registry order.
#[derive(Debug, Clone)]
struct Collection {
    name: String,
    shards: Vec<usize>,
}

/// An RCP aggregator over a [`GatewayRegistry`].
pub struct Gateway {
    pool: Pool,
    collections: Vec<Collection>,
    options: GatewayOptions,
    federated: Option<FederatedRetrieve>,
    /// Collections whose every shard advertised `index` at start-up.
    indexable: Vec<String>,
    writable: bool,
}

/// Everything a fan-out gathered, for [`Gateway::fuse`].
struct FanOut {
    /// Per registry entry asked or skipped, in registry order.
    outcomes: Vec<(usize, Outcome)>,
    /// How many engines were sent the query.
    asked: usize,
    /// The clients of the engines that were connected.
    clients: BTreeMap<usize, Client>,
    notes: Vec<String>,
    started: Instant,
}

/// What one engine contributed to a fan-out.
enum Outcome {
    Answered(RetrieveResult, Duration),
    Skipped(String),
    Failed(ClientError),
}

impl Gateway {
    /// Connects to every engine (each within `connect_timeout`) and computes the federated
    /// capabilities from those that answered. Engines that fail are retried on use.
    ///
    /// When this gateway's identity is already in [`PATH_ENV`] (a stdio gateway started,
    /// directly or not, by itself: a registry cycle), it does not connect at start-up, so the
    /// cycle stops spawning processes. When no engine is reachable at start-up, `retrieve` is
    /// advertised without options (nothing can be promised about engines not yet seen).
    pub async fn start(registry: GatewayRegistry, options: GatewayOptions) -> Self {
        let mut ancestry: Vec<String> = std::env::var(PATH_ENV)
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let in_cycle = ancestry.contains(&options.identity);
        ancestry.push(options.identity.clone());
        let pool_options = PoolOptions {
            connect_timeout: options.connect_timeout,
            reconnect_after: options.reconnect_after,
            client: PeerInfo::new(options.identity.clone(), env!("CARGO_PKG_VERSION")),
            ancestry,
        };
        let mut collections: Vec<Collection> = Vec::new();
        for (i, e) in registry.engines.iter().enumerate() {
            match collections.iter_mut().find(|c| c.name == e.collection) {
                Some(c) => c.shards.push(i),
                None => collections.push(Collection { name: e.collection.clone(), shards: vec![i] }),
            }
        }
        let pool = Pool::new(registry.engines, pool_options);
        let connected: Vec<Option<Client>> = if in_cycle {
            tracing::warn!(identity = %options.identity, "started inside a registry cycle; not connecting at start-up");
            vec![None; pool.entries().len()]
        } else {
            pool.connect_all().await.into_iter().map(Result::ok).collect()
        };
        for (entry, c) in pool.entries().iter().zip(&connected) {
            if c.is_none() {
                tracing::warn!(engine = %entry.spec.id, "engine unavailable at start-up; capabilities computed without it");
            }
        }
        let caps: Vec<Capabilities> = connected.iter().flatten().map(Client::capabilities).collect();
        // With no engine reachable yet (or inside a start-up cycle), `retrieve` is still
        // advertised, without options, so the gateway serves engines that come up later.
        let federated = if caps.is_empty() && !pool.entries().is_empty() {
            Some(FederatedRetrieve {
                retrieve: RetrieveCapability {
                    fusion: Some(crate::capabilities::FUSION_METHODS.map(String::from).to_vec()),
                    ..Default::default()
                },
                ..Default::default()
            })
        } else {
            federate_retrieve(&caps.iter().collect::<Vec<_>>())
        };
        let mut indexable = Vec::new();
        let mut writable = false;
        for c in &collections {
            let index: Vec<Option<IndexCapability>> =
                c.shards.iter().map(|i| connected[*i].as_ref().and_then(|cl| cl.capabilities().index)).collect();
            if index.iter().all(Option::is_some) {
                indexable.push(c.name.clone());
                writable |= index.iter().flatten().all(|ix| ix.writable);
            }
        }
        Self { pool, collections, options, federated, indexable, writable }
    }

    /// The gateway's identity (§16.2).
    pub fn identity(&self) -> &str {
        &self.options.identity
    }

    /// The federated `retrieve` capability computed at start-up (`None`: no engine retrieves).
    pub fn federated(&self) -> Option<&FederatedRetrieve> {
        self.federated.as_ref()
    }

    /// Collection names, in registry order.
    pub fn collections(&self) -> Vec<&str> {
        self.collections.iter().map(|c| c.name.as_str()).collect()
    }

    /// The connection pool (for tests and the MCP bridge).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A server builder with the gateway's handlers registered: `catalog` always, `retrieve`
    /// when some engine retrieves, `index` when a collection is indexable on every shard.
    pub fn builder(self: &Arc<Self>) -> ServerBuilder {
        let mut b = Server::builder(self.options.identity.clone(), env!("CARGO_PKG_VERSION"))
            .catalog(Arc::clone(self))
            .streaming()
            .conformance(ConformanceLevel::L1);
        if self.federated.is_some() {
            b = b.retrieve(Arc::clone(self));
        }
        if !self.indexable.is_empty() {
            b = b.index(Arc::clone(self));
        }
        b
    }

    /// Serves one federated `retrieve` (§16.2): loop detection, fan-out with per-engine
    /// deadlines, shard merge, fusion of collections.
    pub async fn federated_retrieve(
        &self,
        req: RetrieveRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<RetrieveResult> {
        let started = Instant::now();
        let params = req.params;
        let k = req.k.max(1);
        let hop = Hop::from_meta(params.meta.as_ref(), self.options.depth);
        let mut notes: Vec<String> = Vec::new();
        if hop.visited(&self.options.identity) {
            notes.push(format!(
                "gateway '{}' is already on the federation path {:?}: not forwarded (cycle)",
                self.options.identity, hop.path
            ));
            return Ok(empty_result(notes, &[], started));
        }
        let Some(next) = hop.forward(&self.options.identity) else {
            notes.push(format!("federation depth exhausted at gateway '{}': not forwarded", self.options.identity));
            return Ok(empty_result(notes, &[], started));
        };
        let wanted: Option<Vec<String>> = params
            .meta
            .as_ref()
            .and_then(|m| m.get(META_COLLECTIONS))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect());
        if let Some(w) = &wanted
            && let Some(unknown) = w.iter().find(|n| !self.collections.iter().any(|c| &c.name == *n))
        {
            return Err(RcpError::invalid_params(
                format!("_meta.{META_COLLECTIONS}"),
                format!("unknown collection '{unknown}'; the gateway has: {}", self.collections().join(", ")),
            ));
        }
        let remaining = ctx.remaining();
        let reserve = (remaining / 10).max(Duration::from_millis(5));
        let budget = self.options.engine_timeout.min(remaining.saturating_sub(reserve)).max(Duration::from_millis(1));

        let mut calls = FuturesUnordered::new();
        let mut outcomes: Vec<(usize, Outcome)> = Vec::new();
        let mut asked = 0usize;
        let mut connected: BTreeMap<usize, Client> = BTreeMap::new();
        let done = Arc::new(AtomicUsize::new(0));
        let targets: Vec<usize> = self
            .collections
            .iter()
            .filter(|c| wanted.as_ref().is_none_or(|w| w.contains(&c.name)))
            .flat_map(|c| c.shards.iter().copied())
            .collect();
        let total = targets.len();
        // Connect concurrently first: a dead engine costs one connect timeout, not one each.
        let clients = futures::future::join_all(targets.iter().map(|i| self.pool.client(*i))).await;
        for (index, client) in targets.into_iter().zip(clients) {
            let id = self.pool.entries()[index].spec.id.clone();
            let client = match client {
                Ok(c) => c,
                Err(e) => {
                    outcomes.push((index, Outcome::Failed(e)));
                    continue;
                }
            };
            connected.insert(index, client.clone());
            if let Some(reason) = self.skip_reason(&client, &params, &next) {
                outcomes.push((index, Outcome::Skipped(reason)));
                continue;
            }
            let p = self.engine_params(&client, &params, k as u64, &next, budget);
            asked += 1;
            let ctx = ctx.clone();
            let done = Arc::clone(&done);
            calls.push(async move {
                let t = Instant::now();
                let timed_out = ClientError::Timeout(budget.as_millis() as u64);
                let r = match tokio::time::timeout(budget, call_engine(&client, p, &ctx, &id, &done, total)).await {
                    // The engine was given the same budget as its `deadlineMs`: whether its
                    // clock or ours fired first, it is one outcome and is reported as one.
                    Ok(Err(ClientError::Rpc(e))) if e.code == ErrorCode::TIMEOUT => Err(timed_out),
                    Ok(r) => r,
                    Err(_) => Err(timed_out),
                };
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                ctx.progress(n as f64 / total.max(1) as f64, "fan-out", format!("engine '{id}' done"));
                (index, r.map(|r| (r, t.elapsed())))
            });
        }
        // Dropping the pending calls (cancellation, or this future being dropped by the
        // framework) drops their client futures, which cancels them downstream (§7.14).
        let cancelled = ctx.cancellation().clone();
        let gathered = async {
            let mut out = Vec::new();
            while let Some((index, r)) = calls.next().await {
                if let Err(e) = &r
                    && self.pool.entries()[index].spec.required
                {
                    return Err((index, e.clone()));
                }
                out.push((index, r));
            }
            Ok(out)
        };
        let gathered = tokio::select! {
            () = cancelled.cancelled() => return Err(RcpError::cancelled(Some("cancelled by the client; downstream calls cancelled"))),
            g = gathered => g,
        };
        let gathered = match gathered {
            Ok(g) => g,
            Err((index, e)) => {
                let id = &self.pool.entries()[index].spec.id;
                let mut err = e.to_rcp();
                err.message = format!("required engine '{id}' failed: {}", err.message);
                return Err(err);
            }
        };
        for (index, r) in gathered {
            outcomes.push((index, r.map_or_else(Outcome::Failed, |(r, t)| Outcome::Answered(r, t))));
        }
        // A required engine that could not even be asked fails the query too.
        for (index, o) in &outcomes {
            let entry = &self.pool.entries()[*index];
            if entry.spec.required
                && let Outcome::Failed(e) = o
            {
                let mut err = e.to_rcp();
                err.message = format!("required engine '{}' failed: {}", entry.spec.id, err.message);
                return Err(err);
            }
        }
        outcomes.sort_by_key(|(i, _)| *i);
        self.fuse(FanOut { outcomes, asked, clients: connected, notes, started }, &params, k)
    }

    /// Why `client` is not asked: it lacks `retrieve`, the requested mode or `filter`, or it is
    /// an aggregator already on the federation path.
    fn skip_reason(&self, client: &Client, params: &RetrieveParams, next: &Hop) -> Option<String> {
        let caps = client.capabilities();
        let name = client.server_info().map(|i| i.server.name.clone()).unwrap_or_default();
        if next.visited(&name) {
            return Some(format!("'{name}' is already on the federation path (cycle)"));
        }
        let Some(rc) = caps.retrieve.as_ref() else {
            return Some("does not advertise retrieve".into());
        };
        if let Some(mode) = &params.mode
            && !offers_mode(rc, mode)
            && !self.is_default_mode(mode)
        {
            return Some(format!("does not offer mode '{mode}'"));
        }
        if params.filter.is_some() && caps.filter.is_none() {
            return Some("cannot apply the filter".into());
        }
        None
    }

    /// Whether `mode` is the gateway's default mode. The framework fills an absent `mode` with
    /// it before the handler runs, so a request carrying it may not have asked for any mode:
    /// engines without it run their own default instead of being skipped.
    fn is_default_mode(&self, mode: &str) -> bool {
        let rc = self.federated.as_ref().map(|f| &f.retrieve);
        let default = rc.and_then(|r| r.default_mode.as_deref().or(r.modes.as_ref()?.first().map(String::as_str)));
        default == Some(mode)
    }

    /// The params one engine receives: `k` raised for fusion headroom (within its `maxK`), the
    /// forwarded hop budget, a strictly smaller deadline, and only the options it advertises.
    fn engine_params(
        &self,
        client: &Client,
        params: &RetrieveParams,
        k: u64,
        next: &Hop,
        budget: Duration,
    ) -> RetrieveParams {
        let rc = client.capabilities().retrieve.clone().unwrap_or_default();
        let mut p = rcp_client::federation::engine_params(params, &rc, k, self.options.k_multiplier);
        // `minScore` is on the gateway's (fused) scale, applied after fusion.
        p.min_score = None;
        let mut meta = Meta::new();
        for (key, v) in params.meta.iter().flatten() {
            if !matches!(key.as_str(), "federation" | "deadlineMs" | "progressToken" | META_COLLECTIONS) {
                meta.insert(key.clone(), v.clone());
            }
        }
        meta.insert("federation".into(), next.to_value());
        meta.insert("deadlineMs".into(), json!(budget.as_millis() as u64));
        p.meta = Some(meta);
        p
    }

    /// Merges the shards of each collection and fuses the collections (§16.3).
    fn fuse(&self, fan_out: FanOut, params: &RetrieveParams, k: usize) -> HandlerResult<RetrieveResult> {
        let FanOut { outcomes, asked, clients, mut notes, started } = fan_out;
        let clients = &clients;
        let mut degraded: Vec<String> = Vec::new();
        let mut answers: BTreeMap<usize, RetrieveResult> = BTreeMap::new();
        let mut latencies = Meta::new();
        let mut failures = Vec::new();
        for (index, o) in outcomes {
            let id = self.pool.entries()[index].spec.id.clone();
            match o {
                Outcome::Answered(r, latency) => {
                    latencies.insert(id.clone(), json!(latency.as_micros() as u64));
                    for n in r.usage.iter().flat_map(|u| u.notes.iter()) {
                        notes.push(format!("engine '{id}': {n}"));
                    }
                    answers.insert(index, r);
                }
                Outcome::Skipped(why) => {
                    notes.push(format!("engine '{id}' skipped: {why}"));
                    degraded.push(id);
                }
                Outcome::Failed(e) => {
                    notes.push(format!("engine '{id}' failed: {e}"));
                    failures.push(id.clone());
                    degraded.push(id);
                }
            }
        }
        if answers.is_empty() {
            if !failures.is_empty() || asked > 0 {
                return Err(RcpError::backend_unavailable(format!("every engine failed: {}", notes.join("; "))));
            }
            return Ok(empty_result(notes, &degraded, started));
        }
        let mut lists = Vec::new();
        let mut candidates = 0u64;
        for c in &self.collections {
            let shard_answers: Vec<(String, Vec<Hit>)> = c
                .shards
                .iter()
                .filter_map(|i| answers.get(i).map(|r| (self.pool.entries()[*i].spec.id.clone(), r.hits.clone())))
                .collect();
            if shard_answers.is_empty() {
                continue;
            }
            candidates += c
                .shards
                .iter()
                .filter_map(|i| answers.get(i))
                .map(|r| r.usage.as_ref().and_then(|u| u.candidates).unwrap_or(r.hits.len() as u64))
                .sum::<u64>();
            let weight = self.pool.entries()[c.shards[0]].spec.weight;
            let hits = if c.shards.len() == 1 {
                shard_answers.into_iter().flat_map(|(_, h)| h).collect()
            } else if self.comparable_scores(c, clients) {
                shard::merge_by_score(shard_answers, k.saturating_mul(self.options.k_multiplier.max(1) as usize))
            } else {
                notes.push(format!(
                    "collection '{}': shards differ in engine or scoreScale; merged by RRF instead of score",
                    c.name
                ));
                let shard_lists: Vec<EngineList> =
                    shard_answers.into_iter().map(|(id, h)| EngineList::new(id, h)).collect();
                fusion::fuse(&shard_lists, &FusionMethod::rrf(), k.saturating_mul(2)).map_err(RcpError::from)?
            };
            let mut list = EngineList::new(c.name.clone(), hits).with_weight(weight);
            if let Some(floor) = self.common_floor(c, clients) {
                list = list.with_score_floor(floor);
            }
            lists.push(list);
        }
        let method = self.fusion_method(params);
        let mut fused = fusion::fuse_or_fallback(&lists, &method, k).map_err(RcpError::from)?;
        notes.extend(fused.note.clone());
        if let Some(min) = params.min_score {
            fused.hits.retain(|h| h.score >= min);
        }
        let mut meta = Meta::new();
        meta.insert("degraded".into(), json!(degraded));
        meta.insert("fusion".into(), json!(fused.method.name()));
        meta.insert("gateway".into(), json!(self.options.identity));
        meta.insert("engineLatencyUs".into(), Value::Object(latencies));
        let usage = Usage {
            candidates: Some(candidates),
            latency_ms: Some(started.elapsed().as_millis() as u64),
            notes,
            ..Usage::default()
        };
        Ok(RetrieveResult { hits: fused.hits, usage: Some(usage), meta: Some(meta), ..RetrieveResult::default() })
    }

    /// Whether the connected shards of `c` run one engine kind with one `scoreScale`.
    fn comparable_scores(&self, c: &Collection, clients: &BTreeMap<usize, Client>) -> bool {
        let mut seen: Option<(String, Option<String>)> = None;
        for i in &c.shards {
            let Some(client) = clients.get(i) else { continue };
            let kind = (
                client.server_info().map(|s| s.server.name.clone()).unwrap_or_default(),
                client.capabilities().retrieve.and_then(|r| r.score_scale),
            );
            match &seen {
                None => seen = Some(kind),
                Some(k) if *k == kind => {}
                Some(_) => return false,
            }
        }
        true
    }

    /// The `scoreFloor` all connected shards of `c` share, if any (enables convex fusion).
    fn common_floor(&self, c: &Collection, clients: &BTreeMap<usize, Client>) -> Option<f64> {
        let floors: Vec<Option<f64>> = c
            .shards
            .iter()
            .filter_map(|i| clients.get(i))
            .map(|cl| cl.capabilities().retrieve.and_then(|r| r.score_floor))
            .collect();
        let first = (*floors.first()?)?;
        floors.iter().all(|f| *f == Some(first)).then_some(first)
    }

    fn fusion_method(&self, params: &RetrieveParams) -> FusionMethod {
        let f = params.fusion.as_ref();
        let method = match f.and_then(|f| f.method.as_deref()) {
            Some(name) => FusionMethod::from_name(name).unwrap_or_default(),
            None => self.options.fusion.clone(),
        };
        match (method, f) {
            (FusionMethod::Rrf { .. }, Some(f)) if f.rrf_k.is_some() => {
                FusionMethod::Rrf { rrf_k: f64::from(f.rrf_k.unwrap_or(60)) }
            }
            (FusionMethod::Convex { alpha_engine, .. }, Some(f)) if f.alpha.is_some() => {
                FusionMethod::Convex { alpha: f.alpha.unwrap_or(0.5), alpha_engine }
            }
            (m, _) => m,
        }
    }

    /// The collection an `index/*` call writes to: `_meta.collection`, or the first indexable
    /// collection in registry order.
    fn write_target(&self, meta: Option<&Meta>) -> HandlerResult<&Collection> {
        let field = format!("_meta.{META_COLLECTION}");
        let name = match meta.and_then(|m| m.get(META_COLLECTION)) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(RcpError::invalid_params(field, format!("must be a collection name, got {other}")));
            }
            None => {
                self.indexable.first().cloned().ok_or_else(|| RcpError::capability_missing("index/add", "index"))?
            }
        };
        if !self.indexable.contains(&name) {
            return Err(RcpError::invalid_params(
                field,
                format!(
                    "collection '{name}' is not indexable on every shard; indexable: {}",
                    self.indexable.join(", ")
                ),
            ));
        }
        self.collections.iter().find(|c| c.name == name).ok_or_else(|| {
            RcpError::invalid_params(format!("_meta.{META_COLLECTION}"), format!("unknown collection '{name}'"))
        })
    }

    async fn shard_client(&self, index: usize) -> HandlerResult<Client> {
        self.pool.client(index).await.map_err(|e| {
            let id = &self.pool.entries()[index].spec.id;
            RcpError::backend_unavailable(format!("shard '{id}' unavailable: {e}"))
        })
    }
}

/// One downstream `retrieve`, relaying its progress frames as the gateway's own when the
/// caller asked for progress (§9).
async fn call_engine(
    client: &Client,
    params: RetrieveParams,
    ctx: &RequestContext,
    id: &str,
    done: &AtomicUsize,
    total: usize,
) -> Result<RetrieveResult, ClientError> {
    if !ctx.wants_progress() {
        return client.retrieve(params).await;
    }
    let streaming = client.retrieve_streaming(params)?;
    let mut progress = streaming.progress;
    let mut result = streaming.result;
    loop {
        tokio::select! {
            r = &mut result => return r,
            Some(p) = progress.recv() => {
                let finished = done.load(Ordering::Relaxed) as f64;
                let overall = (finished + p.progress.unwrap_or(0.0).clamp(0.0, 1.0)) / total.max(1) as f64;
                let stage = p.stage.unwrap_or_else(|| "retrieve".into());
                let message = p.message.unwrap_or_default();
                ctx.progress(overall, &format!("{id}:{stage}"), format!("engine '{id}': {message}"));
            }
        }
    }
}

fn offers_mode(rc: &RetrieveCapability, mode: &str) -> bool {
    rc.modes.as_ref().is_some_and(|m| m.iter().any(|x| x == mode))
}

fn empty_result(notes: Vec<String>, degraded: &[String], started: Instant) -> RetrieveResult {
    let mut meta = Meta::new();
    meta.insert("degraded".into(), json!(degraded));
    let usage = Usage {
        candidates: Some(0),
        latency_ms: Some(started.elapsed().as_millis() as u64),
        notes,
        ..Usage::default()
    };
    RetrieveResult { hits: Vec::new(), usage: Some(usage), meta: Some(meta), ..RetrieveResult::default() }
}

fn endpoint(transport: &Transport) -> Endpoint {
    match transport {
        Transport::Stdio { command } => {
            Endpoint { transport: "stdio".into(), url: None, command: Some(command.clone()) }
        }
        Transport::Http { url } => Endpoint { transport: "http".into(), url: Some(url.clone()), command: None },
    }
}

impl Retrieve for Gateway {
    fn capability(&self) -> RetrieveCapability {
        self.federated.as_ref().map(|f| f.retrieve.clone()).unwrap_or_default()
    }

    fn filter(&self) -> Option<FilterCapability> {
        self.federated.as_ref().and_then(|f| f.filter.clone())
    }

    fn citations(&self) -> bool {
        self.federated.as_ref().is_some_and(|f| f.citations)
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        self.federated_retrieve(req, &ctx).await
    }
}

impl Catalog for Gateway {
    fn capability(&self) -> CatalogCapability {
        CatalogCapability { engines: Some(self.pool.entries().len() as u64), ..Default::default() }
    }

    async fn list(&self, _ctx: RequestContext) -> HandlerResult<CatalogListResult> {
        let clients = self.pool.connect_all().await;
        let mut engines = Vec::new();
        let mut unavailable = Vec::new();
        for (entry, client) in self.pool.entries().iter().zip(clients) {
            match client.ok().and_then(|c| c.server_info().cloned()) {
                Some(info) => engines.push(CatalogEntry {
                    id: entry.spec.id.clone(),
                    server: info.server,
                    capabilities: info.capabilities,
                    endpoint: entry.expose.then(|| endpoint(&entry.spec.transport)),
                }),
                None => unavailable.push(entry.spec.id.clone()),
            }
        }
        let mut meta = Meta::new();
        meta.insert("unavailable".into(), json!(unavailable));
        let collections: Meta = self
            .collections
            .iter()
            .map(|c| {
                let ids: Vec<&str> = c.shards.iter().map(|i| self.pool.entries()[*i].spec.id.as_str()).collect();
                (c.name.clone(), json!(ids))
            })
            .collect();
        meta.insert("collections".into(), Value::Object(collections));
        Ok(CatalogListResult { engines, meta: Some(meta) })
    }
}

impl Index for Gateway {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: self.writable, ..Default::default() }
    }

    /// Routes each document to the shard owning its id (a gateway-minted id when it has
    /// none), one `index/add` per shard, concurrently; ids come back in request order.
    async fn add(&self, params: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let target = self.write_target(params.meta.as_ref())?;
        let n = target.shards.len();
        let mut per_shard: Vec<(Vec<usize>, IndexAddParams)> =
            (0..n).map(|_| (Vec::new(), IndexAddParams { documents: Vec::new(), ..params.clone() })).collect();
        let key = params.meta.as_ref().and_then(|m| m.get("idempotencyKey")).and_then(Value::as_str).map(str::to_owned);
        for (pos, mut doc) in params.documents.into_iter().enumerate() {
            let id = doc.id.get_or_insert_with(|| format!("gw-{}", uuid::Uuid::new_v4())).clone();
            let s = shard::owner(&id, n);
            per_shard[s].0.push(pos);
            per_shard[s].1.documents.push(doc);
        }
        let total: usize = per_shard.iter().map(|(p, _)| p.len()).sum();
        let calls =
            per_shard.into_iter().enumerate().filter(|(_, (p, _))| !p.is_empty()).map(|(s, (positions, mut p))| {
                let index = target.shards[s];
                let mut meta = Meta::new();
                if let Some(k) = &key {
                    meta.insert("idempotencyKey".into(), json!(format!("{k}/{}", self.pool.entries()[index].spec.id)));
                }
                p.meta = Some(meta);
                async move {
                    let client = self.shard_client(index).await?;
                    let id = &self.pool.entries()[index].spec.id;
                    let r = client.index_add(p).await.map_err(|e| {
                        let mut err = e.to_rcp();
                        err.message = format!("shard '{id}': {}", err.message);
                        err
                    })?;
                    Ok::<_, RcpError>((positions, r))
                }
            });
        let results = futures::future::join_all(calls).await;
        let mut ids = vec![String::new(); total];
        let mut chunks = None::<u64>;
        for r in results {
            let (positions, r) = r?;
            if r.ids.len() != positions.len() {
                return Err(RcpError::internal(format!(
                    "a shard returned {} ids for {} documents",
                    r.ids.len(),
                    positions.len()
                )));
            }
            for (pos, id) in positions.into_iter().zip(r.ids) {
                ids[pos] = id;
            }
            if let Some(c) = r.chunks {
                chunks = Some(chunks.unwrap_or(0) + c);
            }
        }
        Ok(IndexAddResult { ids, chunks, meta: None })
    }

    /// Deletes each id on the shard that owns it.
    async fn delete(&self, params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let target = self.write_target(params.meta.as_ref())?;
        let n = target.shards.len();
        let mut per_shard: Vec<Vec<String>> = vec![Vec::new(); n];
        for id in params.ids {
            per_shard[shard::owner(&id, n)].push(id);
        }
        let calls = per_shard.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty()).map(|(s, ids)| {
            let index = target.shards[s];
            async move {
                let client = self.shard_client(index).await?;
                client.index_delete(IndexDeleteParams { ids, meta: None }).await.map_err(|e| e.to_rcp())
            }
        });
        let mut deleted = 0;
        for r in futures::future::join_all(calls).await {
            deleted += r?.deleted;
        }
        Ok(IndexDeleteResult { deleted, meta: None })
    }
}
