//! `splade_cranfield`: the learned-sparse scorer (`rcp-bm25 --scorer splade`, SPLADE-tiny) on
//! Cranfield, and SPLADE's encoding speed.
//!
//! 1. **Quality**: Cranfield (1,400 documents, all 225 judged queries) indexed in-process
//!    with SPLADE expansions, each query encoded and ranked by dot product (k=100): nDCG@10,
//!    Recall@100, MRR@10, beside BM25 on the same collection in the same run.
//! 2. **Speed**: Cranfield abstracts encoded by rcp-embedder's SPLADE (`--threads`, texts side
//!    by side, each text alone and unpadded), and, with `--python PATH` (a python with `numpy`,
//!    `safetensors` and `tokenizers`, e.g. a throwaway venv outside the repository), a numpy
//!    forward of the same `model.safetensors` on the same texts in the same run (one text at a
//!    time, unpadded, numpy's own BLAS threads). Each figure is the best of `--rounds` passes
//!    after a warm-up pass.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin splade_cranfield
//! target/release/splade_cranfield --python /tmp/venv/bin/python
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::encoder_speed::run_python;
use rcp_bench::quality::{Collection, Scores, cranfield_dir, evaluate};
use rcp_bench::scratch::Cleanup;
use rcp_bm25::engine::{Engine, EngineOptions, Hooks, SearchRequest, TrustLevel};
use rcp_embedder::splade::Splade;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "SPLADE-tiny on Cranfield (nDCG@10 beside BM25) and its texts/s beside numpy")]
struct Args {
    /// Texts encoded side by side, for each speed figure.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Abstracts encoded per speed pass.
    #[arg(long, default_value_t = 128)]
    abstracts: usize,
    /// Timed passes per speed figure (the best is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A python with numpy, safetensors and tokenizers: measure its forward on the same texts.
    #[arg(long)]
    python: Option<PathBuf>,
    /// Skip the quality part (indexing Cranfield with SPLADE takes minutes).
    #[arg(long)]
    speed_only: bool,
}

/// The numpy forward: the engine's input (`[CLS] pieces [SEP]`, at most 512 tokens, no
/// padding), float32 tensors, GELU with the same erf approximation as the Rust encoder
/// (Abramowitz & Stegun 7.1.26), `log1p(relu(logits)).max(0)`.
const PYTHON: &str = r#"
import json, sys, time, math
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer
model_dir, texts_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
W = load_file(model_dir + "/model.safetensors")
tok = Tokenizer.from_file(model_dir + "/tokenizer.json"); tok.no_padding(); tok.enable_truncation(512)
texts = json.load(open(texts_path))
def erf(x):
    a = np.abs(x); t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * np.exp(-a * a)
    return np.sign(x) * y
def gelu(x): return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
def ln(x, p):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * W[p + ".gamma"] + W[p + ".beta"]
def lin(x, p): return x @ W[p + ".weight"].T + W[p + ".bias"]
E = W["bert.embeddings.word_embeddings.weight"]; ET = np.ascontiguousarray(E.T)
def encode(ids):
    n = len(ids)
    x = ln(E[ids] + W["bert.embeddings.position_embeddings.weight"][:n] + W["bert.embeddings.token_type_embeddings.weight"][0], "bert.embeddings.LayerNorm")
    for l in range(2):
        p = f"bert.encoder.layer.{l}."
        q, k, v = (lin(x, p + "attention.self." + w).reshape(n, 2, 64).transpose(1, 0, 2) for w in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / 8.0
        e = np.exp(s - s.max(-1, keepdims=True)); a = e / e.sum(-1, keepdims=True)
        c = (a @ v).transpose(1, 0, 2).reshape(n, 128)
        x = ln(lin(c, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        x = ln(lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense") + x, p + "output.LayerNorm")
    t = ln(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    return np.log1p(np.maximum((t @ ET).max(0) + W["cls.predictions.bias"], 0))
inputs = [tok.encode(t).ids for t in texts]
def once():
    for ids in inputs:
        encode(ids)
once()
best = 0.0
for _ in range(rounds):
    t = time.perf_counter(); once(); best = max(best, len(texts) / (time.perf_counter() - t))
print(json.dumps({"alone": best}))
"#;

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let c = Collection::load(&cranfield_dir())?;
    if !args.speed_only {
        quality(&c)?;
    }
    speed(args, &c)
}

fn quality(c: &Collection) -> anyhow::Result<()> {
    let work = std::env::temp_dir().join(format!("splade-cranfield-{}", std::process::id()));
    let _cleanup = Cleanup(work.clone());
    let mut rows: Vec<(&str, Scores, f64)> = Vec::new();
    for (name, learned_sparse) in [("bm25", None), ("splade", Some(rcp_bm25::splade::load(None, false)?))] {
        let options = EngineOptions { writer_threads: 0, writer_heap: 256 << 20, learned_sparse, ..Default::default() };
        let engine = Engine::open(&work.join(name), Vec::new(), options).context("open the index")?;
        let started = Instant::now();
        let docs = rcp_corpus::read_jsonl(&c.corpus).context("read the Cranfield corpus")?;
        let stats = engine.load(docs, TrustLevel::Trusted, "cranfield", true, |_| {}).context("index Cranfield")?;
        let docs_per_s = stats.indexed as f64 / started.elapsed().as_secs_f64();
        let mut rankings = HashMap::new();
        for (qid, text) in &c.queries {
            let page = engine.search(&SearchRequest::new(text.as_str(), 100), &Hooks::default())?;
            rankings.insert(qid.clone(), page.hits.iter().map(|h| h.key()).collect());
        }
        rows.push((name, evaluate(c, &rankings), docs_per_s));
    }
    println!("Cranfield, {} queries   nDCG@10  Recall@100  MRR@10  index docs/s", c.queries.len());
    for (name, s, docs_per_s) in rows {
        println!("{name:<22} {:>8.4} {:>11.4} {:>7.4} {docs_per_s:>13.1}", s.ndcg10, s.recall100, s.mrr10);
    }
    Ok(())
}

fn speed(args: &Args, c: &Collection) -> anyhow::Result<()> {
    let texts: Vec<String> =
        rcp_corpus::read_jsonl(&c.corpus)?.filter_map(Result::ok).map(|d| d.text).take(args.abstracts).collect();
    let model = rcp_bm25::splade::MODEL;
    let files = model.locate(&model.default_dir())?;
    let mut rows: Vec<(String, f64)> = Vec::new();
    for &threads in &args.threads {
        let splade = Splade::load(&files, Some(threads))?;
        splade.encode_all(&texts, &|| false)?;
        let mut best = 0.0f64;
        for _ in 0..args.rounds {
            let t = Instant::now();
            splade.encode_all(&texts, &|| false)?;
            best = best.max(texts.len() as f64 / t.elapsed().as_secs_f64());
        }
        rows.push((format!("rcp-embedder SPLADE, {threads} text(s) side by side"), best));
    }
    if let Some(py) = &args.python {
        let v = run_python(py, PYTHON, "splade_speed", &files.dir, &json!(texts), &[args.rounds.to_string()])?;
        rows.push(("numpy forward, one text at a time".into(), v["alone"].as_f64().unwrap_or(0.0)));
    }
    println!("SPLADE-tiny, {} Cranfield abstracts, best of {} passes", texts.len(), args.rounds);
    let first = rows.first().map_or(1.0, |r| r.1);
    for (name, rate) in &rows {
        println!("{name:<48} {rate:>8.1} texts/s  {:>5.2}x", rate / first.max(1e-9));
    }
    Ok(())
}
