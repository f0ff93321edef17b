//! [`ServerBuilder`]: a [`Server`] put together from the registered handlers.
//!
//! Capabilities are derived from the registered handlers: registering one is the only way its
//! capability key appears in `initialize`.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rcp_wire::capabilities::{Capabilities, Flag, LogCapability};
use rcp_wire::lifecycle::{ConformanceLevel, PeerInfo};
use serde_json::Value;

use super::Server;
use crate::handler::{
    Catalog, Embed, Feedback, Graph, Index, Memory, MultiVector, Rerank, Retrieve, SparseEmbed, Transform,
};
use crate::operations::status::Status;
use crate::retrieval::budget::{Counter, TokenCounter};
use crate::retrieval::feedback::quarantine::Quarantine;
use crate::retrieval::feedback::{FeedbackHandler, FeedbackStore};
use crate::retrieval::rerank::stage::{self, Reranker};
use crate::retrieval::session_dedup::{SessionOptions, Trajectories};
use crate::server::exec::Executor;
use crate::server::options::ServerOptions;
use crate::service::dispatch::{Dispatcher, IdempotencyCache, Identity, Routes, methods};
use crate::service::profile::{Revision, Revisions};

/// Builds a [`Server`]. Each `retrieve`/`embed`/... call registers a handler and, with it,
/// its capability; switches such as [`ServerBuilder::streaming`] add flag capabilities.
///
/// An engine implementing several traits is registered once per trait, sharing one
/// `Arc<Engine>` (every capability trait is implemented for `Arc<T>`).
pub struct ServerBuilder {
    info: PeerInfo,
    routes: Routes,
    caps: Capabilities,
    conformance: ConformanceLevel,
    options: ServerOptions,
    status: Option<Arc<dyn Status>>,
    /// The protocol revisions spoken (RCP/1 unless [`ServerBuilder::revision`] adds one).
    revisions: Revisions,
    /// The quarantine `retrieve` results honour, once [`ServerBuilder::durable_feedback`] sets it.
    quarantine: Arc<Quarantine>,
    /// The `index/add` route's results by idempotency key, sized at [`ServerBuilder::build`].
    idempotency: Arc<Mutex<IdempotencyCache>>,
    /// The `session` feature's options, when switched on.
    session: Option<SessionOptions>,
    /// The `retrieve` route's trajectories, created at [`ServerBuilder::build`] when `session`
    /// is on.
    trajectories: Arc<OnceLock<Trajectories>>,
    /// The engine's tokenizer for `tokenBudget` packing, once supplied.
    counter: Arc<OnceLock<Counter>>,
    /// The reranker of the inline rerank stage, once [`ServerBuilder::rerank_builtin`] sets it.
    inline_reranker: Option<Reranker>,
    /// The `retrieve` route's reranker, set at [`ServerBuilder::build`] when both are registered.
    reranker: Arc<OnceLock<Reranker>>,
    /// Whether the handlers apply collection grants ([`ServerBuilder::collection_grants`]).
    collection_grants: bool,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder").field("info", &self.info).field("routes", &self.routes).finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// A builder for a server with this identity and no capabilities.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            info: PeerInfo::new(name, version),
            routes: Routes::default(),
            caps: Capabilities::default(),
            conformance: ConformanceLevel::L0,
            options: ServerOptions::default(),
            status: None,
            revisions: Revisions::default(),
            quarantine: Arc::default(),
            idempotency: Arc::new(Mutex::new(IdempotencyCache::new(0))),
            session: None,
            trajectories: Arc::new(OnceLock::new()),
            counter: Arc::new(OnceLock::new()),
            inline_reranker: None,
            reranker: Arc::new(OnceLock::new()),
            collection_grants: false,
        }
    }

    /// Registers the `retrieve` handler; advertises `retrieve` and, as the handler declares,
    /// `filter`, `pagination` and `citations`.
    pub fn retrieve<T: Retrieve>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        let mut cap = h.capability();
        let honours = h.honours().names();
        if !honours.is_empty() {
            cap.extra.insert(crate::Honours::KEY.into(), honours.into());
        }
        self.caps.retrieve = Some(cap);
        self.caps.filter = h.filter();
        self.caps.pagination = h.pagination().then(Flag::default);
        self.caps.citations = h.citations().then(Flag::default);
        let route = methods::RetrieveRoute {
            handler: h,
            trajectories: Arc::clone(&self.trajectories),
            quarantine: Arc::clone(&self.quarantine),
            counter: Arc::clone(&self.counter),
            reranker: Arc::clone(&self.reranker),
        };
        methods::bind_retrieve(&mut self.routes, route);
        self
    }

    /// Registers the `embed` handler; advertises `embed` (with `encodings` always listing `json`).
    pub fn embed<T: Embed>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        let mut cap = h.capability();
        if let Some(enc) = cap.encodings.as_mut()
            && !enc.iter().any(|e| e == "json")
        {
            enc.insert(0, "json".into());
        }
        self.caps.embed = Some(cap);
        methods::bind_embed(&mut self.routes, h);
        self
    }

    /// Registers the `embed/sparse` handler; advertises `sparseEmbed`.
    pub fn sparse_embed<T: SparseEmbed>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.sparse_embed = Some(h.capability());
        methods::bind_sparse_embed(&mut self.routes, h);
        self
    }

    /// Registers the `embed/multi` handler; advertises `multiVector`.
    pub fn multi_vector<T: MultiVector>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.multi_vector = Some(h.capability());
        methods::bind_multi_vector(&mut self.routes, h);
        self
    }

    /// Registers the `rerank` handler; advertises `rerank`.
    pub fn rerank<T: Rerank>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.rerank = Some(h.capability());
        methods::bind_rerank(&mut self.routes, h);
        self
    }

    /// Registers `reranker` as the `rerank` handler (advertising `rerank`) and as the inline
    /// rerank stage of `retrieve` (§3.3, §7.7), advertising `retrieve.rerankBuiltin` when a
    /// `retrieve` handler is registered too (in either order).
    ///
    /// The framework then runs the funnel around the engine's `retrieve` handler (see
    /// [`crate::Funnel`]): the handler is asked for `candidateK` candidates (default
    /// `max(k, 100)` within `maxK`) with their texts, `reranker` scores the top `rerank.topN`
    /// (default `max(k, 20)`, at most `rerank.maxCandidates`) with the requested method (one of
    /// `rerank.methods`; another is -32005), and the best `k` are returned with `score` the
    /// reranker's and the first-stage scores merged (`rerank.fusion`, default `convex`; `none`
    /// keeps the reranker's), `scores.rerank` and the first-stage score in `scores`,
    /// `usage.candidates` and `usage.reranked`. A request with `rerank: false` is served by
    /// the handler alone. When the request's deadline cannot hold `topN` passages at the cost
    /// this server has measured for the method, only the best that fit are rescored and the
    /// rest follow in first-stage order (see [`crate::Funnel`]).
    pub fn rerank_builtin<T: Rerank>(mut self, reranker: T) -> Self {
        let h = Arc::new(reranker);
        self.inline_reranker = Some(stage::erase(Arc::clone(&h)));
        self.rerank(h)
    }

    /// Registers the `query/transform` handler; advertises `transform`.
    pub fn transform<T: Transform>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.transform = Some(h.capability());
        methods::bind_transform(&mut self.routes, h);
        self
    }

    /// Registers the `graph` handler; advertises `graph`.
    pub fn graph<T: Graph>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.graph = Some(h.capability());
        methods::bind_graph(&mut self.routes, h, Arc::clone(&self.trajectories));
        self
    }

    /// Registers the `index/add` + `index/delete` handler; advertises `index`.
    pub fn index<T: Index>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.index = Some(h.capability());
        methods::bind_index(&mut self.routes, h, Arc::clone(&self.idempotency));
        self
    }

    /// Registers the `catalog/list` handler; advertises `catalog`.
    pub fn catalog<T: Catalog>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.catalog = Some(h.capability());
        methods::bind_catalog(&mut self.routes, h);
        self
    }

    /// Registers the `feedback` handler; advertises `feedback`.
    pub fn feedback<T: Feedback>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.feedback = Some(h.capability());
        methods::bind_feedback(&mut self.routes, h, Arc::clone(&self.trajectories));
        self
    }

    /// Switches on durable feedback (§7.16) backed by `store`: registers the `feedback` handler
    /// (advertising `feedback`; signals bounded, on disk before they are acknowledged) and the
    /// rule that leaves hits `store` quarantines out of every later `retrieve` result. See
    /// [`crate::feedback`].
    pub fn durable_feedback(self, store: Arc<FeedbackStore>) -> Self {
        self.quarantine.set(Arc::clone(&store));
        self.feedback(FeedbackHandler(store))
    }

    /// Registers the `memory/*` handler; advertises `memory`.
    pub fn memory<T: Memory>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.memory = Some(h.capability());
        methods::bind_memory(&mut self.routes, h);
        self
    }

    /// Advertises `streaming`: handlers' progress frames reach clients that send
    /// `_meta.progressToken` (§9).
    pub fn streaming(mut self) -> Self {
        self.caps.streaming = Some(Flag::default());
        self
    }

    /// Advertises `log`: handlers' `ctx.log(...)` reaches clients that opted in (§17.1).
    pub fn log(mut self) -> Self {
        self.caps.log = Some(LogCapability {
            levels: Some(["debug", "info", "notice", "warning", "error"].map(String::from).to_vec()),
            ..LogCapability::default()
        });
        self
    }

    /// Switches on trajectory sessions (§7.7.3) and advertises `session`: `retrieve` and
    /// `graph` calls that carry the same `sessionId` do not return a hit twice (with `dedup`),
    /// and hits a `feedback` call of the session signals count as returned, within the bounds
    /// of `options` (see [`SessionOptions`]). The engine's handlers are not involved.
    pub fn session(mut self, options: SessionOptions) -> Self {
        self.caps.session = Some(options.capability());
        self.session = Some(options);
        self
    }

    /// Supplies the engine's tokenizer and switches on `tokenBudget` packing (§7.7.2): a
    /// `retrieve` with `tokenBudget` returns the longest prefix of its ranking (at most `k`
    /// hits) whose bodies fit in the budget, with `usage.tokens` (see [`crate::budget`]).
    /// `retrieve.tokenBudget: true` is advertised exactly when a counter is supplied, whatever
    /// the handler's capability says.
    pub fn token_counter<C: TokenCounter>(self, counter: C) -> Self {
        let _ = self.counter.set(Counter(Arc::new(counter)));
        self
    }

    /// Adds a vendor capability key (§6.2). Only `x-` keys are allowed: a core key can only
    /// come from a registered handler.
    ///
    /// # Panics
    /// If `key` does not start with `x-`.
    pub fn extension(mut self, key: &str, value: Value) -> Self {
        assert!(key.starts_with("x-"), "extension capability keys must start with 'x-' (got '{key}')");
        self.caps.extra.insert(key.to_owned(), value);
        self
    }

    /// Registers the engine's [`Status`]: its readiness (`/readyz`), index figures (`/metrics`
    /// gauges) and data directory (the start-up line).
    pub fn status<T: Status>(mut self, status: T) -> Self {
        self.status = Some(Arc::new(status));
        self
    }

    /// Declares that this server's handlers apply collection grants (`read@fruit`, §15.6):
    /// each reads [`crate::RequestContext::grant`] and limits what a call reaches to the
    /// collections granted. Without it a server serves no request of a token whose grant names
    /// collections (`-32012`), so a limit is never silently widened to everything. The gateway
    /// declares it; an engine with a single collection has nothing to limit.
    pub fn collection_grants(mut self) -> Self {
        self.collection_grants = true;
        self
    }

    /// Declares the conformance level reported in `_meta.conformance` (§14). Default `L0`.
    pub fn conformance(mut self, level: ConformanceLevel) -> Self {
        self.conformance = level;
        self
    }

    /// Replaces the options.
    pub fn options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the per-request deadline (reads).
    pub fn request_deadline(mut self, deadline: Duration) -> Self {
        self.options.request_deadline = deadline;
        self
    }

    /// Sets the deadline of writes (`index/add`, `index/delete`, `memory/build`).
    pub fn write_deadline(mut self, deadline: Duration) -> Self {
        self.options.write_deadline = deadline;
        self
    }

    /// Sets the CPU executor's worker threads (`0`: one per core).
    pub fn cpu_threads(mut self, threads: usize) -> Self {
        self.options.cpu.threads = threads;
        self
    }

    /// Sets the niceness of the CPU worker threads (0-19; see [`crate::exec::ExecOptions::nice`]).
    pub fn cpu_nice(mut self, nice: u8) -> Self {
        self.options.cpu.nice = nice.min(19);
        self
    }

    /// Whether CPU workers return to the process's niceness when they start, rather than keep
    /// the one they inherit (see [`crate::exec::ExecOptions::process_niceness`]): for a server
    /// whose I/O threads are raised through [`ServerBuilder::on_io_thread_start`].
    pub fn cpu_process_niceness(mut self, process: bool) -> Self {
        self.options.cpu.process_niceness = process;
        self
    }

    /// Sets how many CPU jobs may wait in each lane's queue before more are refused (`-32011`;
    /// a pipe's one peer waits for room instead, see [`crate::exec::Executor::waiting`]).
    pub fn cpu_queue(mut self, queue: usize) -> Self {
        self.options.cpu.queue = queue;
        self
    }

    /// Sets the longest accepted stdio line.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.options.max_line_bytes = bytes;
        self
    }

    /// Sets the hook run first thing on each I/O thread the server spawns itself (see
    /// [`ServerOptions::io_thread_start`]).
    pub fn on_io_thread_start(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.options.io_thread_start = Some(Arc::new(f));
        self
    }

    /// Adds a protocol revision to the ones spoken (replacing one of the same version): for
    /// tests and experiments with revisions this framework does not ship. A capability is
    /// advertised at a negotiated revision only if that revision permits it *and* a handler or
    /// switch enables it; one enabled but not permitted stays silently inactive.
    pub fn revision(mut self, revision: Revision) -> Self {
        self.revisions.insert(revision);
        self
    }

    /// Finishes the server.
    pub fn build(self) -> Server {
        if let Ok(mut cache) = self.idempotency.lock() {
            *cache = IdempotencyCache::new(self.options.idempotency_cache);
        }
        let mut caps = self.caps;
        if let (Some(reranker), Some(retrieve)) = (self.inline_reranker, caps.retrieve.as_mut()) {
            crate::Funnel::advertise(retrieve);
            let _ = self.reranker.set(reranker);
        }
        if let Some(options) = self.session {
            let _ = self.trajectories.set(Trajectories::new(options));
        }
        if let Some(rc) = caps.retrieve.as_mut() {
            rc.token_budget = self.counter.get().is_some().then_some(true);
        }
        let mut identity = Identity::new(self.info, self.conformance, caps, self.revisions);
        identity.collection_grants = self.collection_grants;
        let dispatcher = Dispatcher {
            identity,
            routes: self.routes,
            executor: Executor::new(self.options.cpu),
            options: self.options,
        };
        Server::assemble(dispatcher, self.status)
    }
}
