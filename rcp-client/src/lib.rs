//! The async client for RCP, the Retrieval Context Protocol: one [`Client`] per engine,
//! a [`Selector`] that picks the best live engine for a job, and a [`Federation`] that fans a
//! query out to every engine in an `rcp.json` [`Registry`] and fuses the ranked lists (§16).
//!
//! # Cargo features
//!
//! - `cli` (default): the `rcpctl` command-line binary and what only it uses (clap and its
//!   shell completions, the progress bar and the corpus reader of `rcpctl index`,
//!   tracing-subscriber). The library is the same with or without it: a program that only links
//!   the client can depend on `rcp-client` with `default-features = false`.

#![forbid(unsafe_code)]

#[cfg(feature = "args")]
pub mod args;
pub mod breaker;
mod client;
mod error;
pub mod eval;
pub mod federation;
mod gate;
mod limits;
pub mod ndjson;
pub mod registry;
pub mod retry;
pub mod selector;
mod transport;

pub use client::{Client, ClientOptions, PROGRESS_QUEUE, Streaming};
pub use error::{ClientError, ConnectError, Disconnect, LimitExceeded, causes};
pub use federation::{Federation, FederationOptions};
pub use limits::Limits;
pub use registry::{EngineSpec, Registry, Transport};
pub use selector::Selector;
pub use transport::tls::{ClientCert, TlsError, TlsOptions};
pub use transport::{LogSink, read_body};
