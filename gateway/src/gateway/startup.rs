//! The gateway itself: its options, its collections, and start-up — connect to the engines,
//! compute what the federation can promise from those that answered, register the handlers.
//!
//! The framework reads a handler's capability once, when the server is built, so
//! [`Gateway::start`] connects to the engines first and computes what the federation can
//! promise from the engines that answered; engines that connect later are queried but do not
//! widen the advertised capabilities until the gateway restarts.

use std::sync::Arc;
use std::time::Duration;

use rcp_client::breaker::Backoff;
use rcp_client::federation::capabilities::{Federated, federate};
use rcp_client::federation::origin::{Namespaces, OriginLedger};
use rcp_client::federation::route::EngineView;
use rcp_client::{Client, Limits};
use rcp_server::{EngineStats, Server, ServerBuilder, SessionOptions, Status, TokenCounter};
use rcp_wire::capabilities::{Capabilities, IndexCapability, RetrieveCapability};
use rcp_wire::fusion::FusionMethod;
use rcp_wire::lifecycle::{ConformanceLevel, PeerInfo};

use super::reranker::Reranker;
use crate::pool::{PATH_ENV, Pool, PoolOptions};
use crate::registry::GatewayRegistry;
use rcp_client::federation::capabilities::{FUSION_METHODS, FederatedRetrieve, federate_retrieve};

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
    /// How an engine that keeps failing (failed connects, connections that close) is backed
    /// off: its circuit breaker's threshold, first and longest back-off, jitter.
    pub backoff: Backoff,
    /// What each engine may make the gateway hold (frame size and time, outbound queue, logs).
    pub limits: Limits,
    /// Each engine is asked for `k × k_multiplier` hits, for fusion headroom (§16.2).
    pub k_multiplier: u64,
    /// Fusion of collections when the request names none (§16.3; by default
    /// [`rcp_client::federation::preferred_fusion`], convex falling back to RRF).
    pub fusion: FusionMethod,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("indexable", &self.indexable).finish_non_exhaustive()
    }
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            identity: "rcp-gateway".into(),
            depth: 3,
            engine_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            backoff: Backoff::default(),
            limits: Limits::default(),
            k_multiplier: 2,
            fusion: rcp_client::federation::preferred_fusion(),
        }
    }
}

/// One collection: the registry entries (shards) it spans, in registry order.
#[derive(Debug, Clone)]
pub(super) struct Collection {
    pub(super) name: String,
    pub(super) shards: Vec<usize>,
}

