//! Command-line arguments every engine binary shares for serving, so transports and their
//! options are configured the same way everywhere (`--stdio`, `--http ADDR`, auth, limits,
//! the scheduling a binary may ask for).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::operations::logging::LogFormat;
use crate::retrieval::feedback::{FeedbackOptions, FeedbackStore};
use crate::server::exec::Scheduling;
use crate::transport::http::{AccessTokens, HttpOptions, OpsPaths, RateLimit, SessionMode};
use crate::{Server, ServerBuilder};

/// The tokens `--tokens-env VAR` names, split on commas and trimmed (§15.6).
///
/// Authentication must never fail open: an unset variable, or one holding no usable token
/// (`""`, `","`, `" , "`), is a start-up error naming the variable, not a server without auth.
fn bearer_tokens(var: &str, raw: Option<String>) -> std::io::Result<Vec<String>> {
    let invalid =
        |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--tokens-env: ${var} {why}"));
    let raw = raw.ok_or_else(|| invalid("is not set"))?;
    let tokens: Vec<String> = raw.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
    if tokens.is_empty() {
        return Err(invalid(
            "holds no token (expected comma-separated bearer tokens); refusing to serve without authentication",
        ));
    }
    Ok(tokens)
}

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

    /// HTTP with --stateful: refuse requests without an `RCP-Session` token (-32001) instead
    /// of serving them statelessly. Public SDK clients never send the header: leave this off
    /// to serve them.
    #[arg(long, requires = "stateful")]
    pub require_session: bool,

    /// HTTP: idle seconds after which a stateful session expires.
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub session_ttl: u64,

    /// HTTP: require `Authorization: Bearer <token>`; comma-separated tokens are read from this
    /// environment variable (never from the command line, where `ps` would show them).
    // `--tokens-env`, the old name, stays accepted as a hidden alias.
    #[arg(long = "token-env", alias = "tokens-env", value_name = "ENV_VAR")]
    pub tokens_env: Option<String>,

    /// HTTP: require `Authorization: Bearer <token>` with the tokens of this file, each limited
    /// to what its line allows: one `SCOPES TOKEN` a line, SCOPES a comma-separated subset of
    /// read,write,admin, TOKEN the secret or `sha256:<hex>` of it; `#` starts a comment. A bad
    /// line stops the start-up. Re-read on SIGHUP without dropping connections (see
    /// docs/access.md). Combines with --token-env, whose tokens keep full access.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub tokens_file: Option<PathBuf>,

    /// HTTP: serve HTTPS only, with this certificate (PEM; a chain, leaf first). Needs
    /// --tls-key. A plaintext request to the port fails the TLS handshake. Re-read with the key
    /// on SIGHUP; a reload that fails keeps the certificate in force (see docs/operations.md).
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<PathBuf>,

    /// HTTP: the private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// HTTPS: require a client certificate signed by a CA of this PEM file (mutual TLS); a
    /// client without one fails the handshake. Re-read on SIGHUP with the certificate.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// HTTP: largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub body_limit: usize,

    /// HTTP: most connections open at once; more are answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,

    /// HTTP: most connections one client (IP address; an IPv6 /64) may hold open at once, so
    /// one client cannot take every connection; more are answered 503 at once. Default: half
    /// of --max-connections. Behind a reverse proxy, set it to --max-connections.
    #[arg(long, value_name = "N")]
    pub max_connections_per_client: Option<usize>,

    /// HTTP: milliseconds a connection has to send a request's headers, counted from when it
    /// opens or its previous response is sent (so also the idle keep-alive timeout); then it is
    /// closed.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,

    /// The former spelling of `--header-timeout-ms`, in seconds (hidden; still accepted).
    #[arg(long, value_name = "SECS", hide = true, conflicts_with = "header_timeout_ms")]
    pub header_timeout: Option<u64>,

    /// HTTP: milliseconds a request has to send its body once the headers are in (then 408).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,

    /// The former spelling of `--body-timeout-ms`, in seconds (hidden; still accepted).
    #[arg(long, value_name = "SECS", hide = true, conflicts_with = "body_timeout_ms")]
    pub body_timeout: Option<u64>,

    /// HTTP: per-client request rate (requests/second; bursts up to twice that). Off by default.
    #[arg(long, value_name = "RPS")]
    pub rate_limit: Option<f64>,

    /// HTTP: allowed CORS origin (repeatable; `*` for any).
    #[arg(long = "cors", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,

    /// HTTP: liveness probe path (200 while the process runs; no authentication).
    #[arg(long, value_name = "PATH", default_value = "/healthz")]
    pub healthz_path: String,

    /// HTTP: readiness probe path (200 when the engine can serve, 503 while draining).
    #[arg(long, value_name = "PATH", default_value = "/readyz")]
    pub readyz_path: String,

    /// HTTP: Prometheus metrics path (guarded by the bearer tokens unless --metrics-public).
    #[arg(long, value_name = "PATH", default_value = "/metrics")]
    pub metrics_path: String,

    /// HTTP: serve the metrics path without the bearer tokens (a scraper on a private network).
    #[arg(long)]
    pub metrics_public: bool,

    /// HTTP: serve none of the operations endpoints (healthz, readyz, metrics).
    #[arg(long)]
    pub no_ops: bool,

    /// HTTP: seconds to keep serving after SIGTERM with readiness already failing, so load
    /// balancers stop routing here before the listener closes; then in-flight requests drain.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub drain_grace: u64,

    /// Log line format on stderr (filter with RCP_LOG or RUST_LOG; default info).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Export OpenTelemetry spans over OTLP/HTTP (JSON) to the collector at this base URL
    /// (`<URL>/v1/traces`); `OTEL_EXPORTER_OTLP_ENDPOINT` does the same without the flag.
    #[cfg(feature = "otlp")]
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,

    /// Per-request deadline in milliseconds (`_meta.deadlineMs` may only shorten it).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub deadline_ms: u64,

    /// Deadline of writes (`index/add`, `index/delete`) in milliseconds: large batches embed or
    /// index for a long time.
    #[arg(long, value_name = "MS", default_value_t = 3_600_000)]
    pub write_deadline_ms: u64,

    /// Threads of the CPU executor that runs searches, embeddings and index writes (0: one per
    /// core). Writes use at most half of them, so reads always have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub cpu_threads: usize,

    /// CPU jobs that may wait in each lane (reads, writes) when every CPU thread is busy. Over
    /// HTTP more are refused with -32011 and `retryAfterMs` instead of queueing without bound;
    /// over stdio the server stops reading stdin until the lanes drain.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub cpu_queue: usize,

    /// Niceness of the CPU threads (0-19; 0: the server's own). Higher keeps pings, cancels
    /// and response writing prompt while searches saturate the cores, but also yields to every
    /// other busy process on the machine.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub cpu_nice: u8,

    /// Niceness of the threads that read requests and write answers (-20 to 0; 0, the
    /// default: the server's own): the stdio reader and writer, over HTTP the runtime's
    /// workers. Below 0 they take the CPU ahead of searches whenever they have work, like
    /// nginx's `worker_priority`, without a larger share over time (they use little); -5 is
    /// what docs/scheduling.md measured. Needs CAP_SYS_NICE or an RLIMIT_NICE that allows it
    /// (systemd: LimitNICE=); without either the threads stay at the server's niceness and the
    /// log says so once.
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-20..=0))]
    pub io_nice: i32,

    /// HTTP: tasks a runtime worker runs between two looks at its sockets (0: tokio's default,
    /// 61). Fewer lets a newly arrived request in sooner under load, at the same throughput.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub event_interval: u32,

    /// With a data directory: `poisonSuspected`/`injectionSuspected` feedback signals that
    /// quarantine a hit from later results (list and release with the `quarantine` command).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub quarantine_threshold: u32,
}

