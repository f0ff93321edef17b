//! One query, two genuinely independent engines, one fused list.
//!
//! ```sh
//! cargo run --release --example example_federation                     # built-in corpus
//! cargo run --release --example example_federation -- "how are lists fused" -k 5
//! cargo run --release --example example_federation -- --corpus docs.jsonl "my question"
//! ```
//!
//! Spawns `rcp-bm25` (lexical, tantivy) and `rcp-dense` (MiniLM embeddings + HNSW) over stdio
//! through the client crate's `Federation`, prints each engine's own ranking, then the fused
//! top-k under RRF and under convex fusion (both engines advertise `scoreFloor`), and the
//! federation's union and intersection of capabilities. The engines are linked into this
//! example and run as child processes of its own executable (`rcp_examples::engines`), so one
//! `cargo run` builds everything; on first use it provisions the embedding model, with visible
//! progress.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::Parser;
use rcp_client::federation::EngineOutcome;
use rcp_client::{Federation, FederationOptions, Registry};
use rcp_wire::retrieve::FusionParams;
use rcp_wire::{Hit, RetrieveParams};
use serde_json::json;

#[derive(Parser)]
#[command(about = "Fan one query out to a BM25 and a dense engine and fuse the lists")]
struct Args {
    /// The query.
    #[arg(default_value = "lexical versus semantic search")]
    query: String,
    /// Fused hits to show.
    #[arg(short, long, default_value_t = 5)]
    k: u64,
    /// Index this JSONL corpus (`_id`, `title`, `text`) in both engines first.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Run this rcp-bm25 binary instead of the engine linked into the example.
    #[arg(long)]
    bm25: Option<PathBuf>,
    /// Run this rcp-dense binary instead of the engine linked into the example.
    #[arg(long)]
    dense: Option<PathBuf>,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("example_federation: {msg}");
    std::process::exit(1)
}

/// The command that starts an engine: `binary` when given, else this executable as engine `name`.
fn engine_command(binary: Option<&PathBuf>, name: &str) -> Vec<String> {
    match binary {
        Some(path) => vec![path.to_string_lossy().into_owned()],
        None => rcp_examples::engines::command(name).unwrap_or_else(|e| fail(e)),
    }
}

/// A process running `command` (program and arguments).
fn process(command: &[String]) -> Command {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    cmd
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => fail(format!("{what} failed ({s})")),
        Err(e) => fail(format!("{what}: {e}")),
    }
}

fn show(hits: &[Hit], k: usize) {
    for (i, h) in hits.iter().take(k).enumerate() {
        let title = h.citation.as_ref().and_then(|c| c.title.clone()).or_else(|| h.text.clone()).unwrap_or_default();
        let title: String = title.chars().take(60).collect();
        println!("  {:>2}. {:<12} {:>9.4}  {title}", i + 1, h.key(), h.score);
    }
}

fn main() -> ExitCode {
    // Started by itself as one of the engines: be that engine.
    if let Some(code) = rcp_examples::engines::run_if_asked() {
        return code;
    }
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(e));
    runtime.block_on(federate(args));
    ExitCode::SUCCESS
}

