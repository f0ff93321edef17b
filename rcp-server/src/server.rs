//! [`Server`] and its builder: capabilities are derived from the registered handlers.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcp_protocol::Meta;
use rcp_protocol::capabilities::{Capabilities, Flag, LogCapability, SessionCapability};
use rcp_protocol::index::IndexAddResult;
use rcp_protocol::lifecycle::{ConformanceLevel, InitializeResult, PeerInfo};
use serde_json::Value;

use crate::exec::{ExecOptions, Executor};
use crate::handler::{
    Catalog, Embed, Feedback, Graph, Handlers, Index, Memory, MultiVector, Rerank, Retrieve, SparseEmbed, Transform,
};
use crate::profile::Profile;
use crate::status::{EngineStats, Health, NotReady, Status};

/// Tunable limits and defaults of a server.
#[derive(Clone)]
pub struct ServerOptions {
    /// Deadline applied to every request except writes; `_meta.deadlineMs` may only shorten
    /// it (§13.1).
    pub request_deadline: Duration,
    /// Deadline of `index/add`, `index/delete` and `memory/build`, which may embed or index
    /// large batches; `_meta.deadlineMs` may only shorten it.
    pub write_deadline: Duration,
    /// Longest accepted stdio line; longer lines are answered with `-32013` and skipped.
    pub max_line_bytes: usize,
    /// Largest accepted JSON-RPC batch (§11); larger batches are answered with `-32013`.
    pub max_batch: usize,
    /// How many `_meta.idempotencyKey` results of `index/add` are remembered (§7.10).
    pub idempotency_cache: usize,
    /// Most requests served at once on one stdio session; up to four times as many more wait
    /// for a slot while the transport keeps reading (pings and cancels stay live). Past that it
    /// stops reading until one finishes, so a flood of slow requests pushes back on the sender
    /// instead of growing memory without bound.
    pub max_in_flight: usize,
    /// Bytes of finished answers a stream session (stdio, [`Server::serve`]) holds while the
    /// client has not read them yet. Past it, finished requests wait for the client to read
    /// (and, once the waiting places are full, the transport stops reading), so a slow reader
    /// gets backpressure instead of an ever-growing queue. One answer larger than this still
    /// passes, alone.
    pub max_queued_output: usize,
    /// The CPU executor handlers run blocking work on ([`crate::RequestContext::run_cpu`]):
    /// worker threads (default one per core) and the bound of each lane's queue.
    pub cpu: ExecOptions,
    /// Called first on each thread the server spawns to read requests or write answers (the
    /// stdio reader and writer), before it does either: where an embedding binary asks for
    /// those threads' scheduling. `None` (the default): the server leaves them as they are.
    pub io_thread_start: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("request_deadline", &self.request_deadline)
            .field("write_deadline", &self.write_deadline)
            .field("max_line_bytes", &self.max_line_bytes)
            .field("max_batch", &self.max_batch)
            .field("idempotency_cache", &self.idempotency_cache)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_queued_output", &self.max_queued_output)
            .field("cpu", &self.cpu)
            .field("io_thread_start", &self.io_thread_start.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            request_deadline: Duration::from_secs(60),
            write_deadline: Duration::from_secs(3600),
            max_line_bytes: 16 * 1024 * 1024,
            max_batch: 1024,
            idempotency_cache: 4096,
            max_in_flight: 4096,
            max_queued_output: 4 * 1024 * 1024,
            cpu: ExecOptions::default(),
            io_thread_start: None,
        }
    }
}

/// An RCP server: handlers, the capabilities they imply, identity and options.
///
/// Cheap to clone. Serve it with [`Server::serve_stdio`] or [`Server::serve`]
/// (any async byte stream).
#[derive(Clone)]
pub struct Server {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub info: PeerInfo,
    pub handlers: Handlers,
    /// Everything the server enables, before any profile narrows it.
    pub enabled: Capabilities,
    pub conformance: ConformanceLevel,
    pub options: ServerOptions,
    /// `info` result before `initialize` (the latest profile's set).
    pub default_info: Arc<[u8]>,
    /// The latest profile's capability set (what stateless sessions are served at).
    pub default_caps: Arc<Capabilities>,
    pub idempotency: Mutex<IdempotencyCache>,
    /// The engine's readiness and figures (if it registered them) and the draining flag.
    pub health: Health,
    /// The bounded pool CPU-bound handler work runs on.
    pub executor: Executor,
}

impl Server {
    /// Starts building a server with this identity.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }

    /// The capabilities the server enables (what `info` reports before `initialize`).
    pub fn capabilities(&self) -> Capabilities {
        Profile::latest().apply(&self.shared.enabled)
    }