impl ServeArgs {
    /// Applies the server-side options (deadlines, CPU executor, the I/O threads' niceness)
    /// to a builder.
    pub fn configure(&self, builder: ServerBuilder) -> ServerBuilder {
        let builder = builder
            .request_deadline(Duration::from_millis(self.deadline_ms))
            .write_deadline(Duration::from_millis(self.write_deadline_ms))
            .cpu_threads(self.cpu_threads)
            .cpu_queue(self.cpu_queue)
            .cpu_nice(self.cpu_nice)
            .cpu_process_niceness(self.io_nice != 0);
        match self.scheduling().io_thread_start() {
            Some(start) => builder.on_io_thread_start(start),
            None => builder,
        }
    }

    /// Switches on `feedback` with quarantine ([`crate::feedback`]): durable in the engine's
    /// data directory, or kept in memory when it serves none (a built-in corpus).
    pub fn durable_feedback(&self, builder: ServerBuilder, data_dir: Option<&Path>) -> std::io::Result<ServerBuilder> {
        let options = FeedbackOptions { threshold: self.quarantine_threshold, ..FeedbackOptions::default() };
        let store = FeedbackStore::open_or_in_memory(data_dir, options)?;
        Ok(builder.durable_feedback(Arc::new(store)))
    }

    /// The scheduling these arguments ask for: `--io-nice`, and over HTTP `--event-interval`.
    pub fn scheduling(&self) -> Scheduling {
        let event_interval = (self.http.is_some() && self.event_interval > 0).then_some(self.event_interval);
        Scheduling { io_nice: self.io_nice, event_interval }
    }

