//! `rerank_cranfield`: the retrieval pipeline on Cranfield (225 queries) — BM25 and dense
//! recall, RRF fusion (§16.3), then each `--method` of `rcp-rerank` (the cross-encoder by
//! default; `--method colbert` too) over the fused top `--depth` — with nDCG@10, Recall@100
//! and MRR@10 of each stage, and each method's rerank latency.
//!
//! Then, for each method, the rerank stage's fusion table: for each `--first-stage` list
//! (`rrf` by default; `bm25`, `dense` too) and each `--depths` prefix of it (10, 20, 50, 100),
//! nDCG@10 of the first stage alone, of the reranker alone, and of the reranker's ranking
//! merged with the first stage's (`rerank.fusion`: RRF k = 60 of the two ranks; a convex
//! combination of min-max normalised scores at α = 0.3, 0.5, 0.7), with how many queries each
//! ranks worse / better than the first stage. The merging is the framework's own code
//! (`Funnel::rrf_scores`, `Funnel::convex_scores`). A pair's score does not depend on the
//! list it came in, so each (query, passage) is scored once, at the deepest prefix;
//! `--scores FILE` keeps those scores (JSONL) across runs, so a rerun scores only what is new.
//!
//! With `--inline LABEL=COMMAND` (repeatable) an engine started with its own reranker
//! (`serve --rerank cross-encoder`, `retrieve.rerankBuiltin`) is asked `retrieve` with
//! `k = --depth` for each query, which the framework's funnel reranks (`candidateK` and `topN`
//! the depth), or with `k = --inline-k`, which leaves `candidateK` and `topN` to the engine's
//! defaults; its row and its `retrieve` latency (recall + rerank, as a client sees it) are
//! reported. The pipeline's engines (`--bm25`, `--dense`, `--rerank`) may then be left out.
//!
//! `--collection DIR` runs another BEIR collection (queries.jsonl, corpus.jsonl and
//! qrels/test.tsv or qrels.tsv) instead of Cranfield, e.g. one held back from tuning.
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
//! target/debug/rerank_cranfield --bm25 "rcp-bm25 serve --data-dir bm25" \
//!     --dense "rcp-dense serve --data-dir dense" --rerank "rcp-rerank serve --method cross-encoder" \
//!     --first-stage rrf --first-stage bm25 --first-stage dense --scores ce-scores.jsonl
//! target/debug/rerank_cranfield \
//!     --inline "dense+ce=rcp-dense serve --data-dir dense --rerank cross-encoder"
//! ```

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::ndcg_at;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate, percentile};
use rcp_bench::stdio::StdioServer;
use rcp_server::Funnel;
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
    /// The `k` asked of each `--inline` engine, which then reranks as many candidates as its
    /// own defaults say (`candidateK`, `rerank.topN`) [default: `--depth`, and `candidateK`
    /// and `rerank.topN` with it].
    #[arg(long, value_name = "K")]
    inline_k: Option<usize>,
    /// Evaluate the first N queries only.
    #[arg(long, value_name = "N")]
    queries: Option<usize>,
    /// The candidate depths of the fusion table (prefixes of the first stage, at most `--depth`).
    #[arg(long, value_delimiter = ',', default_value = "10,20,50,100")]
    depths: Vec<usize>,
    /// The first stages of the fusion table (repeatable): `rrf` (of BM25 and dense), `bm25`,
    /// `dense`. Every passage of their top `--depth` is scored.
    #[arg(long = "first-stage", value_name = "LIST", default_value = "rrf", value_parser = ["rrf", "bm25", "dense"])]
    first_stages: Vec<String>,
    /// A JSONL file of reranker scores (`{"method","query","doc","score"}`), read first and
    /// appended to: pairs found there are not scored again.
    #[arg(long, value_name = "FILE")]
    scores: Option<PathBuf>,
    /// Another BEIR collection instead of Cranfield (e.g. a held-back one; the engines must
    /// hold its corpus) [default: Cranfield, or $RCP_CRANFIELD].
    #[arg(long, value_name = "DIR")]
    collection: Option<PathBuf>,
}

/// The rankings of the fusion table, one per cell: (method, first stage, configuration,
/// depth) → query id → ranked ids.
type Cells = HashMap<(usize, usize, usize, usize), HashMap<String, Vec<String>>>;

