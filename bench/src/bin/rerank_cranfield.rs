//! `rerank_cranfield`: the retrieval pipeline on Cranfield (225 queries) — BM25 and dense
//! recall, RRF fusion (§16.3), then each `--method` of `rcp-rerank` (the cross-encoder by
//! default; `--method colbert` too) over the fused top `--depth` — with nDCG@10, Recall@100
//! and MRR@10 of each stage, and each method's rerank latency.
//!
//! The engines are separate processes driven over stdio, each indexed first:
//!
//! ```sh
//! rcp-bm25 index --data-dir bm25 ../shared/data/cranfield/corpus.jsonl
//! rcp-dense index --data-dir dense ../shared/data/cranfield/corpus.jsonl
//! rcp-rerank fetch-model
//! target/debug/rerank_cranfield --bm25 "rcp-bm25 serve --data-dir bm25" \
//!     --dense "rcp-dense serve --data-dir dense" --rerank "rcp-rerank serve" \
//!     --method cross-encoder --method colbert
//! ```

use std::collections::HashMap;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate, percentile};
use rcp_bench::stdio::StdioServer;
use rcp_protocol::Hit;
use rcp_protocol::fusion::{EngineList, FusionMethod, fuse_or_fallback};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(about = "Cranfield: BM25 + dense → RRF → cross-encoder, nDCG@10 of each stage")]
struct Args {
    /// The BM25 engine's command line.
    #[arg(long, value_name = "COMMAND")]
    bm25: String,
    /// The dense engine's command line.
    #[arg(long, value_name = "COMMAND")]
    dense: String,
    /// The reranking engine's command line.
    #[arg(long, value_name = "COMMAND")]
    rerank: String,
    /// The rerank methods measured, each a stage (repeatable).
    #[arg(long = "method", value_name = "METHOD", default_value = "cross-encoder")]
    methods: Vec<String>,
    /// Hits asked of each engine, fused, and reranked.
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// Evaluate the first N queries only.
    #[arg(long, value_name = "N")]
    queries: Option<usize>,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn spawn(command_line: &str) -> anyhow::Result<StdioServer> {
    let mut parts = command_line.split_whitespace();
    let program = parts.next().context("empty command")?;
    let mut cmd = Command::new(program);
    cmd.args(parts).stderr(Stdio::null());
    StdioServer::spawn(cmd)
}

fn hits(result: &Value) -> anyhow::Result<Vec<Hit>> {
    serde_json::from_value(result["hits"].clone()).context("hits")
}

fn run(args: &Args) -> anyhow::Result<()> {
    let mut c = Collection::load(&cranfield_dir())?;
    if let Some(n) = args.queries {
        c = c.limit(n);
    }
    let texts: HashMap<String, String> =
        rcp_corpus::read_jsonl(&c.corpus)?.filter_map(Result::ok).filter_map(|d| Some((d.id?, d.text))).collect();
    let mut bm25 = spawn(&args.bm25)?;
    let mut dense = spawn(&args.dense)?;
    let mut reranker = spawn(&args.rerank)?;
    let mut stages: Vec<String> = ["bm25", "dense", "rrf"].map(String::from).to_vec();
    stages.extend(args.methods.iter().map(|m| format!("rrf → {m}")));
    let mut rankings: Vec<HashMap<String, Vec<String>>> = vec![HashMap::new(); stages.len()];
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); args.methods.len()];
    let started = Instant::now();
    for (qid, query) in &c.queries {
        let ask = json!({"query": query, "k": args.depth});
        let lists = [
            EngineList::new("bm25", hits(&bm25.call("retrieve", ask.clone())?)?),
            EngineList::new("dense", hits(&dense.call("retrieve", ask)?)?),
        ];
        let fused = fuse_or_fallback(&lists, &FusionMethod::rrf(), args.depth)?.hits;
        let ids: Vec<String> = fused.iter().map(Hit::key).collect();
        let passages = ids
            .iter()
            .map(|id| texts.get(id).map(String::as_str).with_context(|| format!("hit {id} is not in the corpus")))
            .collect::<anyhow::Result<Vec<&str>>>()?;
        for (m, method) in args.methods.iter().enumerate() {
            let asked = Instant::now();
            let r = reranker.call("rerank", json!({"query": query, "passages": passages, "method": method}))?;
            latencies[m].push(asked.elapsed().as_secs_f64() * 1e3);
            let order: Vec<usize> = serde_json::from_value(r["order"].clone()).context("order")?;
            rankings[3 + m].insert(qid.clone(), order.iter().filter_map(|&i| ids.get(i).cloned()).collect());
        }
        rankings[0].insert(qid.clone(), lists[0].hits.iter().map(Hit::key).collect());
        rankings[1].insert(qid.clone(), lists[1].hits.iter().map(Hit::key).collect());
        rankings[2].insert(qid.clone(), ids);
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("Cranfield ({} queries), depth {}", c.queries.len(), args.depth);
    println!("{:<24} {:>8} {:>11} {:>8}", "", "nDCG@10", "Recall@100", "MRR@10");
    for (stage, ranking) in stages.iter().zip(&rankings) {
        let s: Scores = evaluate(&c, ranking);
        println!("{stage:<24} {:>8.4} {:>11.4} {:>8.4}", s.ndcg10, s.recall100, s.mrr10);
    }
    for (method, mut latencies) in args.methods.iter().zip(latencies) {
        let passages: f64 = latencies.len() as f64 * args.depth as f64;
        let total: f64 = latencies.iter().sum::<f64>() / 1e3;
        println!(
            "{method} rerank of {} candidates: p50 {:.0} ms, p99 {:.0} ms; {:.1} passages/s",
            args.depth,
            percentile(&mut latencies.clone(), 50.0),
            percentile(&mut latencies, 99.0),
            passages / total.max(1e-9),
        );
    }
    println!("whole run {elapsed:.0} s");
    for s in [bm25, dense, reranker] {
        s.shutdown()?;
    }
    Ok(())
}
