//! Federation overhead, in two parts:
//!
//! 1. **`retrieve`**: fused latency divided by the slowest engine's latency, per query, for
//!    federations of 2 and 8 engines (all instances of the tiny example engine over stdio,
//!    federated in process by rcp-client).
//! 2. **`graph`**: `rcp-gateway serve` (stdio) in front of N `rcp-dense serve --graph` engines
//!    against `rcp-dense serve --graph` asked directly, same ops, interleaved in one run: per
//!    query, N direct engines are asked at once, as the gateway asks its engines, so they share
//!    the CPUs alike (the slowest of them is the baseline), and the gateway is asked before or
//!    after them (the order alternates from query to query). Ops: `neighbors` of a seed document
//!    and `local` with a query (the engine encodes it), k = 10, over Cranfield (its first
//!    `--graph-docs` abstracts, its queries). Every engine, direct or behind the gateway, has
//!    its own copy of one index. Reported per op: the gateway's and the slowest engine's p50,
//!    the extra time, and the ratio (gateway / slowest engine) at p50 and p99. Skipped, with a
//!    line saying why, when `rcp-gateway`, `rcp-dense` or the Cranfield collection is missing.
//!
//! ```sh
//! cargo build --release -p rcp-examples --example tiny_engine
//! cargo build --release -p rcp-dense -p rcp-gateway -p rcp-bench
//! cargo run --release -p rcp-bench --bin federation_overhead -- --engines 2,8 --queries 300
//! target/release/federation_overhead --graph-engines 1,2 --graph-queries 200
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, percentile};
use rcp_bench::scratch::{Cleanup, copy_dir, sibling};
use rcp_client::federation::EngineOutcome;
use rcp_client::{Client, ClientOptions, Federation, FederationOptions, Registry};
use rcp_wire::RetrieveParams;
use serde_json::{Value, json};

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
    /// Numbers of `rcp-dense --graph` engines behind the gateway for the graph ops,
    /// comma-separated (0: skip the graph part).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    graph_engines: Vec<usize>,
    /// Queries per op and size for the graph ops.
    #[arg(long, default_value_t = 200)]
    graph_queries: usize,
    /// Cranfield abstracts indexed for the graph ops (0: all 1,400).
    #[arg(long, default_value_t = 0)]
    graph_docs: usize,
    /// The Cranfield directory (BEIR layout) [default: $RCP_CRANFIELD or ../shared/data/cranfield].
    #[arg(long)]
    cranfield: Option<PathBuf>,
    /// Directory holding `rcp-gateway` and `rcp-dense` (default: beside this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
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
    let sizes: Vec<usize> = args.graph_engines.iter().copied().filter(|n| *n > 0).collect();
    if !sizes.is_empty() {
        println!();
        graph_ops(&args, &sizes).await?;
    }
    Ok(())
}

/// Longest wait for one graph answer (and for an engine to load its model).
const GRAPH_TIMEOUT: Duration = Duration::from_secs(120);
/// `k` of every graph op.
const GRAPH_K: u64 = 10;

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `rcp-dense serve --graph` over `data`.
fn dense_serve(dense: &Path, data: &Path) -> Vec<String> {
    vec![path(dense), "serve".into(), "--graph".into(), "--data-dir".into(), path(data)]
}

/// One graph request: `neighbors` of a seed or `local` for a query.
fn graph_params(op: &str, i: usize, seeds: &[String], queries: &[(String, String)]) -> Value {
    match op {
        "neighbors" => json!({"op": "neighbors", "seedIds": [seeds[i % seeds.len()]], "k": GRAPH_K}),
        _ => json!({"op": "local", "query": queries[i % queries.len()].1, "k": GRAPH_K}),
    }
}

/// Milliseconds one graph call took; an answer without nodes or hits is an error.
async fn timed(client: &Client, params: &Value) -> anyhow::Result<f64> {
    let t = Instant::now();
    let r = client.call_with_timeout("graph", params.clone(), GRAPH_TIMEOUT).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let found = ["nodes", "hits"].iter().any(|key| r[*key].as_array().is_some_and(|a| !a.is_empty()));
    if !found {
        bail!("an empty answer to {params}: {r}");
    }
    Ok(ms)
}

/// The slowest of `engines` asked `params` at the same time, as the gateway asks them (so they
/// share the CPUs as they do behind it): each call timed on its own, the longest returned.
async fn slowest_of(engines: &[Client], params: &Value) -> anyhow::Result<f64> {
    let mut calls = tokio::task::JoinSet::new();
    for e in engines {
        let (e, p) = (e.clone(), params.clone());
        calls.spawn(async move { timed(&e, &p).await });
    }
    let mut worst: f64 = 0.0;
    while let Some(ms) = calls.join_next().await {
        worst = worst.max(ms.context("a direct call panicked")?.context("rcp-dense")?);
    }
    Ok(worst)
}

