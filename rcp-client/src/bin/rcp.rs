//! `rcp`: a small command-line client for RCP engines.
//!
//! ```sh
//! rcp info --stdio "rcp-bm25 serve"
//! rcp retrieve --http http://127.0.0.1:8080/rcp "wing lift" -k 5
//! rcp federate examples/rcp.json "wing lift" -k 5 --fusion convex
//! ```

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use rcp_client::federation::EngineOutcome;
use rcp_client::{Client, ClientError, ClientOptions, ConnectError, Federation, FederationOptions};
use rcp_protocol::fusion::FusionMethod;
use rcp_protocol::{Hit, RetrieveParams};
use serde_json::json;

#[derive(Parser)]
#[command(name = "rcp", version, about = "Talk to RCP (Retrieval Context Protocol) engines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Show an engine's identity, negotiated version and capabilities.
    Info {
        #[command(flatten)]
        target: Target,
    },
    /// Run one query against one engine.
    Retrieve {
        #[command(flatten)]
        target: Target,
        /// The query text.
        query: String,
        /// How many hits.
        #[arg(short, long, default_value_t = 10)]
        k: u64,
    },
    /// Fan a query out to every engine of an rcp.json registry and fuse the lists.
    Federate {
        /// The registry (rcp.json).
        registry: std::path::PathBuf,
        /// The query text.
        query: String,
        /// How many fused hits.
        #[arg(short, long, default_value_t = 10)]
        k: u64,
        /// Fusion: rrf, weighted or convex (convex falls back to rrf unless every engine
        /// advertises scoreFloor).
        #[arg(long, default_value = "rrf")]
        fusion: String,
        /// Per-engine deadline in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// Spawn this command and talk over its stdio (split on whitespace).
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// Talk to this HTTP base URL (e.g. http://127.0.0.1:8080/rcp).
    #[arg(long, value_name = "URL")]
    http: Option<String>,
}

async fn connect(t: &Target) -> Result<Client, ClientError> {
    let options = ClientOptions::default();
    match (&t.stdio, &t.http) {
        (Some(cmd), _) => {
            Client::connect_stdio(&cmd.split_whitespace().map(str::to_owned).collect::<Vec<_>>(), options).await
        }
        (None, Some(url)) => Client::connect_http(url, options).await,
        (None, None) => Err(ConnectError::Unavailable("give --stdio COMMAND or --http URL".into()).into()),
    }
}

fn snippet(h: &Hit) -> String {
    let text = h.text.as_deref().or(h.citation.as_ref().and_then(|c| c.title.as_deref())).unwrap_or("");
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 70 {
        format!("{}…", one_line.chars().take(69).collect::<String>())
    } else {
        one_line
    }
}

fn print_hits(hits: &[Hit]) {
    println!("{:>4}  {:<16} {:>10}  text", "rank", "id", "score");
    for (i, h) in hits.iter().enumerate() {
        println!("{:>4}  {:<16} {:>10.4}  {}", i + 1, h.key(), h.score, snippet(h));
    }
}

/// Runs one command; any failure (a client error, an unreadable registry, a bad option) ends
/// the program with its message.
async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Info { target } => {
            let c = connect(&target).await?;
            let info = c.info().await?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&info).unwrap_or_default());
            } else {
                println!("server:       {} {}", info.server.name, info.server.version.unwrap_or_default());
                println!("protocol:     RCP/{}", info.protocol_version);
                if let Some(level) = info.meta.as_ref().and_then(|m| m.get("conformance")) {
                    println!("conformance:  {level}");
                }
                println!("capabilities: {}", info.capabilities.keys().join(", "));
                for key in info.capabilities.keys() {
                    let v = serde_json::to_value(&info.capabilities).unwrap_or_default();
                    println!("  {key:<12} {}", v.get(&key).map(|x| x.to_string()).unwrap_or_default());
                }
            }
            let _ = c.shutdown().await;
        }
        Command::Retrieve { target, query, k } => {
            let c = connect(&target).await?;
            let res = c.retrieve(RetrieveParams::new(query, k)).await?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&res).unwrap_or_default());
            } else {
                print_hits(&res.hits);
                if let Some(u) = &res.usage {
                    println!("candidates: {:?}  latency: {:?} ms  notes: {:?}", u.candidates, u.latency_ms, u.notes);
                }
            }
            let _ = c.shutdown().await;
        }
        Command::Federate { registry, query, k, fusion, timeout_ms } => {
            let fusion = FusionMethod::from_name(&fusion)
                .ok_or_else(|| format!("unknown fusion '{fusion}'; expected rrf, weighted or convex"))?;
            let fed = Federation::from_registry_file(&registry)?.with_options(FederationOptions {
                fusion,
                engine_timeout: Duration::from_millis(timeout_ms),
                ..Default::default()
            });
            let out = fed.retrieve(RetrieveParams::new(query, k)).await?;
            if cli.json {
                let engines: Vec<_> = out
                    .engines
                    .iter()
                    .map(|(id, o)| match o {
                        EngineOutcome::Answered { hits, latency } => {
                            json!({"id": id, "hits": hits, "latencyMs": latency.as_millis() as u64})
                        }
                        EngineOutcome::Skipped(r) => json!({"id": id, "skipped": r}),
                        EngineOutcome::Failed(e) => json!({"id": id, "error": e.to_rcp()}),
                    })
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"fused": out.result, "engines": engines, "fusion": out.fusion.name()})
                    )
                    .unwrap_or_default()
                );
            } else {
                for (id, o) in &out.engines {
                    match o {
                        EngineOutcome::Answered { hits, latency } => {
                            println!("== {id} ({} hits, {} ms)", hits.len(), latency.as_millis());
                            print_hits(&hits[..hits.len().min(k as usize)]);
                        }
                        EngineOutcome::Skipped(r) => println!("== {id}: skipped ({r})"),
                        EngineOutcome::Failed(e) => println!("== {id}: failed ({e})"),
                    }
                    println!();
                }
                println!("== fused ({})", out.fusion.name());
                println!("{:>4}  {:<16} {:<10} {:>10}  ranks", "rank", "id", "engine", "fused");
                for (i, h) in out.result.hits.iter().enumerate() {
                    let meta = h.meta.clone().unwrap_or_default();
                    let engine = meta.get("engine").and_then(|v| v.as_str()).unwrap_or("");
                    let ranks = meta.get("engineRanks").map(|v| v.to_string()).unwrap_or_default();
                    println!("{:>4}  {:<16} {:<10} {:>10.5}  {}", i + 1, h.key(), engine, h.score, ranks);
                }
                if let Some(u) = &out.result.usage
                    && !u.notes.is_empty()
                {
                    println!("notes: {}", u.notes.join("; "));
                }
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let filter = std::env::var("RCP_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
    if let Err(e) = run(Cli::parse()).await {
        eprintln!("rcp: {e}");
        std::process::exit(1);
    }
}
