//! Gateway overhead and sharded quality.
//!
//! 1. **Overhead**: a client calls `rcp-gateway serve` (stdio) in front of N `rcp-bm25 serve`
//!    engines (built-in corpus); per query, the gateway's latency as the client sees it is
//!    compared with the slowest engine's latency as the gateway saw it (`_meta.engineLatencyUs`).
//!    Reported: p50/p99 of the difference (ms) and of the ratio.
//! 2. **Sharded quality**: Cranfield split round-robin into S shards, each indexed by
//!    `rcp-bm25 index`, served as one collection behind the gateway (merged by score), against
//!    the same corpus in one index (served directly) and against the shards fused by RRF as
//!    separate collections. Reported: nDCG@10 over the 225 queries.
//!
//! ```sh
//! cargo build --release -p rcp-bm25 -p rcp-gateway -p rcp-bench
//! target/release/gateway_overhead --engines 2,4 --queries 300 --shards 2,4
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, evaluate, percentile};
use rcp_bench::scratch::Cleanup;
use rcp_client::{Client, ClientOptions};
use serde_json::{Value, json};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Latency overhead of rcp-gateway and nDCG@10 of sharded vs single Cranfield")]
struct Args {
    /// Directory holding `rcp-gateway` and `rcp-bm25` (default: beside this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Numbers of engines behind the gateway, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    engines: Vec<usize>,
    /// Queries per size.
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Shard counts for the Cranfield comparison, comma-separated (empty: skip).
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    shards: Vec<usize>,
    /// The Cranfield directory (BEIR layout).
    #[arg(long)]
    cranfield: Option<PathBuf>,
}

const QUERIES: [&str; 6] =
    ["wing lift", "boundary layer", "heat transfer", "supersonic flow", "buckling", "shock wave"];