    /// The async runtime to serve on ([`Scheduling::runtime`]): over HTTP its workers read and
    /// write, and take `--io-nice`; over stdio the transport's own threads do
    /// ([`ServeArgs::configure`]).
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        self.scheduling().runtime(self.http.is_some())
    }

    /// Builds the server from `builder` with these options ([`ServeArgs::configure`]) and
    /// serves it on a runtime of its own ([`ServeArgs::runtime`]) until it ends.
    pub fn run(&self, builder: ServerBuilder) -> std::io::Result<()> {
        self.run_on(&self.runtime()?, builder)
    }

    /// [`ServeArgs::run`] on a runtime the engine already started (from [`ServeArgs::runtime`]),
    /// for engines that need one before the server exists (to connect to a database).
    pub fn run_on(&self, runtime: &tokio::runtime::Runtime, builder: ServerBuilder) -> std::io::Result<()> {
        let server = self.configure(builder).build();
        runtime.block_on(self.serve(server))
    }

    /// Installs the stderr log subscriber in the format `--log-format` names.
    pub fn init_logging(&self) {
        crate::init_logging(self.log_format);
    }

    /// [`Self::init_logging`], and (with the `otlp` feature) the span export to the collector
    /// `--otlp-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` names, as `service`
    /// ([`crate::init_telemetry`]). Hold the guard until the process ends.
    pub fn init_telemetry(&self, service: &str) -> crate::telemetry::Telemetry {
        #[cfg(feature = "otlp")]
        let endpoint = self.otlp_endpoint.as_deref();
        #[cfg(not(feature = "otlp"))]
        let endpoint = None;
        crate::init_telemetry(self.log_format, endpoint, service)
    }

    /// The operations endpoints these arguments describe.
    fn ops_paths(&self) -> OpsPaths {
        if self.no_ops {
            return OpsPaths::none();
        }
        OpsPaths {
            healthz: Some(self.healthz_path.clone()),
            readyz: Some(self.readyz_path.clone()),
            metrics: Some(self.metrics_path.clone()),
        }
    }

    /// The HTTP options these arguments describe.
    pub fn http_options(&self) -> std::io::Result<HttpOptions> {
        let ops = self.ops_paths();
        let defaults = HttpOptions::default();
        ops.check(&defaults.base).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let bearer_tokens = match &self.tokens_env {
            Some(var) => bearer_tokens(var, std::env::var(var).ok())?,
            None => Vec::new(),
        };
        let tokens =
            match &self.tokens_file {
                Some(path) => Some(AccessTokens::load(path).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--tokens-file: {e}"))
                })?),
                None => None,
            };
        Ok(HttpOptions {
            sessions: if self.stateful {
                SessionMode::Stateful { ttl: Duration::from_secs(self.session_ttl) }
            } else {
                SessionMode::Stateless
            },
            bearer_tokens,
            tokens,
            body_limit: self.body_limit,
            rate_limit: self.rate_limit.map(|r| RateLimit { per_second: r, burst: (2.0 * r).max(1.0) }),
            cors_origins: (!self.cors_origins.is_empty()).then(|| self.cors_origins.clone()),
            require_session: self.require_session,
            max_connections: self.max_connections.max(1),
            max_connections_per_client: self.max_connections_per_client,
            header_read_timeout: millis_or_secs(self.header_timeout_ms, self.header_timeout),
            body_read_timeout: millis_or_secs(self.body_timeout_ms, self.body_timeout),
            ops,
            metrics_public: self.metrics_public,
            drain_grace: Duration::from_secs(self.drain_grace),
            #[cfg(feature = "tls")]
            tls: self.server_tls()?,
            ..defaults
        })
    }

    /// The TLS configuration of `--tls-cert`/`--tls-key`/`--tls-client-ca`, read now; `None`
    /// without `--tls-cert`.
    #[cfg(feature = "tls")]
    fn server_tls(&self) -> std::io::Result<Option<crate::transport::http::ServerTls>> {
        use crate::transport::http::{ServerTls, TlsFiles};
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let files = TlsFiles { cert: cert.clone(), key: key.clone(), client_ca: self.tls_client_ca.clone() };
        ServerTls::load(files)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--tls-cert: {e}")))
    }

    /// Serves `server` as the arguments say, until EOF/`shutdown` (stdio) or SIGINT/SIGTERM
    /// (HTTP, after draining in-flight requests). SIGHUP re-reads the files the server was
    /// started with: `--tokens-file` ([`AccessTokens::reload`]) and, with TLS, the certificate
    /// and key (`ServerTls::reload`); this is the only place the framework listens for it.
    pub async fn serve(&self, server: Server) -> std::io::Result<()> {
        match self.http {
            Some(addr) => {
                let opts = self.http_options()?;
                let reloads = Reloads {
                    tokens: opts.tokens.clone(),
                    #[cfg(feature = "tls")]
                    tls: opts.tls.clone(),
                };
                if !reloads.is_empty() {
                    reload_on_sighup(reloads)?;
                }
                crate::transport::http::serve(&server, addr, opts).await
            }
            None => server.serve_stdio().await,
        }
    }
}

