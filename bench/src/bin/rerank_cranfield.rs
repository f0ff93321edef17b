//! `rerank_cranfield`: the retrieval pipeline on Cranfield (225 queries) — BM25 and dense
//! recall, RRF fusion (§16.3), then each `--method` of `rcp-rerank` (the cross-encoder by
//! default; `--method colbert` too) over the fused top `--depth` — with nDCG@10, Recall@100
//! and MRR@10 of each stage, and each method's rerank latency.
//!
//! With `--inline LABEL=COMMAND` (repeatable) an engine started with its own reranker
//! (`serve --rerank cross-encoder`, `retrieve.rerankBuiltin`) is asked `retrieve` with
//! `k = --depth` for each query, which the framework's funnel reranks (`candidateK` and `topN`
//! the depth); its row and its `retrieve` latency (recall + rerank, as a client sees it) are
//! reported. The pipeline's engines (`--bm25`, `--dense`, `--rerank`) may then be left out.
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
//! target/debug/rerank_cranfield \
//!     --inline "dense+ce=rcp-dense serve --data-dir dense --rerank cross-encoder"
//! ```

use std::collections::HashMap;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate, percentile};
use rcp_bench::stdio::StdioServer;
use rcp_wire::Hit;
use rcp_wire::fusion::{EngineList, FusionMethod, fuse_or_fallback};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(about = "Cranfield: BM25 + dense → RRF → cross-encoder, nDCG@10 of each stage")]
struct Args {
    /// The BM25 engine's command line (with `--dense`: the fused pipeline runs).
    #[arg(long, value_name = "COMMAND", requires = "dense")]
    bm25: Option<String>,
    /// The dense engine's command line.
    #[arg(long, value_name = "COMMAND", requires = "bm25")]
    dense: Option<String>,
    /// The reranking engine's command line (needs the pipeline).
    #[arg(long, value_name = "COMMAND", requires = "bm25")]
    rerank: Option<String>,
    /// The rerank methods measured, each a stage (repeatable).
    #[arg(long = "method", value_name = "METHOD", default_value = "cross-encoder")]
    methods: Vec<String>,
    /// `LABEL=COMMAND`: an engine serving `retrieve` with its own rerank stage (repeatable).
    #[arg(long, value_name = "LABEL=COMMAND", value_parser = labelled)]
    inline: Vec<(String, String)>,
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

fn labelled(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((label, command)) if !label.is_empty() && !command.trim().is_empty() => {
            Ok((label.to_owned(), command.to_owned()))
        }
        _ => Err(format!("'{s}': expected LABEL=COMMAND")),
    }
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

/// The engines of the fused pipeline: BM25, dense, and the reranker when given.
struct Pipeline {
    bm25: StdioServer,
    dense: StdioServer,
    reranker: Option<StdioServer>,
}

fn run(args: &Args) -> anyhow::Result<()> {
    let mut c = Collection::load(&cranfield_dir())?;
    if let Some(n) = args.queries {
        c = c.limit(n);
    }
    let texts: HashMap<String, String> =
        rcp_corpus::read_jsonl(&c.corpus)?.filter_map(Result::ok).filter_map(|d| Some((d.id?, d.text))).collect();
    let mut pipeline = match (&args.bm25, &args.dense) {
        (Some(b), Some(d)) => Some(Pipeline {
            bm25: spawn(b)?,
            dense: spawn(d)?,
            reranker: args.rerank.as_deref().map(spawn).transpose()?,
        }),
        _ => None,
    };
    let methods: &[String] = match &pipeline {
        Some(Pipeline { reranker: Some(_), .. }) => &args.methods,
        _ => &[],
    };
    let mut inline = args.inline.iter().map(|(_, cmd)| spawn(cmd)).collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(pipeline.is_some() || !inline.is_empty(), "nothing to run: give --bm25 and --dense, or --inline");
    let mut stages: Vec<String> = Vec::new();
    if pipeline.is_some() {
        stages.extend(["bm25", "dense", "rrf"].map(String::from));
        stages.extend(methods.iter().map(|m| format!("rrf → {m}")));
    }
    let first_inline = stages.len();
    stages.extend(args.inline.iter().map(|(label, _)| label.clone()));
    let mut rankings: Vec<HashMap<String, Vec<String>>> = vec![HashMap::new(); stages.len()];
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); methods.len() + inline.len()];
    // Passages scored per stage: the depth for the pipeline's, `usage.reranked` for inline ones.
    let mut scored: Vec<u64> = vec![0; methods.len() + inline.len()];
    let started = Instant::now();
    for (qid, query) in &c.queries {
        let ask = json!({"query": query, "k": args.depth});
        if let Some(p) = pipeline.as_mut() {
            let lists = [
                EngineList::new("bm25", hits(&p.bm25.call("retrieve", ask.clone())?)?),
                EngineList::new("dense", hits(&p.dense.call("retrieve", ask.clone())?)?),
            ];
            let fused = fuse_or_fallback(&lists, &FusionMethod::rrf(), args.depth)?.hits;
            let ids: Vec<String> = fused.iter().map(Hit::key).collect();
            let passages = ids
                .iter()
                .map(|id| texts.get(id).map(String::as_str).with_context(|| format!("hit {id} is not in the corpus")))
                .collect::<anyhow::Result<Vec<&str>>>()?;
            if let Some(reranker) = p.reranker.as_mut() {
                for (m, method) in methods.iter().enumerate() {
                    let asked = Instant::now();
                    let r = reranker.call("rerank", json!({"query": query, "passages": passages, "method": method}))?;
                    latencies[m].push(asked.elapsed().as_secs_f64() * 1e3);
                    scored[m] += passages.len() as u64;
                    let order: Vec<usize> = serde_json::from_value(r["order"].clone()).context("order")?;
                    rankings[3 + m].insert(qid.clone(), order.iter().filter_map(|&i| ids.get(i).cloned()).collect());
                }
            }
            rankings[0].insert(qid.clone(), lists[0].hits.iter().map(Hit::key).collect());
            rankings[1].insert(qid.clone(), lists[1].hits.iter().map(Hit::key).collect());
            rankings[2].insert(qid.clone(), ids);
        }
        for (i, engine) in inline.iter_mut().enumerate() {
            let asked = Instant::now();
            let r = engine.call("retrieve", ask.clone())?;
            latencies[methods.len() + i].push(asked.elapsed().as_secs_f64() * 1e3);
            let reranked = r["usage"]["reranked"].as_u64().filter(|&n| n > 0).with_context(|| {
                format!(
                    "{}: the answer reports no rerank (usage.reranked); is the engine started with --rerank?",
                    args.inline[i].0
                )
            })?;
            scored[methods.len() + i] += reranked;
            rankings[first_inline + i].insert(qid.clone(), hits(&r)?.iter().map(Hit::key).collect());
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("Cranfield ({} queries), depth {}", c.queries.len(), args.depth);
    println!("{:<24} {:>8} {:>11} {:>8}", "", "nDCG@10", "Recall@100", "MRR@10");
    for (stage, ranking) in stages.iter().zip(&rankings) {
        let s: Scores = evaluate(&c, ranking);
        println!("{stage:<24} {:>8.4} {:>11.4} {:>8.4}", s.ndcg10, s.recall100, s.mrr10);
    }
    let labels =
        methods.iter().map(|m| format!("{m} rerank")).chain(args.inline.iter().map(|(l, _)| format!("{l} retrieve")));
    for ((label, mut latencies), passages) in labels.zip(latencies).zip(scored) {
        let total: f64 = latencies.iter().sum::<f64>() / 1e3;
        println!(
            "{label}, {:.0} passages reranked per query: p50 {:.0} ms, p99 {:.0} ms; {:.1} passages/s",
            passages as f64 / latencies.len().max(1) as f64,
            percentile(&mut latencies.clone(), 50.0),
            percentile(&mut latencies, 99.0),
            passages as f64 / total.max(1e-9),
        );
    }
    println!("whole run {elapsed:.0} s");
    if let Some(p) = pipeline {
        p.bm25.shutdown()?;
        p.dense.shutdown()?;
        if let Some(r) = p.reranker {
            r.shutdown()?;
        }
    }
    for s in inline {
        s.shutdown()?;
    }
    Ok(())
}
