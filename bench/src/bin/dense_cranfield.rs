//! `dense_cranfield`: quality and speed of the dense engine's retrieval core.
//!
//! 1. **Cranfield** (1,400 abstracts, 225 queries): nDCG@10 / Recall@100 / MRR@10 of exact
//!    cosine search and of the engine's HNSW path (`candidateK` 100, as a default `retrieve`),
//!    plus embedding throughput on the abstracts and on the (short) queries.
//! 2. **Synthetic 100k**: recall@10 against exact search and single-thread queries/s for two
//!    `ef` settings, on clustered unit vectors (2,000 random centroids, Gaussian spread 0.08, cosine
//!    ≈ 0.55 to the centroid) — a harder and larger set than Cranfield.
//!
//! ```sh
//! cargo run --release -p rcp-bench --bin dense_cranfield
//! cargo run --release -p rcp-bench --bin dense_cranfield -- --synthetic 20000 --queries 200
//! ```
//!
//! The model is provisioned as everywhere else (`rcp-dense fetch-model`; `--fetch-model` here
//! fetches it when missing). `RCP_CRANFIELD` overrides the collection directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, evaluate};
use rcp_bench::synthetic::{Rng, clustered};
use rcp_corpus::read_jsonl;
use rcp_dense::ann::{self, Backend, HnswParams};
use rcp_dense::embedder::{Embedder, EmbedderOptions};
use rcp_dense::model::{self, DIMENSION};
use rcp_dense::store::{PlannerOptions, Store, StoreOptions};

#[derive(Debug, Parser)]
#[command(about = "Dense engine: Cranfield quality, HNSW recall and speed, embedding throughput")]
struct Args {
    /// Model directory [default: $RCP_MODEL_DIR or the user cache].
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Fetch the model when it is missing.
    #[arg(long)]
    fetch_model: bool,
    /// Vectors in the synthetic set (0 skips it).
    #[arg(long, default_value_t = 100_000)]
    synthetic: usize,
    /// Queries against the synthetic set.
    #[arg(long, default_value_t = 1_000)]
    queries: usize,
    /// Skip Cranfield and embedding (only the synthetic set).
    #[arg(long)]
    synthetic_only: bool,
    /// Gaussian spread of the synthetic clusters (per dimension, before normalising).
    #[arg(long, default_value_t = 0.08)]
    spread: f32,
    /// The two `ef` settings compared on the synthetic set.
    #[arg(long, num_args = 2, default_values_t = [64, 256])]
    ef: Vec<usize>,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    if args.synthetic_only {
        return synthetic(args.synthetic, args.queries, &args.ef, args.spread);
    }
    let dir = args.model_dir.clone().unwrap_or_else(model::default_dir);
    let files = match model::locate(&dir) {
        Ok(f) => f,
        Err(_) if args.fetch_model => {
            model::fetch(&dir, &mut |m| eprintln!("{m}"))
                .with_context(|| format!("fetch the model into {}", dir.display()))?
                .0
        }
        Err(e) => return Err(e).context("no model (--fetch-model fetches it)"),
    };
    let started = Instant::now();
    let embedder = Embedder::load(&files, EmbedderOptions::default()).context("load the model")?;
    let load_s = started.elapsed().as_secs_f64();

    let cranfield = cranfield_dir();
    let c = Collection::load(&cranfield)
        .with_context(|| format!("load the Cranfield collection in {}", cranfield.display()))?;
    let docs: Vec<_> =
        read_jsonl(&c.corpus).and_then(|docs| docs.collect::<Result<_, _>>()).context("read the Cranfield corpus")?;
    let texts: Vec<String> = docs.iter().map(rcp_dense::passage).collect();
    eprintln!("embedding {} Cranfield abstracts ...", texts.len());
    let t = Instant::now();
    let doc_vecs = embedder.embed(&texts).context("embed the abstracts")?;
    let doc_rate = texts.len() as f64 / t.elapsed().as_secs_f64();
    let query_texts: Vec<&str> = c.queries.iter().map(|(_, q)| q.as_str()).collect();
    let t = Instant::now();
    let query_vecs = embedder.embed(&query_texts).context("embed the queries")?;
    let query_rate = query_texts.len() as f64 / t.elapsed().as_secs_f64();

    // Exact cosine.
    let flat: Vec<f32> = doc_vecs.iter().flatten().copied().collect();
    let ids: Vec<String> = docs.iter().map(|d| d.id.clone().unwrap_or_default()).collect();
    let mut exact_rank = HashMap::new();
    for ((qid, _), q) in c.queries.iter().zip(&query_vecs) {
        let top = ann::exact(&flat, DIMENSION, q, 100, None, &|_| true);
        exact_rank.insert(qid.clone(), top.iter().map(|s| ids[s.slot].clone()).collect::<Vec<_>>());
    }
    let exact = evaluate(&c, &exact_rank);

