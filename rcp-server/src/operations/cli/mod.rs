//! The engine-binary scaffold: what `rcp-bm25`, `rcp-dense`, `rcp-pg` and your own engine's
//! binary share, so that each `main.rs` holds only what is particular to its engine.
//!
//! - [`ServeArgs`]: the `serve` flags (transports, HTTP limits and auth, deadlines, the CPU
//!   executor, logging, scheduling), flattened into an engine's `serve` subcommand, and how
//!   to run a server with them ([`ServeArgs::run`]).
//! - [`DataDirArgs`]: `--data-dir` and `--create`, for engines that persist a store.
//! - [`QuarantineCmd`]: `quarantine list|release`, for engines that switch on durable
//!   feedback ([`ServeArgs::durable_feedback`]).
//! - [`EngineCli`] and [`main`]: the start-up, error line and exit code of a binary whose
//!   command line is a clap parser.
//!
//! A binary's allocator is its own choice (a `#[global_allocator]` belongs in the binary
//! crate); the bundled engines use jemalloc behind their `jemalloc` feature.
//!
//! ```no_run
//! use clap::{Parser, Subcommand};
//! use rcp_server::cli::{EngineCli, ServeArgs};
//! use rcp_server::Server;
//!
//! /// my-engine: an RCP engine.
//! #[derive(Parser)]
//! #[command(name = "my-engine")]
//! struct Cli {
//!     #[command(subcommand)]
//!     command: Command,
//! }
//!
//! #[derive(Subcommand)]
//! enum Command {
//!     /// Serve over RCP (stdio by default).
//!     Serve(ServeArgs),
//! }
//!
//! impl EngineCli for Cli {
//!     type Error = std::io::Error;
//!
//!     fn serve_args(&self) -> Option<&ServeArgs> {
//!         let Command::Serve(serve) = &self.command;
//!         Some(serve)
//!     }
//!
//!     fn run(self) -> std::io::Result<()> {
//!         let Command::Serve(serve) = self.command;
//!         serve.run(Server::builder("my-engine", "0.1.0")) // register handlers here
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     rcp_server::cli::main::<Cli>()
//! }
//! ```

mod data_dir;
mod engine;
mod quarantine;
mod serve;

pub use data_dir::{DataDir, DataDirArgs, DataDirError};
pub use engine::{EngineCli, main, run};
pub use quarantine::QuarantineCmd;
pub use serve::ServeArgs;
