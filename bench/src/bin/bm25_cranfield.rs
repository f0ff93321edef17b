//! `bm25_cranfield`: quality and speed of the `rcp-bm25` engine.
//!
//! 1. **Quality** on Cranfield (1,400 documents, all 225 judged queries): nDCG@10,
//!    Recall@100 and MRR@10 of the engine called in-process, against the reference figures of
//!    a Python BM25 with English stopwords and Snowball stemming (0.363 / 0.738).
//! 2. **Throughput** of the same queries (k=10) through the engine alone and through the full
//!    RCP stdio path (`rcp-bm25 serve`, sequential request/response over pipes).
//! 3. **Scale**: a synthetic corpus (default 200,000 documents of Zipf-distributed words from a
//!    seeded generator) is indexed (docs/s), then query latency p50/p99 is measured in-process.
//!
//! ```sh
//! cargo build --release -p rcp-bm25 -p rcp-bench
//! target/release/bm25_cranfield                # or: cargo run --release -p rcp-bench --bin bm25_cranfield
//! target/release/bm25_cranfield --sweep        # also try several title boosts
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate, percentile};
use rcp_bench::scratch::{Cleanup, sibling};
use rcp_bench::stdio::StdioServer;
use rcp_bm25::engine::{Engine, EngineOptions, Hooks, SearchRequest, TrustLevel};
use rcp_corpus::CorpusDoc;
use serde_json::json;

/// Reference figures of the Python BM25 baseline on Cranfield.
const REFERENCE: (f64, f64) = (0.363, 0.738);

#[derive(Debug, Parser)]
#[command(name = "bm25_cranfield", about = "Quality and speed of rcp-bm25 on Cranfield and a synthetic corpus")]
struct Args {
    /// The Cranfield directory (BEIR layout); default `RCP_CRANFIELD` or ../shared/data/cranfield.
    #[arg(long)]
    cranfield: Option<PathBuf>,

    /// Title boost to evaluate (default: the engine's default).
    #[arg(long)]
    title_boost: Option<f32>,

    /// Also evaluate a range of title boosts.
    #[arg(long)]
    sweep: bool,

    /// Passes over the 225 queries for the throughput figures.
    #[arg(long, default_value_t = 20)]
    rounds: usize,

    /// The `rcp-bm25` binary for the stdio figures (default: beside this executable).
    #[arg(long)]
    server: Option<PathBuf>,

    /// Documents in the synthetic corpus (0 skips the scale test).
    #[arg(long, default_value_t = 200_000)]
    synthetic_docs: usize,

    /// Queries timed on the synthetic corpus.
    #[arg(long, default_value_t = 2_000)]
    synthetic_queries: usize,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let dir = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let collection =
        Collection::load(&dir).with_context(|| format!("load the Cranfield collection in {}", dir.display()))?;
    let work = std::env::temp_dir().join(format!("bm25-cranfield-{}", std::process::id()));
    let _cleanup = Cleanup(work.clone());

    // Indexing Cranfield in-process.
    let data = work.join("cranfield");
    let options = EngineOptions {
        title_boost: args.title_boost.unwrap_or(EngineOptions::default().title_boost),
        writer_threads: 0,
        writer_heap: 256 << 20,
        ..EngineOptions::default()
    };
    let open = |options: EngineOptions| {
        Engine::open(&data, Vec::new(), options).with_context(|| format!("open the index in {}", data.display()))
    };
    let engine = open(options.clone())?;
    let started = Instant::now();
    let docs = rcp_corpus::read_jsonl(&collection.corpus).context("read the Cranfield corpus")?;
    let stats = engine.load(docs, TrustLevel::Trusted, "cranfield", true, |_| {}).context("index Cranfield")?;
    let cran_index_secs = started.elapsed().as_secs_f64();
    let cran_docs_per_s = stats.indexed as f64 / cran_index_secs;

    // Quality.
    let scores = quality(&engine, &collection)?;
    drop(engine); // releases the writer lock before the index is reopened
    let mut sweep = Vec::new();
    if args.sweep {
        for boost in [0.0f32, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0, 2.0] {
            let e = open(EngineOptions { title_boost: boost, ..options.clone() })?;
            sweep.push((boost, quality(&e, &collection)?));
        }
    }
    let engine = open(options.clone())?;

