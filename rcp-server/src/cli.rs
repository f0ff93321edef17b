//! Command-line arguments every engine binary shares for serving, so transports and their
//! options are configured the same way everywhere (`--stdio`, `--http ADDR`, ...).

use clap::Args;

use std::time::Duration;

use crate::{Server, ServerBuilder};

/// How to serve: flatten this into an engine's `serve` subcommand with `#[command(flatten)]`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Serve NDJSON over stdin/stdout (the default).
    #[arg(long, default_value_t = true, conflicts_with = "http")]
    pub stdio: bool,

    /// Serve HTTP on this address instead (e.g. 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,

    /// Per-request deadline in milliseconds (`_meta.deadlineMs` may only shorten it).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub deadline_ms: u64,
}

impl ServeArgs {
    /// Applies the server-side options (deadline) to a builder.
    pub fn configure(&self, builder: ServerBuilder) -> ServerBuilder {
        builder.request_deadline(Duration::from_millis(self.deadline_ms))
    }

    /// Serves `server` as the arguments say, until EOF/`shutdown` (stdio) or a signal (HTTP).
    pub async fn serve(&self, server: Server) -> std::io::Result<()> {
        match self.http {
            Some(addr) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("HTTP transport requested on {addr}, but this build serves stdio only"),
            )),
            None => server.serve_stdio().await,
        }
    }
}