/// An RCP aggregator over a [`GatewayRegistry`].
pub struct Gateway {
    pub(super) pool: Pool,
    pub(super) collections: Vec<Collection>,
    pub(super) options: GatewayOptions,
    /// The federated `retrieve` (with `filter` and `citations`) over the collections.
    pub(super) retrieval: Option<FederatedRetrieve>,
    /// Every engine's capabilities as it answered at start-up (`None`: it did not), by
    /// registry index: what the routing rules route by.
    pub(super) engine_caps: Vec<Option<Capabilities>>,
    /// The union of the engines' capabilities (§16.4) and where each key comes from.
    pub(super) federated: Federated,
    /// How ids are named: shared, or `<collection>:<id>` (the registry's `corpora`).
    pub(super) namespaces: Namespaces,
    /// Which engines returned each id the gateway relayed (for `feedback`).
    pub(super) ledger: OriginLedger,
    /// Collections whose every shard advertised `index` at start-up.
    pub(super) indexable: Vec<String>,
    pub(super) writable: bool,
    /// The registry's reranking entry, when it answered at start-up with `rerank`.
    pub(super) reranker: Option<Reranker>,
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
        let corpora = registry.corpora;
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
            backoff: options.backoff,
            limits: options.limits,
            client: PeerInfo::new(options.identity.clone(), env!("CARGO_PKG_VERSION")),
            ancestry,
        };
        let mut collections: Vec<Collection> = Vec::new();
        for (i, e) in registry.engines.iter().enumerate().filter(|(_, e)| e.rerank.is_none()) {
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
        let reranker = find_reranker(&pool, &connected);
        // The reranker is no collection: it does not shape what retrieval can promise.
        let caps: Vec<Capabilities> = connected
            .iter()
            .enumerate()
            .filter(|(i, _)| pool.entries()[*i].rerank.is_none())
            .filter_map(|(_, c)| c.as_ref().map(Client::capabilities))
            .collect();
        // With no engine reachable yet (or inside a start-up cycle), `retrieve` is still
        // advertised, without options, so the gateway serves engines that come up later.
        let retrieval = if caps.is_empty() && !pool.entries().is_empty() {
            Some(FederatedRetrieve {
                retrieve: RetrieveCapability {
                    fusion: Some(FUSION_METHODS.map(String::from).to_vec()),
                    ..Default::default()
                },
                ..Default::default()
            })
        } else {
            federate_retrieve(&caps.iter().collect::<Vec<_>>())
        };
        let retrieval = retrieval.map(|mut f| {
            // The gateway's own rerank stage, else the engines' built-in ones (the union rule).
            f.retrieve.rerank_builtin = (reranker.is_some() || f.retrieve.rerank_builtin == Some(true)).then_some(true);
            if reranker.is_some() {
                // The `rerank.fusion` values the gateway's own stage accepts.
                rcp_server::Funnel::advertise(&mut f.retrieve);
            }
            // Its scores are fused (RRF, weighted, convex: never below 0), so a client fusing
            // this gateway with other engines may use convex fusion (§16.3); a reranker's raw
            // scores have no floor.
            f.retrieve.score_floor = reranker.is_none().then_some(0.0);
            f
        });
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
        let engine_caps: Vec<Option<Capabilities>> =
            connected.iter().map(|c| c.as_ref().map(Client::capabilities)).collect();
        let views: Vec<EngineView<'_>> = pool
            .entries()
            .iter()
            .zip(&engine_caps)
            .filter_map(|(e, c)| c.as_ref().map(|caps| EngineView { id: &e.spec.id, priority: e.spec.priority, caps }))
            .collect();
        let federated = federate(&views);
        let namespaces = Namespaces::new(corpora, collections.iter().map(|c| c.name.clone()));
        Self {
            pool,
            collections,
            options,
            retrieval,
            engine_caps,
            federated,
            namespaces,
            ledger: OriginLedger::default(),
            indexable,
            writable,
            reranker,
        }
    }

    /// The gateway's identity (§16.2).
    pub fn identity(&self) -> &str {
        &self.options.identity
    }

    /// The federated `retrieve` capability computed at start-up (`None`: no engine retrieves).
    pub fn federated(&self) -> Option<&FederatedRetrieve> {
        self.retrieval.as_ref()
    }

    /// The union of the engines' capabilities computed at start-up (§16.4), with provenance.
    pub fn union(&self) -> &Federated {
        &self.federated
    }

    /// The collection (its index, the namespace of its ids) registry entry `index` is a shard
    /// of; `None` for the reranking entry.
    pub(super) fn namespace_of(&self, index: usize) -> Option<usize> {
        self.collections.iter().position(|c| c.shards.contains(&index))
    }

    /// Collection names, in registry order.
    pub fn collections(&self) -> Vec<&str> {
        self.collections.iter().map(|c| c.name.as_str()).collect()
    }

    /// The connection pool (for tests and the MCP bridge).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A server builder with the gateway's handlers registered: `catalog` always, and each
    /// capability its engines offer (§16.4, [`federate`]): `retrieve` when some engine
    /// retrieves, `index` when a collection is indexable on every shard, and every routed or
    /// fanned-out key any engine advertised. `session`, `pagination`, `tokenBudget` (counted
    /// in words), `streaming` and `log` are the gateway's own, applied to the federated
    /// answer. The vendor key `x-federation` says which engines each key comes from.
    pub fn builder(self: &Arc<Self>) -> ServerBuilder {
        let union = &self.federated.capabilities;
        let mut b = Server::builder(self.options.identity.clone(), env!("CARGO_PKG_VERSION"))
            .catalog(Arc::clone(self))
            .status(Arc::clone(self))
            .streaming()
            .log()
            .extension("x-federation", serde_json::json!({"provenance": self.federated.provenance}))
            // Its handlers limit each call to the caller's collections (`grants`).
            .collection_grants()
            .conformance(ConformanceLevel::L1);
        if self.retrieval.is_some() {
            b = b.retrieve(Arc::clone(self)).session(SessionOptions::default()).token_counter(Words);
        }
        if !self.indexable.is_empty() {
            b = b.index(Arc::clone(self));
        }
        if union.rerank.is_some() {
            b = b.rerank(Arc::clone(self));
        }
        if union.embed.is_some() {
            b = b.embed(Arc::clone(self));
        }
        if union.sparse_embed.is_some() {
            b = b.sparse_embed(Arc::clone(self));
        }
        if union.multi_vector.is_some() {
            b = b.multi_vector(Arc::clone(self));
        }
        if union.transform.is_some() {
            b = b.transform(Arc::clone(self));
        }
        if union.graph.is_some() {
            b = b.graph(Arc::clone(self));
        }
        // Only session memory among the engines: nothing the gateway can offer (see `Memory`).
        if union.memory.as_ref().is_some_and(|m| m.scopes.iter().any(|s| s != "session")) {
            b = b.memory(Arc::clone(self));
        }
        if union.feedback.is_some() {
            b = b.feedback(Arc::clone(self));
        }
        b
    }
}

/// The gateway's `tokenBudget` counter: words (runs of letters and digits). The gateway has
/// no model of its own; an engine's tokenizer would count differently, so the budget is in
/// the gateway's words, as its notes say.
#[derive(Debug, Clone, Copy)]
struct Words;

impl TokenCounter for Words {
    fn name(&self) -> String {
        "the gateway's word count (runs of letters and digits; not a model's subword tokenizer)".into()
    }

    fn count(&self, text: &str) -> usize {
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).count()
    }
}

/// The registry's reranking entry, if it connected at start-up and serves `rerank` (with the
/// method the registry names); a warning says why not otherwise.
fn find_reranker(pool: &Pool, connected: &[Option<Client>]) -> Option<Reranker> {
    let (index, entry) = pool.entries().iter().enumerate().find(|(_, e)| e.rerank.is_some())?;
    let method = entry.rerank.as_ref().and_then(|r| r.method.as_deref());
    let found = match &connected[index] {
        Some(client) => Reranker::of(index, method, client),
        None => Err("unavailable at start-up".into()),
    };
    found
        .inspect_err(|why| tracing::warn!(engine = %entry.spec.id, %why, "reranker not used; retrieve is not reranked"))
        .ok()
}

/// The gateway's report to `/metrics`: each scrape refreshes the engines' breaker gauges
/// ([`crate::pool::Pool::publish_metrics`]); the gateway holds no index of its own.
impl Status for Gateway {
    fn stats(&self) -> EngineStats {
        self.pool.publish_metrics();
        EngineStats::default()
    }
}
