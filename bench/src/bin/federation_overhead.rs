//! Federation overhead: fused latency divided by the slowest engine's latency, per query, for
//! federations of 2 and 8 engines (all instances of the tiny example engine over stdio).
//!
//! ```sh
//! cargo build --release -p rcp-examples --example tiny_engine
//! cargo run --release -p rcp-bench --bin federation_overhead -- --engines 2,8 --queries 300
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::percentile;
use rcp_client::federation::EngineOutcome;
use rcp_client::{Federation, FederationOptions, Registry};
use rcp_wire::RetrieveParams;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Fused latency / slowest engine latency for federations of N engines")]
struct Args {
    /// Engine binary (default: target/release/examples/tiny_engine beside this binary).
    #[arg(long)]
    engine: Option<PathBuf>,
    /// Federation sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,8")]
    engines: Vec<usize>,
    /// Queries per size.
    #[arg(long, default_value_t = 300)]
    queries: usize,
}

const QUERIES: [&str; 6] =
    ["rust async", "retrieval fusion", "borrow checker", "dense vectors", "write-ahead log", "attention"];

#[tokio::main]
async fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(Args::parse()).await)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let engine = args.engine.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        exe.parent().map(|d| d.join("examples").join("tiny_engine")).unwrap_or_default()
    });
    if !engine.exists() {
        bail!(
            "{} not found; build it with `cargo build --release -p rcp-examples --example tiny_engine`",
            engine.display()
        );
    }
    println!(
        "{:>8} {:>9} {:>14} {:>14} {:>12} {:>12}",
        "engines", "queries", "fused p50 ms", "slowest p50 ms", "ratio p50", "ratio p99"
    );
    for &n in &args.engines {
        let entries: Vec<_> = (0..n)
            .map(|i| serde_json::json!({"id": format!("e{i}"), "transport": "stdio", "command": [engine.to_string_lossy()]}))
            .collect();
        let registry = Registry::parse(&serde_json::json!({"engines": entries}).to_string(), None)
            .with_context(|| format!("bad registry of {n} engines"))?;
        let fed = Federation::new(
            registry,
            FederationOptions { engine_timeout: Duration::from_secs(10), ..Default::default() },
        );
        if let Some((id, Err(e))) = fed.connect().await.into_iter().find(|(_, c)| c.is_err()) {
            return Err(anyhow::Error::new(e).context(format!("engine {id} failed to start")));
        }
        // Warm up.
        for q in QUERIES {
            let _ = fed.retrieve(RetrieveParams::new(q, 10)).await;
        }
        let (mut fused, mut slowest, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..args.queries {
            let t = Instant::now();
            let Ok(out) = fed.retrieve(RetrieveParams::new(QUERIES[i % QUERIES.len()], 10)).await else { continue };
            let total = t.elapsed().as_secs_f64() * 1e3;
            let worst = out
                .engines
                .iter()
                .filter_map(|(_, o)| match o {
                    EngineOutcome::Answered { latency, .. } => Some(latency.as_secs_f64() * 1e3),
                    _ => None,
                })
                .fold(0.0, f64::max);
            fused.push(total);
            slowest.push(worst);
            if worst > 0.0 {
                ratios.push(total / worst);
            }
        }
        println!(
            "{n:>8} {:>9} {:>14.3} {:>14.3} {:>12.3} {:>12.3}",
            fused.len(),
            percentile(&mut fused, 50.0),
            percentile(&mut slowest, 50.0),
            percentile(&mut ratios.clone(), 50.0),
            percentile(&mut ratios, 99.0)
        );
    }
    Ok(())
}