/// The configurations of the fusion table, in row order.
const CONFIGURATIONS: [&str; 6] = [
    "first stage alone",
    "reranker alone",
    "fused: RRF k=60 of ranks",
    "fused: convex α=0.3",
    "fused: convex α=0.5",
    "fused: convex α=0.7",
];

/// The ranking of `ids` (first-stage order, first-stage `first` scores, reranker `rerank`
/// scores) under configuration `c` of [`CONFIGURATIONS`]; equal scores keep first-stage order.
fn configured(c: usize, ids: &[String], first: &[f64], rerank: &[f64]) -> Vec<String> {
    let merged = match c {
        0 => return ids.to_vec(),
        1 => rerank.to_vec(),
        2 => Funnel::rrf_scores(Funnel::RRF_K, rerank),
        _ => Funnel::convex_scores([0.3, 0.5, 0.7][c - 3], first, rerank),
    };
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| merged[b].total_cmp(&merged[a]));
    order.into_iter().map(|i| ids[i].clone()).collect()
}

/// Reranker scores by (method, query id, doc id), optionally backed by a JSONL file.
struct ScoreCache {
    scores: HashMap<(String, String, String), f64>,
    file: Option<std::fs::File>,
}

impl ScoreCache {
    fn open(path: Option<&PathBuf>) -> anyhow::Result<Self> {
        let mut scores = HashMap::new();
        let Some(path) = path else { return Ok(Self { scores, file: None }) };
        if path.exists() {
            let f = std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("{}", path.display()))?);
            for line in f.lines() {
                let v: Value = serde_json::from_str(&line?).context("a --scores line")?;
                let field = |k: &str| v[k].as_str().map(str::to_owned).with_context(|| format!("--scores: no {k}"));
                let score = v["score"].as_f64().context("--scores: no score")?;
                scores.insert((field("method")?, field("query")?, field("doc")?), score);
            }
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { scores, file: Some(file) })
    }

    fn get(&self, method: &str, query: &str, doc: &str) -> Option<f64> {
        self.scores.get(&(method.to_owned(), query.to_owned(), doc.to_owned())).copied()
    }

    fn put(&mut self, method: &str, query: &str, doc: &str, score: f64) -> anyhow::Result<()> {
        if let Some(f) = self.file.as_mut() {
            writeln!(f, "{}", json!({"method": method, "query": query, "doc": doc, "score": score}))?;
        }
        self.scores.insert((method.to_owned(), query.to_owned(), doc.to_owned()), score);
        Ok(())
    }
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
    let dir = args.collection.clone().unwrap_or_else(cranfield_dir);
    let mut c = Collection::load(&dir)?;
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
    let depths: Vec<usize> = args.depths.iter().copied().filter(|&d| d > 0 && d <= args.depth).collect();
    let mut cells: Cells = HashMap::new();
    let mut cache = ScoreCache::open(args.scores.as_ref())?;
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
            // The first stages of the fusion table: ids and first-stage scores, best first.
            let listed = |name: &str| -> Vec<&Hit> {
                match name {
                    "bm25" => lists[0].hits.iter().collect(),
                    "dense" => lists[1].hits.iter().collect(),
                    _ => fused.iter().collect(),
                }
            };
            if let Some(reranker) = p.reranker.as_mut() {
                for (m, method) in methods.iter().enumerate() {
                    // Every passage of the fused list and of each first stage, scored once.
                    let mut wanted: Vec<String> = ids.clone();
                    for fs in &args.first_stages {
                        wanted.extend(listed(fs).iter().map(|h| h.key()));
                    }
                    wanted.sort();
                    wanted.dedup();
                    wanted.retain(|id| cache.get(method, qid, id).is_none());
                    if !wanted.is_empty() {
                        let texts = wanted
                            .iter()
                            .map(|id| {
                                texts
                                    .get(id)
                                    .map(String::as_str)
                                    .with_context(|| format!("hit {id} is not in the corpus"))
                            })
                            .collect::<anyhow::Result<Vec<&str>>>()?;
                        let asked = Instant::now();
                        let r =
                            reranker.call("rerank", json!({"query": query, "passages": texts, "method": method}))?;
                        latencies[m].push(asked.elapsed().as_secs_f64() * 1e3);
                        scored[m] += wanted.len() as u64;
                        let got: Vec<f64> = serde_json::from_value(r["scores"].clone()).context("scores")?;
                        anyhow::ensure!(
                            got.len() == wanted.len(),
                            "{} scores for {} passages",
                            got.len(),
                            wanted.len()
                        );
                        for (id, score) in wanted.iter().zip(got) {
                            cache.put(method, qid, id, score)?;
                        }
                    }
                    let score = |id: &String| cache.get(method, qid, id).unwrap_or(f64::NAN);
                    let rerank: Vec<f64> = ids.iter().map(score).collect();
                    rankings[3 + m].insert(qid.clone(), configured(1, &ids, &rerank, &rerank));
                    for (f, fs) in args.first_stages.iter().enumerate() {
                        let list = listed(fs);
                        for (d, &depth) in depths.iter().enumerate() {
                            let head = &list[..depth.min(list.len())];
                            let ids: Vec<String> = head.iter().map(|h| h.key()).collect();
                            let first: Vec<f64> = head.iter().map(|h| h.score).collect();
                            let rerank: Vec<f64> = ids.iter().map(score).collect();
                            for c in 0..CONFIGURATIONS.len() {
                                cells
                                    .entry((m, f, c, d))
                                    .or_default()
                                    .insert(qid.clone(), configured(c, &ids, &first, &rerank));
                            }
                        }
                    }
                }
            }
            rankings[0].insert(qid.clone(), lists[0].hits.iter().map(Hit::key).collect());
            rankings[1].insert(qid.clone(), lists[1].hits.iter().map(Hit::key).collect());
            rankings[2].insert(qid.clone(), ids);
        }
        for (i, engine) in inline.iter_mut().enumerate() {
            let ask = match args.inline_k {
                Some(k) => json!({"query": query, "k": k}),
                None => ask.clone(),
            };
            let asked = Instant::now();
            let r = engine.call("retrieve", ask)?;
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
    let name = if args.collection.is_some() { dir.display().to_string() } else { "Cranfield".to_owned() };
    println!("{name} ({} queries), depth {}", c.queries.len(), args.depth);
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
            "{label}, {:.0} passages scored per call: p50 {:.0} ms, p99 {:.0} ms; {:.1} passages/s",
            passages as f64 / latencies.len().max(1) as f64,
            percentile(&mut latencies.clone(), 50.0),
            percentile(&mut latencies, 99.0),
            passages as f64 / total.max(1e-9),
        );
    }
    for (m, method) in methods.iter().enumerate() {
        for (f, fs) in args.first_stages.iter().enumerate() {
            print_fusion_table(&c, &cells, (m, method), (f, fs), &depths);
        }
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

/// One fusion table (method `m` over first stage `f`) as Markdown: nDCG@10 at each depth, and
/// how many queries rank worse / better (nDCG@10) than the first stage alone at that depth.
fn print_fusion_table(
    c: &Collection,
    cells: &Cells,
    (m, method): (usize, &str),
    (f, fs): (usize, &str),
    depths: &[usize],
) {
    let empty = HashMap::new();
    let ndcg = |cell: &HashMap<String, Vec<String>>, qid: &str| {
        let ranked = cell.get(qid).map(Vec::as_slice).unwrap_or(&[]);
        ndcg_at(ranked, c.qrels.get(qid).unwrap_or(&empty), 10)
    };
    println!();
    println!("{method} over the {fs} list: nDCG@10 (queries worse / better than the first stage alone)");
    println!();
    let header: Vec<String> = depths.iter().map(|d| format!("depth {d}")).collect();
    println!("| | {} |", header.join(" | "));
    println!("|---|{}|", vec!["---:"; depths.len()].join("|"));
    for (i, name) in CONFIGURATIONS.iter().enumerate() {
        let mut row = Vec::new();
        for d in 0..depths.len() {
            let (Some(cell), Some(base)) = (cells.get(&(m, f, i, d)), cells.get(&(m, f, 0, d))) else {
                row.push("–".to_owned());
                continue;
            };
            let mean = evaluate(c, cell).ndcg10;
            if i == 0 {
                row.push(format!("{mean:.4}"));
                continue;
            }
            let (mut worse, mut better) = (0, 0);
            for (qid, _) in &c.queries {
                let (a, b) = (ndcg(cell, qid), ndcg(base, qid));
                worse += usize::from(a + 1e-12 < b);
                better += usize::from(a > b + 1e-12);
            }
            row.push(format!("{mean:.4} ({worse}/{better})"));
        }
        println!("| {name} | {} |", row.join(" | "));
    }
}
