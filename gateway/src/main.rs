//! `rcp-gateway`: serve a federation of RCP engines as one RCP server (`serve`), or bridge it
//! to MCP (`mcp`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use rcp_client::Limits;
use rcp_client::breaker::Backoff;
use rcp_client::registry::{EngineSpec, Transport};
use rcp_gateway::mcp::Bridge;
use rcp_gateway::{Gateway, GatewayOptions, GatewayRegistry};
use rcp_server::cli::ServeArgs;
use rcp_wire::fusion::FusionMethod;

/// An RCP aggregator: one server in front of the engines of an `rcp.json` registry.
///
/// `serve` advertises `catalog` and a federated `retrieve` (fan-out, shard merge, fusion,
/// §16); `mcp` exposes the same federation, or a single engine, as MCP tools over stdio.
#[derive(Debug, Parser)]
#[command(name = "rcp-gateway", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "Examples:
  rcp-gateway serve --registry rcp.json                       # NDJSON on stdin/stdout
  rcp-gateway serve --registry rcp.json --http 127.0.0.1:8090
  rcp-gateway serve --registry rcp.json --http 0.0.0.0:8443 --tls-cert gw.pem --tls-key gw-key.pem --ca-cert engines-ca.pem
  rcp-gateway mcp --registry rcp.json                         # MCP server on stdio
  rcp-gateway mcp --stdio 'rcp-bm25 serve'
  rcp-gateway mcp --http http://127.0.0.1:8080/rcp --token-env RCP_TOKEN";

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the registry's engines as one RCP server (stdio by default).
    Serve(Box<ServeCmd>),
    /// Serve MCP tools (search, list_engines, fetch) over stdio.
    Mcp(Box<McpCmd>),
}

#[derive(Debug, Clone, Args)]
struct FederationArgs {
    /// This gateway's identity: its server name and its entry in `_meta.federation.path`.
    /// Defaults to `gateway-<registry file stem>`; gateways of one deployment must differ.
    #[arg(long, value_name = "NAME")]
    id: Option<String>,

    /// Hop budget given to requests that arrive without `_meta.federation` (§16.2).
    #[arg(long, value_name = "N", default_value_t = 3)]
    depth: u32,

    /// Longest wait for one engine's answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    engine_timeout_ms: u64,

    /// Longest wait for connecting to one engine, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    connect_timeout_ms: u64,

    /// The first back-off of an engine that keeps failing, and the pause after a failed
    /// connection before its circuit breaker opens (milliseconds); it doubles per failure.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    reconnect_after_ms: u64,

    /// The longest back-off of an engine that keeps failing (milliseconds).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    backoff_max_ms: u64,

    /// Consecutive failures (failed connects, connections that closed) that open an
    /// engine's circuit breaker: then no spawn or connect until the back-off ends.
    #[arg(long, value_name = "N", default_value_t = 3)]
    breaker_threshold: u32,

    /// Largest frame accepted from an engine: a stdio line, an HTTP body, an SSE event (bytes).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_frame_bytes)]
    max_frame_bytes: usize,

    /// Longest time one frame from an engine may take once its first byte arrived (milliseconds).
    #[arg(long, value_name = "MS", default_value_t = Limits::default().frame_timeout.as_millis() as u64)]
    frame_timeout_ms: u64,

    /// Bytes queued to a stdio engine that is not reading; over it calls fail at once.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_queued_bytes)]
    max_queued_bytes: usize,

    /// Frames queued to a stdio engine that is not reading; over it calls fail at once.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_queued_frames)]
    max_queued_frames: usize,

    /// Engine stderr lines and log notifications relayed per second per engine (the rest
    /// are counted in a "suppressed N lines" event).
    #[arg(long, value_name = "N", default_value_t = Limits::default().log_lines_per_sec)]
    log_lines_per_sec: u32,

    /// Default fusion of collections: rrf, weighted or convex (§16.3). Convex, the default, is
    /// what §16.3 prefers when every engine advertises scoreFloor; it falls back to rrf, with a
    /// note, when one does not.
    #[arg(long, value_name = "METHOD", default_value = "convex")]
    fusion: String,

    /// How to reach `https://` engines: the CA to trust (an entry's `caCert` wins) and the
    /// client certificate to present to engines that require one.
    #[command(flatten)]
    tls: rcp_client::args::TlsArgs,
}

impl FederationArgs {
    fn options(&self, default_id: String) -> Result<GatewayOptions, String> {
        let fusion = FusionMethod::from_name(&self.fusion)
            .ok_or_else(|| format!("--fusion '{}': expected rrf, weighted or convex", self.fusion))?;
        Ok(GatewayOptions {
            identity: self.id.clone().unwrap_or(default_id),
            depth: self.depth,
            engine_timeout: Duration::from_millis(self.engine_timeout_ms),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            backoff: Backoff {
                threshold: self.breaker_threshold.max(1),
                base: Duration::from_millis(self.reconnect_after_ms),
                max: Duration::from_millis(self.backoff_max_ms.max(self.reconnect_after_ms)),
                ..Backoff::default()
            },
            limits: Limits::default()
                .with_max_frame_bytes(self.max_frame_bytes)
                .with_frame_timeout(Duration::from_millis(self.frame_timeout_ms))
                .with_queue(self.max_queued_frames, self.max_queued_bytes)
                .with_logs(self.log_lines_per_sec, Limits::default().max_log_line_bytes),
            fusion,
            ..GatewayOptions::default()
        })
    }
}