    /// The server's identity.
    pub fn info(&self) -> &PeerInfo {
        &self.shared.info
    }

    /// The options in force.
    pub fn options(&self) -> &ServerOptions {
        &self.shared.options
    }

    /// The CPU executor handlers run blocking work on.
    pub fn executor(&self) -> &Executor {
        &self.shared.executor
    }

    pub(crate) fn info_result(&self, profile: Profile, caps: &Capabilities, session: Option<&str>) -> Vec<u8> {
        let mut meta = Meta::new();
        meta.insert("conformance".into(), Value::from(self.shared.conformance.as_str()));
        if let Some(id) = session {
            meta.insert("session".into(), Value::from(id));
        }
        let result = InitializeResult {
            protocol_version: profile.version(),
            server: self.shared.info.clone(),
            capabilities: caps.clone(),
            meta: Some(meta),
        };
        serde_json::to_vec(&result).unwrap_or_else(|_| b"{}".to_vec())
    }
}

impl Server {
    /// A session that is already initialised at the advertised capabilities, for transports
    /// that serve each request on its own (stateless HTTP, §5.2).
    pub fn stateless_session(&self) -> crate::Session {
        crate::Session::stateless(crate::session::Negotiated {
            profile: Profile::latest(),
            capabilities: Arc::clone(&self.shared.default_caps),
            info: Arc::clone(&self.shared.default_info),
            client_log: None,
        })
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("info", &self.shared.info).field("capabilities", &self.shared.enabled).finish()
    }
}

/// Builds a [`Server`]. Each `retrieve`/`embed`/... call registers a handler and, with it,
/// its capability; switches such as [`ServerBuilder::streaming`] add flag capabilities.
///
/// An engine implementing several traits is registered once per trait, sharing one
/// `Arc<Engine>` (every capability trait is implemented for `Arc<T>`).
pub struct ServerBuilder {
    info: PeerInfo,
    handlers: Handlers,
    caps: Capabilities,
    conformance: ConformanceLevel,
    options: ServerOptions,
    status: Option<Arc<dyn Status>>,
}

impl ServerBuilder {
    /// A builder for a server with this identity and no capabilities.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            info: PeerInfo::new(name, version),
            handlers: Handlers::default(),
            caps: Capabilities::default(),
            conformance: ConformanceLevel::L0,
            options: ServerOptions::default(),
            status: None,
        }
    }

    /// Registers the `retrieve` handler; advertises `retrieve` and, as the handler declares,
    /// `filter`, `pagination` and `citations`.
    pub fn retrieve<T: Retrieve>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.retrieve = Some(h.capability());
        self.caps.filter = h.filter();
        self.caps.pagination = h.pagination().then(Flag::default);
        self.caps.citations = h.citations().then(Flag::default);
        self.handlers.retrieve = Some(h);
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
        self.handlers.embed = Some(h);
        self
    }

    /// Registers the `embed/sparse` handler; advertises `sparseEmbed`.
    pub fn sparse_embed<T: SparseEmbed>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.sparse_embed = Some(h.capability());
        self.handlers.sparse_embed = Some(h);
        self
    }

    /// Registers the `embed/multi` handler; advertises `multiVector`.
    pub fn multi_vector<T: MultiVector>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.multi_vector = Some(h.capability());
        self.handlers.multi_vector = Some(h);
        self
    }

    /// Registers the `rerank` handler; advertises `rerank`.
    pub fn rerank<T: Rerank>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.rerank = Some(h.capability());
        self.handlers.rerank = Some(h);
        self
    }

    /// Registers the `query/transform` handler; advertises `transform`.
    pub fn transform<T: Transform>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.transform = Some(h.capability());
        self.handlers.transform = Some(h);
        self
    }

    /// Registers the `graph` handler; advertises `graph`.
    pub fn graph<T: Graph>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.graph = Some(h.capability());
        self.handlers.graph = Some(h);
        self
    }

    /// Registers the `index/add` + `index/delete` handler; advertises `index`.
    pub fn index<T: Index>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.index = Some(h.capability());
        self.handlers.index = Some(h);
        self
    }

    /// Registers the `catalog/list` handler; advertises `catalog`.
    pub fn catalog<T: Catalog>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.catalog = Some(h.capability());
        self.handlers.catalog = Some(h);
        self
    }

    /// Registers the `feedback` handler; advertises `feedback`.
    pub fn feedback<T: Feedback>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.feedback = Some(h.capability());
        self.handlers.feedback = Some(h);
        self
    }

    /// Registers the `memory/*` handler; advertises `memory`.
    pub fn memory<T: Memory>(mut self, handler: T) -> Self {
        let h = Arc::new(handler);
        self.caps.memory = Some(h.capability());
        self.handlers.memory = Some(h);
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

    /// Advertises `session` (§7.7.3) with this metadata.
    pub fn session(mut self, cap: SessionCapability) -> Self {
        self.caps.session = Some(cap);
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

    /// Sets the niceness of the CPU worker threads (0-19; see [`ExecOptions::nice`]).
    pub fn cpu_nice(mut self, nice: u8) -> Self {
        self.options.cpu.nice = nice.min(19);
        self
    }

    /// Sets how many CPU jobs may wait in each lane's queue before more are refused (`-32011`).
    pub fn cpu_queue(mut self, queue: usize) -> Self {
        self.options.cpu.queue = queue;
        self
    }

    /// Runs `f` first on each thread the server spawns to read requests or write answers
    /// ([`ServerOptions::io_thread_start`]), e.g. to raise their priority. Without it the
    /// server never touches its threads' scheduling.
    pub fn on_io_thread_start(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.options.io_thread_start = Some(Arc::new(f));
        self
    }

    /// Sets the longest accepted stdio line.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.options.max_line_bytes = bytes;
        self
    }

    /// Finishes the server.
    pub fn build(self) -> Server {
        let profile = Profile::latest();
        let caps = profile.apply(&self.caps);
        let mut server = Server {
            shared: Arc::new(Shared {
                info: self.info,
                handlers: self.handlers,
                enabled: self.caps,
                conformance: self.conformance,
                idempotency: Mutex::new(IdempotencyCache::new(self.options.idempotency_cache)),
                executor: Executor::new(self.options.cpu),
                options: self.options,
                default_info: Arc::from(Vec::new()),
                default_caps: Arc::new(caps.clone()),
                health: Health::new(self.status),
            }),
        };
        let info = Arc::from(server.info_result(profile, &caps, None));
        if let Some(shared) = Arc::get_mut(&mut server.shared) {
            shared.default_info = info;
        }
        server
    }
}