    // Throughput: engine alone.
    let queries: Vec<&str> = collection.queries.iter().map(|(_, q)| q.as_str()).collect();
    let started = Instant::now();
    let mut n = 0usize;
    for _ in 0..args.rounds {
        for q in &queries {
            let page = engine
                .search(&SearchRequest::new(*q, 10), &Hooks::default())
                .with_context(|| format!("query {q:?}"))?;
            n += page.hits.len().min(1);
        }
    }
    let engine_qps = (args.rounds * queries.len()) as f64 / started.elapsed().as_secs_f64();
    assert!(n > 0, "no query returned a hit");
    drop(engine);

    // Throughput: the full RCP stdio path.
    let server = args.server.clone().unwrap_or_else(|| sibling("rcp-bm25"));
    let stdio_qps = if server.exists() {
        let mut cmd = Command::new(&server);
        cmd.arg("serve").arg("--data-dir").arg(&data);
        if let Some(b) = args.title_boost {
            cmd.arg("--title-boost").arg(b.to_string());
        }
        let mut s = StdioServer::spawn(cmd).context("serve Cranfield over stdio")?;
        let started = Instant::now();
        for _ in 0..args.rounds {
            for q in &queries {
                s.call("retrieve", json!({"query": q, "k": 10})).with_context(|| format!("query {q:?} over stdio"))?;
            }
        }
        let qps = (args.rounds * queries.len()) as f64 / started.elapsed().as_secs_f64();
        s.shutdown()?;
        Some(qps)
    } else {
        eprintln!("note: {} not found; build it with `cargo build --release -p rcp-bm25`", server.display());
        None
    };

    // Scale: synthetic corpus.
    let synthetic = if args.synthetic_docs > 0 {
        Some(
            synthetic(&work.join("synthetic"), args.synthetic_docs, args.synthetic_queries, &options)
                .context("synthetic corpus")?,
        )
    } else {
        None
    };

    // Report.
    let ok = |v: f64, r: f64| if v + 1e-9 >= r { "ok" } else { "BELOW" };
    println!();
    println!("rcp-bm25 on Cranfield ({} queries, title boost {})", scores.queries, options.title_boost);
    println!("| metric                         | value      | reference |");
    println!("|--------------------------------|------------|-----------|");
    println!(
        "| nDCG@10                        | {:>10.4} | {:.3} {} |",
        scores.ndcg10,
        REFERENCE.0,
        ok(scores.ndcg10, REFERENCE.0)
    );
    println!(
        "| Recall@100                     | {:>10.4} | {:.3} {} |",
        scores.recall100,
        REFERENCE.1,
        ok(scores.recall100, REFERENCE.1)
    );
    println!("| MRR@10                         | {:>10.4} |           |", scores.mrr10);
    println!(
        "| Cranfield indexing (docs/s)    | {cran_docs_per_s:>10.0} | {} docs in {:.3} s |",
        stats.indexed, cran_index_secs
    );
    println!("| queries/s, engine in-process   | {engine_qps:>10.0} | k=10, {} rounds |", args.rounds);
    match stdio_qps {
        Some(q) => println!("| queries/s, RCP over stdio      | {q:>10.0} | sequential calls |"),
        None => println!("| queries/s, RCP over stdio      |        n/a | server binary missing |"),
    }
    if let Some(s) = &synthetic {
        println!(
            "| synthetic indexing (docs/s)    | {:>10.0} | {} docs in {:.1} s |",
            s.docs_per_s, s.docs, s.index_secs
        );
        println!("| synthetic latency p50 (ms)     | {:>10.3} | k=10, {} queries |", s.p50_ms, s.queries);
        println!("| synthetic latency p99 (ms)     | {:>10.3} |           |", s.p99_ms);
        println!("| synthetic queries/s            | {:>10.0} |           |", s.qps);
    }
    for (boost, s) in &sweep {
        println!(
            "sweep: title boost {boost:<5} nDCG@10 {:.4}  Recall@100 {:.4}  MRR@10 {:.4}",
            s.ndcg10, s.recall100, s.mrr10
        );
    }
    let cmd: Vec<String> = std::env::args().collect();
    println!("\ncommand: {}", cmd.join(" "));
    if scores.ndcg10 + 1e-9 < REFERENCE.0 || scores.recall100 + 1e-9 < REFERENCE.1 {
        bail!("quality below the reference");
    }
    Ok(())
}

