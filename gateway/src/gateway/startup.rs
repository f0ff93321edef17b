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
use rcp_client::{Client, Limits};
use rcp_server::{EngineStats, Server, ServerBuilder, Status};
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
    /// Fusion of collections when the request names none (§16.3; default RRF).
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
            fusion: FusionMethod::default(),
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
    pub(super) federated: Option<FederatedRetrieve>,
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
        let federated = if caps.is_empty() && !pool.entries().is_empty() {
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
        let federated = federated.map(|mut f| {
            f.retrieve.rerank_builtin = reranker.is_some().then_some(true);
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
        Self { pool, collections, options, federated, indexable, writable, reranker }
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
            .status(Arc::clone(self))
            .streaming()
            .conformance(ConformanceLevel::L1);
        if self.federated.is_some() {
            b = b.retrieve(Arc::clone(self));
        }
        if !self.indexable.is_empty() {
            b = b.index(Arc::clone(self));
        }
        if self.reranker.is_some() {
            b = b.rerank(Arc::clone(self));
        }
        b
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