#[tokio::main]
async fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()).await)
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let dir = args.bin_dir.clone().unwrap_or_else(|| {
        std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)).unwrap_or_default()
    });
    // Absolute: registries resolve relative program paths against their own directory.
    let dir = dir.canonicalize().unwrap_or(dir);
    let (gateway, bm25) = (dir.join("rcp-gateway"), dir.join("rcp-bm25"));
    for b in [&gateway, &bm25] {
        if !b.exists() {
            bail!("{} not found; build with `cargo build --release -p rcp-bm25 -p rcp-gateway`", b.display());
        }
    }
    let tmp = std::env::temp_dir().join(format!("rcp-gateway-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    overhead(args, &gateway, &bm25, &tmp).await?;
    if !args.shards.is_empty() {
        sharded_quality(args, &gateway, &bm25, &tmp).await?;
    }
    Ok(())
}

/// Writes a registry file for `rcp-gateway serve --registry`.
fn write_registry(path: &Path, entries: Vec<Value>) -> anyhow::Result<()> {
    std::fs::write(path, json!({"engines": entries}).to_string()).with_context(|| format!("write {}", path.display()))
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

async fn connect_gateway(gateway: &Path, registry: &Path) -> anyhow::Result<Client> {
    let cmd =
        vec![path(gateway), "serve".into(), "--registry".into(), path(registry), "--id".into(), "bench-gw".into()];
    Client::connect_stdio(&cmd, ClientOptions::default())
        .await
        .with_context(|| format!("gateway over {}", registry.display()))
}

async fn overhead(args: &Args, gateway: &Path, bm25: &Path, tmp: &Path) -> anyhow::Result<()> {
    println!("Gateway overhead (stdio client -> gateway -> N x rcp-bm25 built-in corpus, k=10)");
    println!(
        "{:>8} {:>8} {:>13} {:>15} {:>13} {:>13} {:>10} {:>10}",
        "engines", "queries", "gateway p50", "slowest p50", "extra p50", "extra p99", "ratio p50", "ratio p99"
    );
    for &n in &args.engines {
        let entries: Vec<Value> =
            (0..n).map(|i| json!({"id": format!("e{i}"), "command": [path(bm25), "serve"]})).collect();
        let registry = tmp.join(format!("overhead-{n}.json"));
        write_registry(&registry, entries)?;
        let client = connect_gateway(gateway, &registry).await?;
        for q in QUERIES {
            let _ = client.call("retrieve", json!({"query": q, "k": 10})).await;
        }
        let (mut total, mut slowest, mut extra, mut ratio) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..args.queries {
            let t = Instant::now();
            let Ok(r) = client.call("retrieve", json!({"query": QUERIES[i % QUERIES.len()], "k": 10})).await else {
                continue;
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let worst = r["_meta"]["engineLatencyUs"]
                .as_object()
                .map(|m| m.values().filter_map(Value::as_f64).fold(0.0, f64::max) / 1e3)
                .unwrap_or(0.0);
            total.push(ms);
            slowest.push(worst);
            extra.push(ms - worst);
            if worst > 0.0 {
                ratio.push(ms / worst);
            }
        }
        println!(
            "{n:>8} {:>8} {:>10.3} ms {:>12.3} ms {:>10.3} ms {:>10.3} ms {:>10.2} {:>10.2}",
            total.len(),
            percentile(&mut total, 50.0),
            percentile(&mut slowest, 50.0),
            percentile(&mut extra.clone(), 50.0),
            percentile(&mut extra, 99.0),
            percentile(&mut ratio.clone(), 50.0),
            percentile(&mut ratio, 99.0),
        );
        let _ = client.shutdown().await;
    }
    Ok(())
}

/// Runs every query through `client` and returns query id → ranked doc ids.
async fn rankings(client: &Client, c: &Collection) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let mut out = HashMap::new();
    for (qid, text) in &c.queries {
        let r = client
            .call_with_timeout("retrieve", json!({"query": text, "k": 100}), Duration::from_secs(30))
            .await
            .with_context(|| format!("query {qid}"))?;
        let ids: Vec<String> = r["hits"]
            .as_array()
            .map(|hs| hs.iter().map(|h| h["id"].to_string().trim_matches('"').to_owned()).collect())
            .unwrap_or_default();
        out.insert(qid.clone(), ids);
    }
    Ok(out)
}

fn index(bm25: &Path, data: &Path, corpus: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new(bm25)
        .args(["index", "--data-dir"])
        .arg(data)
        .arg(corpus)
        .output()
        .context("rcp-bm25 index")?;
    if !out.status.success() {
        bail!("rcp-bm25 index ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end());
    }
    Ok(())
}

async fn sharded_quality(args: &Args, gateway: &Path, bm25: &Path, tmp: &Path) -> anyhow::Result<()> {
    let dir = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let c = Collection::load(&dir).with_context(|| format!("load the Cranfield collection in {}", dir.display()))?;
    let corpus = std::fs::read_to_string(&c.corpus).with_context(|| format!("read {}", c.corpus.display()))?;
    let lines: Vec<&str> = corpus.lines().filter(|l| !l.trim().is_empty()).collect();

    let single = tmp.join("single");
    index(bm25, &single, &c.corpus)?;
    let client = Client::connect_stdio(
        &[path(bm25), "serve".into(), "--data-dir".into(), path(&single)],
        ClientOptions::default(),
    )
    .await
    .context("rcp-bm25")?;
    let base = evaluate(&c, &rankings(&client, &c).await.context("single index")?);
    let _ = client.shutdown().await;
    println!();
    println!("Cranfield ({} docs, {} queries), nDCG@10 / Recall@100", lines.len(), c.queries.len());
    println!("{:>28} {:>8} {:>8}", "setup", "nDCG@10", "R@100");
    println!("{:>28} {:>8.4} {:>8.4}", "single index (direct)", base.ndcg10, base.recall100);

    for &s in &args.shards {
        let mut shard_entries = Vec::new();
        let mut rrf_entries = Vec::new();
        for i in 0..s {
            let file = tmp.join(format!("shard-{s}-{i}.jsonl"));
            let part: Vec<&str> = lines.iter().copied().skip(i).step_by(s).collect();
            std::fs::write(&file, part.join("\n") + "\n").with_context(|| format!("write {}", file.display()))?;
            let data = tmp.join(format!("shard-{s}-{i}"));
            index(bm25, &data, &file)?;
            let cmd = json!([path(bm25), "serve", "--data-dir", path(&data)]);
            shard_entries.push(json!({"id": format!("s{i}"), "collection": "cranfield", "command": cmd}));
            rrf_entries.push(json!({"id": format!("s{i}"), "command": cmd}));
        }
        for (label, entries) in [("score merge", shard_entries), ("RRF of shards", rrf_entries)] {
            let registry = tmp.join(format!("shards-{s}-{}.json", label.replace(' ', "-")));
            write_registry(&registry, entries)?;
            let client = connect_gateway(gateway, &registry).await?;
            let scores = evaluate(&c, &rankings(&client, &c).await.with_context(|| format!("{s} shards, {label}"))?);
            let _ = client.shutdown().await;
            println!("{:>28} {:>8.4} {:>8.4}", format!("{s} shards, {label}"), scores.ndcg10, scores.recall100);
        }
    }
    Ok(())
}