async fn federate(args: Args) {
    let bm25 = engine_command(args.bm25.as_ref(), "bm25");
    let dense = engine_command(args.dense.as_ref(), "dense");

    eprintln!("checking the embedding model (downloads it on first run)…");
    run(process(&dense).arg("fetch-model"), "rcp-dense fetch-model");

    let mut bm25_cmd = [bm25.clone(), vec!["serve".into()]].concat();
    let mut dense_cmd = [dense.clone(), vec!["serve".into()]].concat();
    let _data = args.corpus.as_ref().map(|corpus| {
        let dir = std::env::temp_dir().join(format!("rcp-example-federation-{}", std::process::id()));
        let (b, d) = (dir.join("bm25"), dir.join("dense"));
        eprintln!("indexing {} in both engines…", corpus.display());
        run(process(&bm25).args(["index", "--data-dir"]).arg(&b).arg(corpus), "rcp-bm25 index");
        run(process(&dense).args(["index", "--data-dir"]).arg(&d).arg(corpus), "rcp-dense index");
        bm25_cmd.extend(["--data-dir".into(), b.to_string_lossy().into_owned()]);
        dense_cmd.extend(["--data-dir".into(), d.to_string_lossy().into_owned()]);
        TempDir(dir)
    });

    let registry = json!({"engines": [
        {"id": "bm25", "transport": "stdio", "command": bm25_cmd},
        {"id": "dense", "transport": "stdio", "command": dense_cmd}
    ]});
    let registry = Registry::parse(&registry.to_string(), None).unwrap_or_else(|e| fail(e));
    let options = FederationOptions { engine_timeout: Duration::from_secs(60), ..Default::default() };
    let fed = Federation::new(registry, options);
    for (id, c) in fed.connect().await {
        if let Err(e) = c {
            fail(format!("engine {id} did not start: {e}"));
        }
    }

    let k = args.k as usize;
    println!("query: {:?}\n", args.query);
    let mut params = RetrieveParams::new(args.query.clone(), args.k);
    params.include_text = Some(true);
    // RRF asked for by name: the federation's default is convex, since both engines advertise
    // `scoreFloor` (§16.3).
    params.fusion = Some(FusionParams { method: Some("rrf".into()), ..Default::default() });
    let rrf = fed.retrieve(params.clone()).await.unwrap_or_else(|e| fail(e));
    for (id, outcome) in &rrf.engines {
        match outcome {
            EngineOutcome::Answered { hits, latency } => {
                println!("{id} ranking ({} ms):", latency.as_millis());
                show(hits, k);
            }
            EngineOutcome::Skipped(r) => println!("{id}: skipped ({r})"),
            EngineOutcome::Failed(e) => println!("{id}: failed ({e})"),
        }
        println!();
    }

    // The fusion method travels in the federated request's own `fusion` option; the engines
    // never see it (each returns its own ranking).
    params.fusion = Some(FusionParams { method: Some("convex".into()), alpha: Some(0.5), ..Default::default() });
    let convex = fed.retrieve(params).await.unwrap_or_else(|e| fail(e));
    for (label, out) in [("RRF (rrfK 60)", &rrf), ("convex (alpha 0.5 on dense, scoreFloor-anchored)", &convex)] {
        println!("fused top-{k}, {label} [used: {}]:", out.fusion.name());
        println!(
            "  {:>2}  {:<12} {:<11} {:>9}  {:>9}  {:>10}",
            "#", "id", "found by", "fused", "bm25 rank", "dense rank"
        );
        for (i, h) in out.result.hits.iter().enumerate() {
            // meta.engine names one origin; engineRanks shows every engine that returned the hit.
            let ranks = h.meta.as_ref().and_then(|m| m.get("engineRanks")).and_then(|r| r.as_object()).cloned();
            let ranks = ranks.unwrap_or_default();
            let found_by = ranks.keys().cloned().collect::<Vec<_>>().join("+");
            let rank = |e: &str| ranks.get(e).map_or("-".to_owned(), |r| r.to_string());
            let (bm25, dense) = (rank("bm25"), rank("dense"));
            println!("  {:>2}  {:<12} {found_by:<11} {:>9.5}  {bm25:>9}  {dense:>10}", i + 1, h.key(), h.score);
        }
        if let Some(u) = &out.result.usage
            && !u.notes.is_empty()
        {
            println!("  notes: {}", u.notes.join("; "));
        }
        println!();
    }

    let union: Vec<String> = fed.effective_capabilities().await.into_iter().collect();
    let inter: Vec<String> = fed.guaranteed_capabilities().await.into_iter().collect();
    println!("federation capabilities (union, what it can do):        {}", union.join(", "));
    println!("federation capabilities (intersection, what it guarantees): {}", inter.join(", "));
}

/// Removes the example's data directories when it ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
