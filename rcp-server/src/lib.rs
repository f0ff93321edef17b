//! The server framework for RCP, the Retrieval Context Protocol.
//!
//! An engine implements one trait per capability it offers ([`Retrieve`], [`Embed`],
//! [`Index`], ...) and registers the implementations on a [`ServerBuilder`]. The framework
//! derives `initialize.capabilities` from what was registered, so a server cannot advertise a
//! method it does not handle, and applies every rule of the protocol before a handler runs:
//! lifecycle and version negotiation (§7.1, §13), gating (-32001/-32003/-32004), option
//! values and the `strict` rule (-32005), params validation with `error.data.field` (-32602),
//! the retrieval funnel and `maxK` clamping (§7.7), filters (§8), cancellation (§7.14),
//! deadlines (§13.1), progress (§9) and logs (§17.1). Transports only frame bytes. An engine
//! can also switch on trajectory sessions ([`ServerBuilder::session`], [`SessionOptions`]):
//! `retrieve` and `graph` calls sharing a `sessionId` then never return a hit twice (§7.7.3);
//! and, by supplying its tokenizer ([`ServerBuilder::token_counter`], [`TokenCounter`]),
//! `tokenBudget` packing (§7.7.2).
//!
//! The public surface: for an engine author, [`Server`] and [`ServerBuilder`], the capability
//! traits, [`RequestContext`], [`HandlerResult`] and the request types; for a transport author,
//! [`transport`] ([`transport::IntoTransport`], [`transport::Connection`]) and [`http`]; the
//! CPU executor in [`exec`].
//!
//! ```no_run
//! use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
//! use rcp_wire::capabilities::RetrieveCapability;
//! use rcp_wire::{Hit, RetrieveResult};
//!
//! struct Echo;
//!
//! impl Retrieve for Echo {
//!     fn capability(&self) -> RetrieveCapability {
//!         RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
//!     }
//!
//!     async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
//!         // A resolved request: `k` clamped, every default applied, the filter validated.
//!         let hit = Hit::new("doc-1", 1.0).with_text(req.query.text());
//!         Ok(RetrieveResult::from_hits(vec![hit]))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     # #[cfg(feature = "cli")]
//!     rcp_server::init_tracing();
//!     Server::builder("echo", "0.1.0").retrieve(Echo).build().serve_stdio().await
//! }
//! ```
//!
//! # Cargo features
//!
//! All of them are on by default (`tuning` through `cli`). Without them the crate serves
//! NDJSON over stdio or any async byte stream (§5.1), with the same dispatcher and rules.
//!
//! - `http`: the HTTP transport of §5.2 on axum, in [`http`]: sessions, SSE streaming, bearer
//!   auth, admission limits, CORS, and the operations endpoints `/healthz` and `/readyz`.
//! - `metrics`: Prometheus metrics (requests, latency, rejections, the engine's gauges) served on
//!   `/metrics` by the HTTP transport.
//! - `cli` (implies `http` and `tuning`): the clap scaffold of an engine binary in [`cli`]
//!   (`ServeArgs` with `--http`, `--stateful`, the limits, `--io-nice` and `--cpu-nice`; the
//!   `EngineCli` trait; the data-directory arguments), and [`init_tracing`] / [`init_logging`]
//!   (tracing-subscriber, text or JSON).
//! - `tuning`: [`exec::Scheduling`]: thread niceness through `thread-priority` and a runtime
//!   that looks at its sockets more often, applied only when a binary asks, per server.

#![forbid(unsafe_code)]

mod handler;
mod operations;
mod retrieval;
mod server;
mod service;
pub mod transport;

#[cfg(feature = "cli")]
pub use crate::operations::cli;
pub use crate::operations::telemetry;
pub use crate::retrieval::{budget, cursor, feedback};
pub use crate::server::exec;
pub use crate::service::access;
#[cfg(feature = "http")]
pub use crate::transport::http;

pub use crate::handler::{
    Catalog, Embed, EmbedRequest, Feedback, Graph, HandlerResult, Honours, Index, Memory, MultiVector, RecencyDecay,
    RequestContext, Rerank, RerankRequest, Retrieve, RetrieveRequest, SessionScope, SparseEmbed, Transform,
};
#[cfg(feature = "cli")]
pub use crate::operations::logging::{LogFormat, init_logging, init_telemetry, init_tracing};
pub use crate::operations::status::{EngineStats, NotReady, ReadyError, Status};
pub use crate::retrieval::budget::TokenCounter;
pub use crate::retrieval::rerank::Funnel;
pub use crate::retrieval::session_dedup::SessionOptions;
pub use crate::server::exec::Lane;
pub use crate::server::options::ServerOptions;
pub use crate::server::{Server, ServerBuilder};
pub use crate::service::profile::{Profile, Revision, Revisions};
pub use rcp_wire as protocol;