#[derive(Debug, Args)]
struct ServeCmd {
    /// The registry (`rcp.json`, §16.1).
    #[arg(long, value_name = "FILE")]
    registry: PathBuf,

    #[command(flatten)]
    federation: FederationArgs,

    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Args)]
#[group(id = "source", required = true, multiple = false, args = ["registry", "stdio", "http"])]
struct McpCmd {
    /// Bridge the engines of this registry.
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,

    /// Bridge one engine spawned with this command line (split on whitespace).
    #[arg(long, value_name = "CMD")]
    stdio: Option<String>,

    /// Bridge one engine served over HTTP at this base URL.
    #[arg(long, value_name = "URL")]
    http: Option<String>,

    /// With --http: an HTTP header sent on every request, 'Name: value' (repeatable). A
    /// registry's engines take `headers` in rcp.json instead.
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    headers: Vec<String>,

    /// With --http: send the bearer token held in this environment variable
    /// (`Authorization: Bearer ...`); a registry's engines take `tokenEnv` in rcp.json.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,

    #[command(flatten)]
    federation: FederationArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Held until `main` returns: dropping it sends the spans not yet exported.
    let _telemetry = match &cli.command {
        Command::Serve(args) => args.serve.init_telemetry("rcp-gateway"),
        Command::Mcp(_) => rcp_server::init_telemetry(rcp_server::LogFormat::Text, None, "rcp-gateway"),
    };
    let runtime = match &cli.command {
        Command::Serve(args) => args.serve.runtime(),
        Command::Mcp(_) => rcp_server::exec::Scheduling { io_nice: 0, event_interval: Some(8) }.runtime(false),
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rcp-gateway: {e}");
            return ExitCode::from(rcp_wire::exit::FAILURE);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => run_serve(*args).await,
            Command::Mcp(args) => run_mcp(*args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rcp-gateway: {e}");
            ExitCode::from(rcp_wire::exit::FAILURE)
        }
    }
}

fn default_id(registry: &std::path::Path) -> String {
    let stem = registry.file_stem().map_or_else(|| "registry".into(), |s| s.to_string_lossy().into_owned());
    format!("gateway-{stem}")
}

/// A start-up failure, with its cause chain.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn run_serve(args: ServeCmd) -> Result<(), BoxError> {
    let registry = GatewayRegistry::load(&args.registry)?.with_tls(&args.federation.tls.options());
    let options = args.federation.options(default_id(&args.registry))?;
    let gateway = Arc::new(Gateway::start(registry, options).await);
    let server = args.serve.configure(gateway.builder()).build();
    Ok(args.serve.serve(server).await?)
}

async fn run_mcp(args: McpCmd) -> Result<(), BoxError> {
    if args.http.is_none() && (!args.headers.is_empty() || args.token_env.is_some()) {
        return Err("--header and --token-env apply to --http; a registry's engines take `headers` and \
                    `tokenEnv` in rcp.json, and a stdio engine needs neither"
            .into());
    }
    let (registry, default) = match (&args.registry, &args.stdio, &args.http) {
        (Some(path), _, _) => (GatewayRegistry::load(path)?, default_id(path)),
        (None, Some(cmd), _) => {
            let command: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
            if command.is_empty() {
                return Err("--stdio: empty command".into());
            }
            let id = std::path::Path::new(&command[0])
                .file_name()
                .map_or_else(|| "engine".into(), |n| n.to_string_lossy().into_owned());
            (GatewayRegistry::single(spec(id, Transport::Stdio { command })), "gateway-mcp".into())
        }
        (None, None, Some(url)) => {
            let mut engine = spec("engine".into(), Transport::Http { url: url.clone() });
            engine.headers =
                args.headers.iter().map(|h| rcp_client::registry::parse_header(h)).collect::<Result<_, _>>()?;
            engine.token_env = args.token_env.clone();
            // An unset or empty token variable is named now, not met as 401s later.
            engine.http_headers().map_err(|e| format!("--token-env: {e}"))?;
            (GatewayRegistry::single(engine), "gateway-mcp".into())
        }
        (None, None, None) => return Err("one of --registry, --stdio, --http is required".into()),
    };
    let registry = registry.with_tls(&args.federation.tls.options());
    let options = args.federation.options(default)?;
    let gateway = Arc::new(Gateway::start(registry, options).await);
    let limits = rcp_gateway::mcp::frames::FrameLimits::default();
    Ok(Bridge::new(gateway).serve_ndjson(tokio::io::stdin(), tokio::io::stdout(), limits).await?)
}

fn spec(id: String, transport: Transport) -> EngineSpec {
    EngineSpec::new(id, transport)
}