/// The files a running HTTP server re-reads on SIGHUP.
struct Reloads {
    /// `--tokens-file`.
    tokens: Option<AccessTokens>,
    /// `--tls-cert`, `--tls-key` and `--tls-client-ca`.
    #[cfg(feature = "tls")]
    tls: Option<crate::transport::http::ServerTls>,
}

impl Reloads {
    /// Whether there is nothing to re-read.
    fn is_empty(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            return false;
        }
        self.tokens.is_none()
    }

    /// Re-reads every file. One that cannot be read or is invalid leaves what it configures
    /// in force as it was; the log says why, naming a tokens file's line, never a token.
    fn reload(&self) {
        if let Some(tokens) = &self.tokens {
            match tokens.reload() {
                Ok(0) => {
                    tracing::warn!(path = ?tokens.path(), "tokens file re-read on SIGHUP: it holds no token; every request is refused")
                }
                Ok(n) => tracing::info!(path = ?tokens.path(), tokens = n, "tokens file re-read on SIGHUP"),
                Err(e) => {
                    tracing::error!(error = %e, "tokens file not re-read on SIGHUP; the previous tokens stay in force")
                }
            }
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            match tls.reload() {
                Ok(()) => tracing::info!(cert = ?tls.files().cert, "TLS certificate and key re-read on SIGHUP"),
                Err(e) => tracing::error!(
                    error = %e,
                    "TLS certificate not re-read on SIGHUP; the previous certificate stays in force"
                ),
            }
        }
    }
}

