//! rcp-pg beside the embedded engines, in one run: indexing docs/s for the same Cranfield
//! corpus, then, over stdio with one client calling sequentially, queries/s, latency and
//! nDCG@10 at k=10 for rcp-bm25, rcp-dense and rcp-pg in each of its modes.
//!
//! PostgreSQL comes from `--database-url` (an empty database with pgvector available), or,
//! without it, a private cluster started from the `pgserver` wheel (`rcp_testkit::pg`).
//!
//! ```sh
//! cargo build --release -p rcp-bm25 -p rcp-dense -p rcp-pg --bins && cargo build --release -p rcp-bench --bin pg_modes
//! target/release/pg_modes [--database-url URL] [--queries 225]
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, evaluate, percentile};
use rcp_bench::scratch::Cleanup;
use rcp_bench::stdio::StdioServer;
use rcp_testkit::pg::PgCluster;
use serde_json::json;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "rcp-pg (sparse, dense, hybrid) beside rcp-bm25 and rcp-dense on Cranfield: docs/s, q/s, nDCG@10")]
struct Args {
    /// An empty database (default: start a private PostgreSQL from the pgserver wheel).
    #[arg(long)]
    database_url: Option<String>,
    /// Directory holding the engine binaries (default: beside this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Queries to time per engine (Cranfield has 225).
    #[arg(long, default_value_t = 225)]
    queries: usize,
    /// The Cranfield directory (BEIR layout).
    #[arg(long)]
    cranfield: Option<PathBuf>,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let dir = args.bin_dir.clone().unwrap_or_else(|| {
        std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)).unwrap_or_default()
    });
    let bin = |name: &str| dir.join(name);
    for name in ["rcp-bm25", "rcp-dense", "rcp-pg"] {
        if !bin(name).exists() {
            bail!("{} not built (cargo build --release -p {name})", bin(name).display());
        }
    }
    let cranfield = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let collection = Collection::load(&cranfield)
        .with_context(|| format!("load the Cranfield collection in {}", cranfield.display()))?;
    let corpus = collection.corpus.clone();
    let docs = rcp_corpus::count_lines(&corpus).context("count the Cranfield documents")?;
    let _cluster;
    let url = match &args.database_url {
        Some(url) => url.clone(),
        None => {
            let c = PgCluster::start().map_err(anyhow::Error::msg).context("start a private PostgreSQL")?;
            let url = c.create_database("bench").map_err(anyhow::Error::msg).context("create the bench database")?;
            _cluster = c;
            url
        }
    };
    let scratch = std::env::temp_dir().join(format!("rcp-pg-bench-{}", std::process::id()));
    let _cleanup = Cleanup(scratch.clone());
    let (bm25_dir, dense_dir) = (scratch.join("bm25"), scratch.join("dense"));

    println!("indexing {docs} Cranfield documents (each engine's own `index` command, one run)");
    println!("{:<10} {:>9} {:>9}", "engine", "seconds", "docs/s");
    let index = |label: &str, cmd: &mut Command| -> anyhow::Result<()> {
        let started = Instant::now();
        let out = cmd.output().with_context(|| format!("{label}: run {cmd:?}"))?;
        if !out.status.success() {
            bail!("{label} index failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end());
        }
        let secs = started.elapsed().as_secs_f64();
        println!("{label:<10} {secs:>9.1} {:>9.1}", docs as f64 / secs);
        Ok(())
    };
    index("rcp-bm25", Command::new(bin("rcp-bm25")).arg("index").arg("--data-dir").arg(&bm25_dir).arg(&corpus))?;
    index(
        "rcp-dense",
        Command::new(bin("rcp-dense")).args(["index", "--fetch-model", "--data-dir"]).arg(&dense_dir).arg(&corpus),
    )?;
    index("rcp-pg", Command::new(bin("rcp-pg")).args(["index", "--fetch-model", "--database-url", &url]).arg(&corpus))?;

    let queries: Vec<(String, String)> = collection.queries.iter().take(args.queries).cloned().collect();
    println!("\n{} queries, k=10, one client calling sequentially over stdio", queries.len());
    println!("{:<16} {:>8} {:>9} {:>9} {:>9}", "engine", "q/s", "p50 ms", "p99 ms", "nDCG@10");
    let servers: Vec<(String, Vec<String>)> = vec![
        ("rcp-bm25".into(), vec!["serve".into(), "--data-dir".into(), bm25_dir.display().to_string()]),
        ("rcp-dense".into(), vec!["serve".into(), "--data-dir".into(), dense_dir.display().to_string()]),
        ("rcp-pg sparse".into(), pg_args(&url, "sparse")),
        ("rcp-pg dense".into(), pg_args(&url, "dense")),
        ("rcp-pg hybrid".into(), pg_args(&url, "hybrid")),
    ];
    for (label, argv) in servers {
        let program = if label.starts_with("rcp-pg") { bin("rcp-pg") } else { bin(label.as_str()) };
        let mut cmd = Command::new(program);
        cmd.args(&argv).stderr(std::process::Stdio::null());
        let mut server = StdioServer::spawn(cmd).with_context(|| format!("serve {label}"))?;
        for (_, q) in queries.iter().take(10) {
            server
                .call("retrieve", json!({"query": q, "k": 10, "includeText": false}))
                .with_context(|| format!("{label}: warm-up query {q:?}"))?;
        }
        let mut latencies = Vec::with_capacity(queries.len());
        let mut rankings = HashMap::new();
        let started = Instant::now();
        for (qid, q) in &queries {
            let t = Instant::now();
            let r = server
                .call("retrieve", json!({"query": q, "k": 10, "includeText": false}))
                .with_context(|| format!("{label}: query {qid}"))?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            let ids: Vec<String> = r["hits"]
                .as_array()
                .map(|hits| hits.iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            rankings.insert(qid.clone(), ids);
        }
        let qps = queries.len() as f64 / started.elapsed().as_secs_f64();
        let scores = evaluate(&collection, &rankings);
        println!(
            "{label:<16} {qps:>8.1} {:>9.2} {:>9.2} {:>9.4}",
            percentile(&mut latencies, 50.0),
            percentile(&mut latencies, 99.0),
            scores.ndcg10
        );
        server.shutdown().with_context(|| format!("{label}: shutdown"))?;
    }
    Ok(())
}

fn pg_args(url: &str, mode: &str) -> Vec<String> {
    ["serve", "--database-url", url, "--default-mode", mode].iter().map(|s| (*s).to_owned()).collect()
}