fn quality(engine: &Engine, c: &Collection) -> anyhow::Result<Scores> {
    let mut rankings = HashMap::new();
    for (qid, text) in &c.queries {
        let page = engine
            .search(&SearchRequest::new(text.as_str(), 100), &Hooks::default())
            .with_context(|| format!("query {qid}"))?;
        rankings.insert(qid.clone(), page.hits.iter().map(|h| h.key()).collect());
    }
    Ok(evaluate(c, &rankings))
}

/// SplitMix64: a small seeded generator, so the synthetic corpus is identical on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A Zipf(s=1) sampler over ranks `0..n` by inverse CDF on the precomputed cumulative weights.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Self {
        let mut acc = 0.0;
        let cdf = (1..=n)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect::<Vec<_>>();
        let total = acc;
        Self { cdf: cdf.into_iter().map(|c| c / total).collect() }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Pronounceable pseudo-words from syllables, distinct per rank.
fn word(mut rank: usize) -> String {
    const SYL: [&str; 20] = [
        "ka", "lo", "mi", "ta", "re", "su", "no", "vi", "da", "pe", "ro", "zu", "fa", "ni", "go", "be", "xi", "wu",
        "ly", "qe",
    ];
    let mut w = String::new();
    loop {
        w.push_str(SYL[rank % SYL.len()]);
        rank /= SYL.len();
        if rank == 0 {
            break;
        }
        rank -= 1;
    }
    w.push('n');
    w
}

struct Synthetic {
    docs: usize,
    index_secs: f64,
    docs_per_s: f64,
    queries: usize,
    p50_ms: f64,
    p99_ms: f64,
    qps: f64,
}

fn synthetic(dir: &Path, n_docs: usize, n_queries: usize, options: &EngineOptions) -> anyhow::Result<Synthetic> {
    const VOCAB: usize = 50_000;
    let vocab: Vec<String> = (0..VOCAB).map(word).collect();
    let zipf = Zipf::new(VOCAB);
    let engine = Engine::open(dir, Vec::new(), options.clone())
        .with_context(|| format!("open the index in {}", dir.display()))?;
    let mut rng = Rng(0x5eed_2024);
    let docs = (0..n_docs).map(|i| {
        let len = 40 + (rng.next() % 120) as usize;
        let mut text = String::with_capacity(len * 8);
        for j in 0..len {
            if j > 0 {
                text.push(' ');
            }
            text.push_str(&vocab[zipf.sample(&mut rng)]);
        }
        let title = (0..4).map(|_| vocab[zipf.sample(&mut rng)].as_str()).collect::<Vec<_>>().join(" ");
        Ok::<_, std::convert::Infallible>(CorpusDoc {
            id: Some(format!("s{i}")),
            title: Some(title),
            text,
            meta: Default::default(),
        })
    });
    let started = Instant::now();
    let stats = engine.load(docs, TrustLevel::Trusted, "synthetic", true, |_| {}).context("index")?;
    let index_secs = started.elapsed().as_secs_f64();

    // Queries of 2-6 words drawn from ranks 20.. (skipping the very commonest, like stopwords).
    let mut qrng = Rng(0x0ddc_0ffe);
    let queries: Vec<String> = (0..n_queries)
        .map(|_| {
            let len = 2 + (qrng.next() % 5) as usize;
            (0..len).map(|_| vocab[(20 + zipf.sample(&mut qrng)).min(VOCAB - 1)].as_str()).collect::<Vec<_>>().join(" ")
        })
        .collect();
    for q in queries.iter().take(100) {
        engine
            .search(&SearchRequest::new(q.as_str(), 10), &Hooks::default())
            .with_context(|| format!("query {q:?}"))?;
    }
    let mut lat = Vec::with_capacity(queries.len());
    let started = Instant::now();
    for q in &queries {
        let t = Instant::now();
        engine
            .search(&SearchRequest::new(q.as_str(), 10), &Hooks::default())
            .with_context(|| format!("query {q:?}"))?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let qps = queries.len() as f64 / started.elapsed().as_secs_f64();
    Ok(Synthetic {
        docs: stats.indexed as usize,
        index_secs,
        docs_per_s: stats.indexed as f64 / index_secs,
        queries: queries.len(),
        p50_ms: percentile(&mut lat, 50.0),
        p99_ms: percentile(&mut lat, 99.0),
        qps,
    })
}