    // The engine's path: the store with its HNSW graph, candidateK 100.
    let store =
        Store::in_memory(StoreOptions { planner: PlannerOptions::without_full_scan(), ..StoreOptions::default() });
    store.upsert(rcp_bench::embedded::rows(&docs, doc_vecs)).context("store the Cranfield vectors")?;
    let table = store.read();
    let mut hnsw_rank = HashMap::new();
    for ((qid, _), q) in c.queries.iter().zip(&query_vecs) {
        let (top, _) = table.search(q, 100, 100, None, &PlannerOptions::without_full_scan());
        hnsw_rank.insert(qid.clone(), top.iter().filter_map(|s| table.doc(s.slot)).map(|d| d.id.clone()).collect());
    }
    let hnsw = evaluate(&c, &hnsw_rank);
    drop(table);

    println!(
        "\n## Cranfield ({} docs, {} queries), all-MiniLM-L6-v2 int8, max_length 256",
        docs.len(),
        c.queries.len()
    );
    println!("| search | nDCG@10 | Recall@100 | MRR@10 |");
    println!("|---|---|---|---|");
    println!("| exact cosine | {:.3} | {:.3} | {:.3} |", exact.ndcg10, exact.recall100, exact.mrr10);
    let p = HnswParams::default();
    println!(
        "| HNSW (M={}, ef_c={}, ef=100) | {:.3} | {:.3} | {:.3} |",
        p.m, p.ef_construction, hnsw.ndcg10, hnsw.recall100, hnsw.mrr10
    );
    println!(
        "| HNSW vs exact | {:+.2}% | {:+.2}% | {:+.2}% |",
        pct(hnsw.ndcg10, exact.ndcg10),
        pct(hnsw.recall100, exact.recall100),
        pct(hnsw.mrr10, exact.mrr10)
    );
    println!("\n## Embedding (2 cores; model load {load_s:.2} s)");
    println!("| input | docs/s |");
    println!("|---|---|");
    println!("| Cranfield abstracts (~180 tokens) | {doc_rate:.1} |");
    println!("| Cranfield queries (~15 tokens) | {query_rate:.1} |");

    if args.synthetic > 0 {
        synthetic(args.synthetic, args.queries, &args.ef, args.spread)?;
    }
    println!("\ncommand: cargo run --release -p rcp-bench --bin dense_cranfield");
    Ok(())
}

fn pct(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { (a - b) / b * 100.0 }
}

fn synthetic(n: usize, nq: usize, efs: &[usize], spread: f32) -> anyhow::Result<()> {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let centroids: Vec<Vec<f32>> = (0..2000).map(|_| rng.unit(DIMENSION)).collect();
    let data = clustered(&mut rng, &centroids, n, spread);
    let queries = clustered(&mut rng, &centroids, nq, spread);
    eprintln!("building HNSW over {n} synthetic vectors ...");
    let t = Instant::now();
    let params = HnswParams::default();
    let graph = ann::build(Backend::default(), params, &data, DIMENSION, |_| true)
        .with_context(|| format!("build HNSW over {n} synthetic vectors"))?;
    let build_s = t.elapsed().as_secs_f64();
    eprintln!("exact ground truth for {nq} queries ...");
    let truth: Vec<Vec<usize>> = std::thread::scope(|s| {
        let half = nq.div_ceil(2);
        let parts: Vec<_> = queries
            .chunks(half * DIMENSION)
            .map(|qs| {
                let data = &data;
                s.spawn(move || {
                    qs.chunks_exact(DIMENSION)
                        .map(|q| ann::exact(data, DIMENSION, q, 10, None, &|_| true).iter().map(|x| x.slot).collect())
                        .collect::<Vec<Vec<usize>>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    let t = Instant::now();
    for q in queries.chunks_exact(DIMENSION).take(50) {
        std::hint::black_box(ann::exact(&data, DIMENSION, q, 10, None, &|_| true));
    }
    let exact_qps = 50.0 / t.elapsed().as_secs_f64();
    println!(
        "\n## Synthetic: {n} clustered unit vectors (384 dims), {nq} queries, M={}, ef_c={}, build {build_s:.1} s",
        params.m, params.ef_construction
    );
    println!("| search | recall@10 vs exact | queries/s (1 thread) |");
    println!("|---|---|---|");
    println!("| exact scan | 1.0000 | {exact_qps:.0} |");
    for &ef in efs {
        let t = Instant::now();
        let found: Vec<Vec<usize>> = queries
            .chunks_exact(DIMENSION)
            .map(|q| graph.search(q, 10, ef, None).iter().map(|x| x.slot).collect())
            .collect();
        let qps = nq as f64 / t.elapsed().as_secs_f64();
        let hits: usize = found.iter().zip(&truth).map(|(f, t)| t.iter().filter(|s| f.contains(s)).count()).sum();
        println!("| HNSW ef={ef} | {:.4} | {qps:.0} |", hits as f64 / (nq * 10) as f64);
    }
    Ok(())
}
