//! Command-line arguments every engine binary shares for serving, so transports and their
//! options are configured the same way everywhere (`--stdio`, `--http ADDR`, auth, limits).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::transport::http::{HttpOptions, RateLimit, SessionMode};
use crate::{Server, ServerBuilder};

/// How to serve: flatten this into an engine's `serve` subcommand with `#[command(flatten)]`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Serve NDJSON over stdin/stdout (the default).
    #[arg(long, default_value_t = true, conflicts_with = "http")]
    pub stdio: bool,

    /// Serve HTTP on this address instead, e.g. 127.0.0.1:8080 (bind loopback unless you mean
    /// to expose the engine). Requests are `POST /rcp/<method>`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,

    /// HTTP: keep sessions (`initialize` returns `_meta.session`, sent back in `RCP-Session`)
    /// instead of serving every request statelessly.
    #[arg(long, requires = "http")]
    pub stateful: bool,

    /// HTTP: idle seconds after which a stateful session expires.
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub session_ttl: u64,

    /// HTTP: require `Authorization: Bearer <token>`; comma-separated tokens are read from this
    /// environment variable (never from the command line, where `ps` would show them).
    #[arg(long, value_name = "ENV_VAR")]
    pub tokens_env: Option<String>,

    /// HTTP: largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub body_limit: usize,

    /// HTTP: per-client request rate (requests/second; bursts up to twice that). Off by default.
    #[arg(long, value_name = "RPS")]
    pub rate_limit: Option<f64>,

    /// HTTP: allowed CORS origin (repeatable; `*` for any).
    #[arg(long = "cors", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,

    /// Per-request deadline in milliseconds (`_meta.deadlineMs` may only shorten it).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub deadline_ms: u64,

    /// Deadline of writes (`index/add`, `index/delete`) in milliseconds: large batches embed or
    /// index for a long time.
    #[arg(long, value_name = "MS", default_value_t = 3_600_000)]
    pub write_deadline_ms: u64,
}

impl ServeArgs {
    /// Applies the server-side options (deadline) to a builder.
    pub fn configure(&self, builder: ServerBuilder) -> ServerBuilder {
        builder
            .request_deadline(Duration::from_millis(self.deadline_ms))
            .write_deadline(Duration::from_millis(self.write_deadline_ms))
    }

    /// The HTTP options these arguments describe.
    pub fn http_options(&self) -> std::io::Result<HttpOptions> {
        let bearer_tokens = match &self.tokens_env {
            Some(var) => {
                let raw = std::env::var(var).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--tokens-env: ${var} is not set"))
                })?;
                raw.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
            }
            None => Vec::new(),
        };
        Ok(HttpOptions {
            sessions: if self.stateful {
                SessionMode::Stateful { ttl: Duration::from_secs(self.session_ttl) }
            } else {
                SessionMode::Stateless
            },
            bearer_tokens,
            body_limit: self.body_limit,
            rate_limit: self.rate_limit.map(|r| RateLimit { per_second: r, burst: (2.0 * r).max(1.0) }),
            cors_origins: (!self.cors_origins.is_empty()).then(|| self.cors_origins.clone()),
            ..HttpOptions::default()
        })
    }

    /// Serves `server` as the arguments say, until EOF/`shutdown` (stdio) or SIGINT/SIGTERM
    /// (HTTP, after draining in-flight requests).
    pub async fn serve(&self, server: Server) -> std::io::Result<()> {
        match self.http {
            Some(addr) => server.serve_http(addr, self.http_options()?).await,
            None => server.serve_stdio().await,
        }
    }
}