/// Part 2 (see the module docs): the gateway in front of `n` dense engines for each `n` of
/// `sizes`, against as many dense engines asked directly.
async fn graph_ops(args: &Args, sizes: &[usize]) -> anyhow::Result<()> {
    let beside = || sibling("rcp-dense").parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = args.bin_dir.clone().unwrap_or_else(beside);
    // Absolute: registries resolve relative program paths against their own directory.
    let dir = dir.canonicalize().unwrap_or(dir);
    let (gateway, dense) = (dir.join("rcp-gateway"), dir.join("rcp-dense"));
    // Without its binaries or its corpus the graph part is skipped, saying why, so the
    // `retrieve` part runs on its own as before.
    if let Some(missing) = [&gateway, &dense].into_iter().find(|b| !b.exists()) {
        println!(
            "Graph ops skipped: {} not found; build with `cargo build --release -p rcp-dense -p rcp-gateway`",
            missing.display()
        );
        return Ok(());
    }
    let cranfield = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let c = match Collection::load(&cranfield) {
        Ok(c) => c,
        Err(e) => {
            println!("Graph ops skipped: no Cranfield collection in {} ({e}); see --cranfield", cranfield.display());
            return Ok(());
        }
    };
    let corpus = std::fs::read_to_string(&c.corpus).with_context(|| format!("read {}", c.corpus.display()))?;
    let mut lines: Vec<&str> = corpus.lines().filter(|l| !l.trim().is_empty()).collect();
    if args.graph_docs > 0 {
        lines.truncate(args.graph_docs);
    }
    let seeds: Vec<String> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| match &v["_id"] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    if seeds.is_empty() || c.queries.is_empty() {
        bail!("no documents or no queries in {}", cranfield.display());
    }

    let tmp = std::env::temp_dir().join(format!("rcp-federation-graph-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    let docs = tmp.join("corpus.jsonl");
    std::fs::write(&docs, lines.join("\n")).context("write the corpus")?;
    let index = tmp.join("index");
    eprintln!("indexing {} Cranfield abstracts with rcp-dense ...", lines.len());
    let out = std::process::Command::new(&dense)
        .args(["index", "--data-dir"])
        .arg(&index)
        .arg(&docs)
        .output()
        .context("run rcp-dense index")?;
    if !out.status.success() {
        bail!("rcp-dense index ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end());
    }
    let mut copies = 0usize;
    let mut copy = || -> anyhow::Result<PathBuf> {
        copies += 1;
        let to = tmp.join(format!("copy-{copies}"));
        copy_dir(&index, &to).with_context(|| format!("copy the index to {}", to.display()))?;
        Ok(to)
    };

    // The engines asked directly, as many as the largest federation.
    let most = sizes.iter().copied().max().unwrap_or(1);
    let options = ClientOptions { request_timeout: Some(GRAPH_TIMEOUT), ..ClientOptions::default() };
    let mut direct = Vec::new();
    for _ in 0..most {
        let data = copy()?;
        direct.push(
            Client::connect_stdio(&dense_serve(&dense, &data), options.clone()).await.context("start rcp-dense")?,
        );
    }

    println!(
        "Graph ops through rcp-gateway (stdio client -> rcp-gateway serve -> N x rcp-dense serve --graph, {} Cranfield docs, k={GRAPH_K})",
        lines.len()
    );
    println!("against N x rcp-dense serve --graph asked directly at once (the slowest of them), interleaved");
    println!(
        "{:>8} {:>10} {:>8} {:>13} {:>15} {:>13} {:>10} {:>10}",
        "engines", "op", "queries", "gateway p50", "slowest p50", "extra p50", "ratio p50", "ratio p99"
    );
    for &n in sizes {
        let mut entries = Vec::new();
        for i in 0..n {
            entries.push(json!({"id": format!("dense{i}"), "command": dense_serve(&dense, &copy()?)}));
        }
        let registry = tmp.join(format!("graph-{n}.json"));
        std::fs::write(&registry, json!({"engines": entries}).to_string()).context("write the registry")?;
        let cmd = vec![
            path(&gateway),
            "serve".into(),
            "--registry".into(),
            path(&registry),
            "--id".into(),
            "bench-gw".into(),
            "--engine-timeout-ms".into(),
            GRAPH_TIMEOUT.as_millis().to_string(),
            "--connect-timeout-ms".into(),
            GRAPH_TIMEOUT.as_millis().to_string(),
        ];
        let via = Client::connect_stdio(&cmd, options.clone()).await.context("start rcp-gateway")?;
        let engines = &direct[..n];
        for op in ["neighbors", "local"] {
            // Warm up every connection with the op.
            for i in 0..5 {
                let p = graph_params(op, i, &seeds, &c.queries);
                slowest_of(engines, &p).await.context("warm-up")?;
                timed(&via, &p).await.context("rcp-gateway (warm-up)")?;
            }
            let (mut gw, mut slowest, mut extra, mut ratio) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for i in 0..args.graph_queries {
                let p = graph_params(op, i, &seeds, &c.queries);
                let (g, worst) = if i % 2 == 1 {
                    let g = timed(&via, &p).await.context("rcp-gateway")?;
                    (g, slowest_of(engines, &p).await?)
                } else {
                    let worst = slowest_of(engines, &p).await?;
                    (timed(&via, &p).await.context("rcp-gateway")?, worst)
                };
                gw.push(g);
                slowest.push(worst);
                extra.push(g - worst);
                ratio.push(g / worst);
            }
            println!(
                "{n:>8} {op:>10} {:>8} {:>10.3} ms {:>12.3} ms {:>10.3} ms {:>10.3} {:>10.3}",
                gw.len(),
                percentile(&mut gw, 50.0),
                percentile(&mut slowest, 50.0),
                percentile(&mut extra, 50.0),
                percentile(&mut ratio.clone(), 50.0),
                percentile(&mut ratio, 99.0),
            );
        }
        let _ = via.shutdown().await;
    }
    for e in &direct {
        let _ = e.shutdown().await;
    }
    Ok(())
}