/// Re-reads the files of `reloads` on every SIGHUP for as long as the runtime runs.
#[cfg(unix)]
fn reload_on_sighup(reloads: Reloads) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            reloads.reload();
        }
    });
    Ok(())
}

/// Without Unix signals the files are read once, at start-up.
#[cfg(not(unix))]
fn reload_on_sighup(_reloads: Reloads) -> std::io::Result<()> {
    Ok(())
}

/// A duration given in milliseconds (`--X-timeout-ms`), or in seconds by a former spelling
/// (`--X-timeout`), which wins when given; at least 1 ms.
fn millis_or_secs(ms: u64, secs: Option<u64>) -> Duration {
    secs.map_or(Duration::from_millis(ms), Duration::from_secs).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied())).expect("arguments").serve
    }

    #[test]
    fn stateful_serves_sessionless_requests_unless_sessions_are_required() {
        let opts = parse(&["--http", "127.0.0.1:0", "--stateful"]).http_options().expect("options");
        assert!(!opts.require_session);
        let opts =
            parse(&["--http", "127.0.0.1:0", "--stateful", "--require-session"]).http_options().expect("options");
        assert!(opts.require_session);
    }

    #[test]
    fn connection_limits_have_safe_defaults_and_are_configurable() {
        let opts = parse(&["--http", "127.0.0.1:0"]).http_options().expect("options");
        assert_eq!(
            (opts.max_connections, opts.header_read_timeout, opts.body_read_timeout),
            (1024, Duration::from_secs(10), Duration::from_secs(30))
        );
        let opts =
            parse(&["--http", "127.0.0.1:0", "--max-connections", "8", "--header-timeout", "2", "--body-timeout", "3"])
                .http_options()
                .expect("options");
        assert_eq!(
            (opts.max_connections, opts.header_read_timeout, opts.body_read_timeout),
            (8, Duration::from_secs(2), Duration::from_secs(3)),
            "the former spellings, in seconds"
        );
        assert_eq!(opts.connections_per_client(), 4, "half the cap by default");
        let opts = parse(&["--http", "127.0.0.1:0", "--header-timeout-ms", "2500", "--body-timeout-ms", "750"])
            .http_options()
            .expect("options");
        assert_eq!(
            (opts.header_read_timeout, opts.body_read_timeout),
            (Duration::from_millis(2500), Duration::from_millis(750))
        );
        let opts =
            parse(&["--http", "127.0.0.1:0", "--max-connections-per-client", "3"]).http_options().expect("options");
        assert_eq!((opts.max_connections_per_client, opts.connections_per_client()), (Some(3), 3));
    }

    #[test]
    fn operations_endpoints_are_on_by_default_configurable_and_checked() {
        let opts = parse(&["--http", "127.0.0.1:0"]).http_options().expect("options");
        assert_eq!(opts.ops, OpsPaths::default());
        assert!(!opts.metrics_public);
        let opts = parse(&["--http", "127.0.0.1:0", "--metrics-path", "/ops/metrics", "--metrics-public"])
            .http_options()
            .expect("options");
        assert_eq!(opts.ops.metrics.as_deref(), Some("/ops/metrics"));
        assert!(opts.metrics_public);
        assert_eq!(parse(&["--no-ops"]).http_options().expect("options").ops, OpsPaths::none());
        let err = parse(&["--metrics-path", "/rcp/metrics"]).http_options().expect_err("inside the base path");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(parse(&["--log-format", "json"]).log_format, LogFormat::Json);
    }

    #[test]
    fn cpu_executor_flags_reach_the_server() {
        let server = parse(&[]).configure(Server::builder("t", "0")).build();
        assert_eq!(server.options().cpu, crate::server::exec::ExecOptions::default());
        let server = parse(&["--cpu-threads", "3", "--cpu-queue", "7"]).configure(Server::builder("t", "0")).build();
        assert_eq!(
            server.options().cpu,
            crate::server::exec::ExecOptions { threads: 3, queue: 7, ..Default::default() }
        );
        assert_eq!(server.executor().threads(), 3);
    }

    #[test]
    fn scheduling_is_asked_for_only_by_flags() {
        let args = parse(&[]);
        assert_eq!(args.scheduling(), Scheduling::default(), "stdio: nothing by default");
        let server = args.configure(Server::builder("t", "0")).build();
        assert!(server.options().io_thread_start.is_none() && !server.options().cpu.process_niceness);
        let args = parse(&["--http", "127.0.0.1:0"]);
        assert_eq!(args.scheduling(), Scheduling { io_nice: 0, event_interval: Some(8) });
        let args = parse(&["--http", "127.0.0.1:0", "--io-nice", "-5", "--event-interval", "0"]);
        assert_eq!(args.scheduling(), Scheduling { io_nice: -5, event_interval: None });
        let server = args.configure(Server::builder("t", "0")).build();
        assert!(server.options().io_thread_start.is_some() && server.options().cpu.process_niceness);
    }

    #[test]
    fn a_tokens_file_is_read_at_start_up_and_a_bad_line_refused_without_echo() {
        let dir = std::env::temp_dir().join(format!("rcp-serve-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let good = dir.join("good");
        std::fs::write(&good, "# readers\nread r-token\nread,write w-token\n").expect("write");
        let path = good.to_str().expect("utf-8");
        let opts = parse(&["--http", "127.0.0.1:0", "--tokens-file", path]).http_options().expect("options");
        assert_eq!(opts.tokens.as_ref().map(AccessTokens::len), Some(2));
        let bad = dir.join("bad");
        std::fs::write(&bad, "read r-token\nTOPSECRET\n").expect("write");
        let path = bad.to_str().expect("utf-8");
        let err = parse(&["--http", "127.0.0.1:0", "--tokens-file", path]).http_options().expect_err("a bad line");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let message = err.to_string();
        assert!(message.contains("bad:2:") && !message.contains("TOPSECRET"), "{message}");
        use clap::Parser;
        assert!(Cli::try_parse_from(["serve", "--tokens-file", path]).is_err(), "--tokens-file needs --http");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_takes_a_certificate_and_its_key_together_and_names_a_bad_file() {
        use clap::Parser;
        let refused =
            |args: &[&str]| Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied())).is_err();
        assert!(refused(&["--http", "127.0.0.1:0", "--tls-cert", "c.pem"]), "--tls-cert needs --tls-key");
        assert!(refused(&["--http", "127.0.0.1:0", "--tls-key", "k.pem"]), "--tls-key needs --tls-cert");
        assert!(refused(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]), "TLS needs --http");
        assert!(refused(&["--http", "127.0.0.1:0", "--tls-client-ca", "ca.pem"]), "--tls-client-ca needs --tls-cert");
        assert!(parse(&["--http", "127.0.0.1:0"]).http_options().expect("options").tls.is_none());
        let err =
            parse(&["--http", "127.0.0.1:0", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"])
                .http_options()
                .expect_err("no such file");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("--tls-cert") && err.to_string().contains("/nonexistent/c.pem"), "{err}");
    }

    #[test]
    fn tokens_are_split_and_trimmed() {
        let tokens = bearer_tokens("T", Some(" a, b ,,c".into())).expect("tokens");
        assert_eq!(tokens, ["a", "b", "c"]);
    }

    #[test]
    fn a_source_without_a_usable_token_is_an_error_naming_the_variable() {
        for raw in [None, Some(""), Some(","), Some(" , "), Some("  ")] {
            let err = bearer_tokens("RCP_TOKENS", raw.map(str::to_owned)).expect_err("must not fail open");
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("$RCP_TOKENS"), "{err}");
        }
    }
}