/// `index/add` results by `_meta.idempotencyKey`, oldest evicted first. Each key owns a cell
/// that the first write fills; repeats (concurrent or later) read it instead of writing again.
pub(crate) struct IdempotencyCache {
    cap: usize,
    order: VecDeque<String>,
    map: HashMap<String, Arc<tokio::sync::OnceCell<IndexAddResult>>>,
}

impl IdempotencyCache {
    fn new(cap: usize) -> Self {
        Self { cap, order: VecDeque::new(), map: HashMap::new() }
    }

    /// The cell of `key`, created if absent.
    pub fn cell(&mut self, key: String) -> Arc<tokio::sync::OnceCell<IndexAddResult>> {
        if let Some(c) = self.map.get(&key) {
            return Arc::clone(c);
        }
        let cell = Arc::new(tokio::sync::OnceCell::new());
        if self.cap > 0 {
            self.map.insert(key.clone(), Arc::clone(&cell));
            self.order.push_back(key);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
        cell
    }
}

impl Server {
    /// Whether the server should receive new work: not draining, and the engine's
    /// [`Status::ready`] (if one is registered) says it can serve.
    pub fn readiness(&self) -> Result<(), NotReady> {
        self.shared.health.readiness()
    }

    /// Marks the server as draining: from now on [`Server::readiness`] fails (`/readyz` is
    /// `503`) while requests still in flight are finished. The HTTP transport calls this when
    /// its shutdown signal fires.
    pub fn begin_drain(&self) {
        if self.shared.health.begin_drain() {
            tracing::info!(target: "rcp_server", engine = %self.shared.info.name, "draining: readiness now fails");
        }
    }

    /// The engine's figures, or all-`None` when it registered no [`Status`].
    pub fn engine_stats(&self) -> EngineStats {
        self.shared.health.stats()
    }

    /// Logs the one start-up line at `info`: engine, version, transport, address (HTTP), data
    /// directory and document count when the engine reports them.
    pub(crate) fn log_startup(&self, transport: &'static str, addr: Option<std::net::SocketAddr>) {
        let stats = self.engine_stats();
        let data_dir = stats.data_dir.as_ref().map_or_else(|| "(in memory)".to_owned(), |d| d.display().to_string());
        tracing::info!(
            target: "rcp_server",
            engine = %self.shared.info.name,
            version = self.shared.info.version.as_deref().unwrap_or(""),
            transport,
            addr = addr.map(|a| a.to_string()),
            data_dir = %data_dir,
            documents = stats.documents,
            index_version = stats.index_version,
            "serving"
        );
    }
}
