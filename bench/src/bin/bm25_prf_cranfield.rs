//! `bm25_prf_cranfield`: does RM3 query rewriting help `rcp-bm25` on Cranfield?
//!
//! Cranfield (1,400 documents, all 225 judged queries, graded judgements) is indexed
//! in-process, then every query is ranked four ways and scored side by side (nDCG@10,
//! Recall@100, MRR@10):
//!
//! 1. the original query;
//! 2. `retrieve.rewrite: "rewrite"`: the RM3-weighted expansion, ranked inside the engine;
//! 3. the `query/transform` `rewrite` text sent back as a plain query (what a client that
//!    transforms first and retrieves second gets: the added words at the original words'
//!    weight);
//! 4. `retrieve.rewrite: "multi-query"`: three variants fused by reciprocal rank.
//!
//! Per-query wins and losses against the original are counted for the RM3 ranking. With
//! `--sweep`, RM3 is also scored over a grid of fbDocs, fbTerms and originalQueryWeight.
//!
//! ```sh
//! cargo run -p rcp-bench --bin bm25_prf_cranfield            # debug is fine: quality only
//! cargo run -p rcp-bench --bin bm25_prf_cranfield -- --sweep
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate, ndcg_at};
use rcp_bench::scratch::Cleanup;
use rcp_bm25::engine::{Engine, EngineOptions, Hooks, Rewrite, Rm3, SearchRequest, TrustLevel};

#[derive(Debug, Parser)]
#[command(name = "bm25_prf_cranfield", about = "nDCG@10 of rcp-bm25 on Cranfield: original vs RM3-rewritten queries")]
struct Args {
    /// The Cranfield directory (BEIR layout); default `RCP_CRANFIELD` or ../shared/data/cranfield.
    #[arg(long)]
    cranfield: Option<PathBuf>,

    /// RM3 feedback documents.
    #[arg(long, default_value_t = Rm3::default().fb_docs)]
    fb_docs: usize,

    /// RM3 expansion terms.
    #[arg(long, default_value_t = Rm3::default().fb_terms)]
    fb_terms: usize,

    /// RM3 original query weight.
    #[arg(long, default_value_t = Rm3::default().original_query_weight)]
    original_query_weight: f32,

