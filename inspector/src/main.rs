//! `rcp-inspect`: serves the RCP Inspector page for one engine or a registry of engines.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Parser};
use rcp_inspector::wire::WireLimits;
use rcp_inspector::{Inspector, Target};

/// Explore an RCP server in the browser: capabilities, queries, streaming, fusion, wire frames
/// and conformance. Listens on 127.0.0.1 only.
#[derive(Parser)]
#[command(name = "rcp-inspect", version, group(ArgGroup::new("target").required(true).args(["stdio", "http", "registry"])))]
struct Args {
    /// Spawn this engine command (split on whitespace), e.g. "rcp-bm25 serve".
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// An engine served over HTTP, e.g. http://127.0.0.1:8080/rcp.
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// Every engine of an rcp.json registry (enables the Compare panel).
    #[arg(long, value_name = "RCP_JSON")]
    registry: Option<PathBuf>,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// An HTTP header for --http ('Name: value', repeatable).
    #[arg(long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Send `Authorization: Bearer` with the token read from this variable (--http).
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// The RCP JSON Schema for the Conformance panel (default: $RCP_SCHEMA when set).
    #[arg(long, value_name = "PATH")]
    schema: Option<PathBuf>,
    /// Bytes of one frame the Wire panel keeps; a longer frame is cut, with a marker.
    #[arg(long, value_name = "BYTES", default_value_t = WireLimits::default().entry_bytes)]
    wire_frame_bytes: usize,
    /// How to reach `https://` engines.
    #[command(flatten)]
    tls: rcp_client::args::TlsArgs,
    /// Bytes the Wire panel's log holds in all; the oldest frames are dropped beyond it.
    #[arg(long, value_name = "BYTES", default_value_t = WireLimits::default().total_bytes)]
    wire_bytes: usize,
}

fn target(args: &Args) -> Result<Target, Box<dyn std::error::Error>> {
    if let Some(cmd) = &args.stdio {
        return Ok(Target::Stdio(cmd.split_whitespace().map(str::to_owned).collect()));
    }
    if let Some(url) = &args.http {
        let mut headers = Vec::new();
        for h in &args.headers {
            let (name, value) = h.split_once(':').ok_or_else(|| format!("--header '{h}': expected 'Name: value'"))?;
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        // Checked now so a missing token is a start-up error; the header is built when connecting.
        if let Some(var) = &args.token_env {
            rcp_client::registry::bearer_from_env(var)?;
        }
        return Ok(Target::Http { url: url.clone(), headers, token_env: args.token_env.clone() });
    }
    match &args.registry {
        Some(p) => Ok(Target::Registry(p.clone())),
        None => Err("one of --stdio, --http or --registry is required".into()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let schema =
        args.schema.clone().or_else(|| std::env::var_os("RCP_SCHEMA").map(PathBuf::from)).filter(|p| p.is_file());
    let target = match target(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rcp-inspect: {e}");
            return ExitCode::from(rcp_wire::exit::FAILURE);
        }
    };
    let limits =
        WireLimits { entry_bytes: args.wire_frame_bytes, total_bytes: args.wire_bytes, ..WireLimits::default() };
    let inspector = match Inspector::start_with(&target, args.port, schema, limits, &args.tls.options()).await {
        Ok(i) => i,
        Err(e) => {
            eprintln!("rcp-inspect: {e}");
            return ExitCode::from(rcp_wire::exit::FAILURE);
        }
    };
    for e in &inspector.app.engines {
        if let rcp_inspector::engine::Link::Failed { reason, .. } = &e.link {
            eprintln!("rcp-inspect: engine '{}' is not available: {reason}", e.id());
        }
    }
    let url = inspector.url();
    eprintln!("rcp-inspect: open {url} in a browser (Ctrl-C stops the inspector and its engines)");
    eprintln!("RCP_INSPECT_URL={url}");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    // A page holding a stream open must not keep the inspector alive: 3 s after Ctrl-C it exits
    // anyway (and its engines, spawned with kill-on-drop, end with it).
    let forced = async {
        let _ = tokio::signal::ctrl_c().await;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    };
    let served = tokio::select! {
        r = inspector.serve(shutdown) => r,
        () = forced => Ok(()),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rcp-inspect: {e}");
            ExitCode::from(rcp_wire::exit::FAILURE)
        }
    }
}
