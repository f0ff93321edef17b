//! `graph_cost`: what the dense engine's document graph (§7.9) costs and what `local` gives.
//!
//! 1. **Cranfield** (1,400 abstracts, 225 queries): build time and the graph's size, then
//!    nDCG@10 of `retrieve` (exact cosine top 10) against `graph op:"local"` (personalised
//!    PageRank from the same query's nearest documents) for all 225 queries, and the latency
//!    percentiles of `local` and `neighbors` (the model's query encoding excluded: both ops
//!    get the query vector).
//! 2. **Synthetic** (100k clustered unit vectors, no text): build time, resident memory added
//!    by the graph, community detection time, `local` and `neighbors` latency.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin graph_cost
//! target/release/graph_cost                 # Cranfield and 100k synthetic
//! target/release/graph_cost --synthetic 0   # Cranfield only
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{evaluate, percentile};
use rcp_bench::synthetic::{Rng, clustered};
use rcp_dense::graph::ops::{DEFAULT_K, Op};
use rcp_dense::graph::{GraphIndex, GraphOptions};
use rcp_dense::model::DIMENSION;
use rcp_dense::store::{Store, StoreOptions, stored};
use rcp_dense::wal::Origin;
use rcp_wire::graph::GraphParams;

#[derive(Debug, Parser)]
#[command(about = "Dense engine's document graph: build cost, op latency, Cranfield nDCG@10 of local vs retrieve")]
struct Args {
    /// Model directory [default: $RCP_MODEL_DIR or the user cache].
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Vectors in the synthetic set (0 skips it).
    #[arg(long, default_value_t = 100_000)]
    synthetic: usize,
    /// Queries timed on the synthetic set.
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Neighbours per node.
    #[arg(long, default_value_t = GraphOptions::default().k)]
    k: usize,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let options = GraphOptions { k: args.k, max_degree: args.k * 2 + 4, ..GraphOptions::default() };
    cranfield(args, options)?;
    if args.synthetic > 0 {
        synthetic(args, options)?;
    }
    Ok(())
}

/// Resident set size of this process, in MiB.
fn rss_mib() -> f64 {
    rcp_bench::proc::status(std::process::id()).rss_kb as f64 / 1024.0
}

/// Opens the graph over `store` and reports its build.
fn build(label: &str, store: &Arc<Store>, options: GraphOptions) -> anyhow::Result<GraphIndex> {
    let rss = rss_mib();
    let t = Instant::now();
    let (index, _) = GraphIndex::open(Arc::clone(store), None, options).context("build the graph")?;
    let build_s = t.elapsed().as_secs_f64();
    let (nodes, edges) = {
        let g = index.read();
        (g.len(), g.edge_count())
    };
    let t = Instant::now();
    let c = index.communities();
    let louvain_s = t.elapsed().as_secs_f64();
    let counts: Vec<usize> = c.levels.iter().map(Vec::len).collect();
    let (graph_bytes, community_bytes) = index.heap_bytes();
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "{label}: graph of {nodes} nodes, {edges} edges built in {build_s:.2} s (+{:.0} MiB RSS); \
         communities {counts:?} by level in {louvain_s:.2} s; heap: graph {:.1} MiB, communities {:.1} MiB",
        rss_mib() - rss,
        mib(graph_bytes),
        mib(community_bytes),
    );
    Ok(index)
}

/// Runs `op` for each query vector; returns the results' hit ids and the latencies (ms).
fn time_op(index: &GraphIndex, op: &str, queries: &[Vec<f32>], k: usize) -> (Vec<Vec<String>>, Vec<f64>) {
    let params = GraphParams { op: op.to_owned(), ..Default::default() };
    let mut ids = Vec::with_capacity(queries.len());
    let mut ms = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let r = Op { index, params: &params, k, query: Some(q), ef: 64, source: "bench" }.run();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        let r = r.unwrap_or_default();
        let hit_ids = r.hits.unwrap_or_default().into_iter().map(|h| h.id.to_string().trim_matches('"').to_owned());
        ids.push(hit_ids.collect());
    }
    (ids, ms)
}

fn latency(label: &str, ms: &mut [f64]) {
    println!(
        "{label}: p50 {:.3} ms, p99 {:.3} ms over {} queries",
        percentile(ms, 50.0),
        percentile(ms, 99.0),
        ms.len()
    );
}

fn cranfield(args: &Args, options: GraphOptions) -> anyhow::Result<()> {
    let rcp_bench::embedded::Embedded { collection: c, store, queries, .. } =
        rcp_bench::embedded::cranfield(args.model_dir.clone())?;
    let index = build("cranfield", &store, options)?;

    let mut retrieve = HashMap::new();
    {
        let table = store.read();
        for ((qid, _), q) in c.queries.iter().zip(&queries) {
            let (top, _) = table.search(q, DEFAULT_K, 64, None, &store.options().planner);
            retrieve.insert(qid.clone(), top.iter().filter_map(|s| table.doc(s.slot)).map(|d| d.id.clone()).collect());
        }
    }
    let (local_ids, mut local_ms) = time_op(&index, "local", &queries, DEFAULT_K);
    let local: HashMap<String, Vec<String>> = c.queries.iter().map(|(q, _)| q.clone()).zip(local_ids).collect();
    let (_, mut neighbors_ms) = time_op(&index, "neighbors", &queries, DEFAULT_K);
    let r = evaluate(&c, &retrieve);
    let l = evaluate(&c, &local);
    println!(
        "cranfield nDCG@10 over {} queries: retrieve {:.4}, graph local {:.4}",
        c.queries.len(),
        r.ndcg10,
        l.ndcg10
    );
    latency("cranfield local", &mut local_ms);
    latency("cranfield neighbors", &mut neighbors_ms);
    Ok(())
}

fn synthetic(args: &Args, options: GraphOptions) -> anyhow::Result<()> {
    let mut rng = Rng(0x6A09_E667_F3BC_C909);
    let centroids: Vec<Vec<f32>> = (0..2_000).map(|_| rng.unit(DIMENSION)).collect();
    let flat = clustered(&mut rng, &centroids, args.synthetic, 0.08);
    let store = Arc::new(Store::in_memory(StoreOptions::default()));
    let batch = flat
        .chunks_exact(DIMENSION)
        .enumerate()
        .map(|(i, v)| (stored(format!("s{i}"), String::new(), Default::default(), Origin::Corpus), v.to_vec()))
        .collect();
    eprintln!("indexing {} synthetic vectors ...", args.synthetic);
    store.upsert(batch).context("store the synthetic vectors")?;
    let index = build(&format!("synthetic {}", args.synthetic), &store, options)?;
    let queries = clustered(&mut rng, &centroids, args.queries, 0.08);
    let queries: Vec<Vec<f32>> = queries.chunks_exact(DIMENSION).map(<[f32]>::to_vec).collect();
    let (_, mut local_ms) = time_op(&index, "local", &queries, DEFAULT_K);
    let (_, mut neighbors_ms) = time_op(&index, "neighbors", &queries, DEFAULT_K);
    latency("synthetic local", &mut local_ms);
    latency("synthetic neighbors", &mut neighbors_ms);
    Ok(())
}