    /// Also score RM3 over a grid of parameters.
    #[arg(long)]
    sweep: bool,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

/// Ranked ids per query id.
type Rankings = HashMap<String, Vec<String>>;

fn run(args: &Args) -> anyhow::Result<()> {
    let dir = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let collection =
        Collection::load(&dir).with_context(|| format!("load the Cranfield collection in {}", dir.display()))?;
    let work = std::env::temp_dir().join(format!("bm25-prf-cranfield-{}", std::process::id()));
    let _cleanup = Cleanup(work.clone());
    // One indexing thread: the same segment layout on every run, so ties break the same way.
    let options = EngineOptions { writer_threads: 1, writer_heap: 256 << 20, ..EngineOptions::default() };
    let engine = Engine::open(&work, Vec::new(), options).context("open the index")?;
    let docs = rcp_corpus::read_jsonl(&collection.corpus).context("read the Cranfield corpus")?;
    engine.load(docs, TrustLevel::Trusted, "cranfield", true, |_| {}).context("index Cranfield")?;

    let rm3 = Rm3 {
        fb_docs: args.fb_docs,
        fb_terms: args.fb_terms,
        original_query_weight: args.original_query_weight,
        ..Rm3::default()
    };
    let n = collection.queries.len();
    let (original, t_original) = timed(n, || rank(&engine, &collection, None))?;
    let (rewritten, t_rewritten) = timed(n, || rank(&engine, &collection, Some(Rewrite::Rm3(rm3))))?;
    let round_trip = rank_round_trip(&engine, &collection, &rm3)?;
    let (multi, t_multi) = timed(n, || rank(&engine, &collection, Some(Rewrite::MultiQuery { rm3, n: 3 })))?;

    println!();
    println!(
        "rcp-bm25 on Cranfield ({} queries); RM3 fbDocs={} fbTerms={} originalQueryWeight={}",
        collection.queries.len(),
        rm3.fb_docs,
        rm3.fb_terms,
        rm3.original_query_weight
    );
    println!("| ranking                                   | nDCG@10 | Recall@100 | MRR@10 |");
    println!("|-------------------------------------------|---------|------------|--------|");
    let o = evaluate(&collection, &original);
    row("original query", &o);
    row("rewrite: \"rewrite\" (RM3, weighted)", &evaluate(&collection, &rewritten));
    row("transform text sent as a plain query", &evaluate(&collection, &round_trip));
    row("rewrite: \"multi-query\" (3 variants, RRF)", &evaluate(&collection, &multi));
    let (wins, losses) = wins_losses(&collection, &original, &rewritten);
    println!("\nRM3 vs original, per query nDCG@10: {wins} better, {losses} worse, the rest equal");
    println!(
        "time per query (k=100, this build): original {:.2} ms, rewrite {:.2} ms ({:.1}x), multi-query {:.2} ms ({:.1}x)",
        t_original,
        t_rewritten,
        t_rewritten / t_original,
        t_multi,
        t_multi / t_original
    );

    if args.sweep {
        println!("\n| fbDocs | fbTerms | originalQueryWeight | nDCG@10 | Recall@100 |");
        println!("|--------|---------|---------------------|---------|------------|");
        for fb_docs in [3, 5, 10] {
            for fb_terms in [5, 10, 20] {
                for w in [0.5f32, 0.7, 0.9] {
                    let p = Rm3 { fb_docs, fb_terms, original_query_weight: w, ..Rm3::default() };
                    let s = evaluate(&collection, &rank(&engine, &collection, Some(Rewrite::Rm3(p)))?);
                    println!("| {fb_docs:>6} | {fb_terms:>7} | {w:>19} | {:.4} | {:>10.4} |", s.ndcg10, s.recall100);
                }
            }
        }
    }
    let cmd: Vec<String> = std::env::args().collect();
    println!("\ncommand: {}", cmd.join(" "));
    Ok(())
}

/// Runs `f` (one pass over `queries` queries) once; its result and milliseconds per query.
fn timed<T>(queries: usize, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, f64)> {
    let started = Instant::now();
    let out = f()?;
    Ok((out, started.elapsed().as_secs_f64() * 1000.0 / queries.max(1) as f64))
}

fn row(name: &str, s: &Scores) {
    println!("| {name:<41} | {:.4} | {:>10.4} | {:.4} |", s.ndcg10, s.recall100, s.mrr10);
}

/// The top 100 of every query, ranked with `rewrite`.
fn rank(engine: &Engine, c: &Collection, rewrite: Option<Rewrite>) -> anyhow::Result<Rankings> {
    let mut out = HashMap::new();
    for (qid, text) in &c.queries {
        let req = SearchRequest { rewrite, ..SearchRequest::new(text.as_str(), 100) };
        let page = engine.search(&req, &Hooks::default()).with_context(|| format!("query {qid}"))?;
        out.insert(qid.clone(), page.hits.iter().map(|h| h.key()).collect());
    }
    Ok(out)
}

/// The top 100 of every query's `query/transform` text, searched as a plain query.
fn rank_round_trip(engine: &Engine, c: &Collection, rm3: &Rm3) -> anyhow::Result<Rankings> {
    let mut out = HashMap::new();
    for (qid, text) in &c.queries {
        let expanded = engine.expand(text, rm3).with_context(|| format!("expand query {qid}"))?;
        let page = engine
            .search(&SearchRequest::new(expanded.text, 100), &Hooks::default())
            .with_context(|| format!("query {qid}"))?;
        out.insert(qid.clone(), page.hits.iter().map(|h| h.key()).collect());
    }
    Ok(out)
}

/// Queries whose nDCG@10 rises, and falls, from `base` to `other`.
fn wins_losses(c: &Collection, base: &Rankings, other: &Rankings) -> (usize, usize) {
    let (mut wins, mut losses) = (0, 0);
    for (qid, _) in &c.queries {
        let Some(judged) = c.qrels.get(qid) else { continue };
        let empty = Vec::new();
        let a = ndcg_at(base.get(qid).unwrap_or(&empty), judged, 10);
        let b = ndcg_at(other.get(qid).unwrap_or(&empty), judged, 10);
        if b > a + 1e-9 {
            wins += 1;
        } else if b + 1e-9 < a {
            losses += 1;
        }
    }
    (wins, losses)
}
