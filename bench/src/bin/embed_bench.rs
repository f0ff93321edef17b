//! `embed_bench`: encoder throughput (texts/s) on Cranfield abstracts and on short queries,
//! for several encoder layouts (`--layouts SESSIONSxTHREADS,...`) in this process, and, with
//! `--python PATH` (a python with `onnxruntime`, `tokenizers` and `numpy`, e.g. a throwaway
//! venv outside the repository), Python onnxruntime on the same model files, the same texts
//! and length-sorted batches (`--python-batch`, default 16), in the same run (issue #16).
//!
//! Each figure is the best of `--rounds` passes over the texts after a warm-up pass, so both
//! sides are measured warm. The Python side also returns its vectors for a few texts and the
//! table reports the lowest cosine between its vectors and ours (same model, same outputs).
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin embed_bench
//! target/release/embed_bench --python /work/venv-ort/bin/python
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::encoder_speed::{layout, run_python};
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_dense::embedder::{Embedder, EmbedderOptions};
use rcp_dense::model;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(about = "Encoder texts/s on abstracts and short queries, beside Python onnxruntime")]
struct Args {
    /// Encoder layouts measured, each SESSIONSxTHREADS (sessions side by side, intra-op
    /// threads per session).
    #[arg(long, value_delimiter = ',', default_value = "1x2,2x1")]
    layouts: Vec<String>,
    /// Abstracts encoded per pass.
    #[arg(long, default_value_t = 256)]
    abstracts: usize,
    /// Short queries encoded per pass (Cranfield's 225 queries, repeated as needed).
    #[arg(long, default_value_t = 900)]
    queries: usize,
    /// Timed passes per figure (the best is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A python with onnxruntime, tokenizers and numpy: measure it on the same texts.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Keep ONNX Runtime's CPU memory arena in our encoders (as the bulk `index` commands do;
    /// serving runs without it). Python onnxruntime keeps it by default.
    #[arg(long)]
    arena: bool,
    /// Padded tokens per encoder run in our encoders (`EmbedderOptions::batch_tokens`).
    #[arg(long, default_value_t = EmbedderOptions::default().batch_tokens)]
    batch_tokens: usize,
    /// Inputs per run on the Python side (length-sorted, as ours).
    #[arg(long, default_value_t = 16)]
    python_batch: usize,
    /// Model directory [default: as the engines find it].
    #[arg(long)]
    model_dir: Option<PathBuf>,
}

/// The Python side: same files, same texts, length-sorted batches of `--python-batch`, default session
/// options (ONNX Runtime's intra-op threads = cores), mean pooling and L2 normalisation.
const PYTHON: &str = r#"
import json, sys, time
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
model_dir, texts_path, rounds, max_len, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
tok.enable_truncation(max_len)
tok.enable_padding(pad_id=0, pad_token="[PAD]")
sess = ort.InferenceSession(model_dir + "/model.onnx", providers=["CPUExecutionProvider"])
names = {i.name for i in sess.get_inputs()}
sets = json.load(open(texts_path))
def encode(texts):
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = [None] * len(texts)
    for s in range(0, len(order), batch):
        idx = order[s:s + batch]
        enc = tok.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        h = sess.run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        v = (h * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
        for j, i in enumerate(idx):
            out[i] = v[j]
    return out
result = {}
for name, texts in sets.items():
    encode(texts)
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        vecs = encode(texts)
        best = max(best, len(texts) / (time.perf_counter() - t))
    result[name] = {"texts_per_s": best, "sample": [vecs[i].tolist() for i in range(0, len(texts), max(1, len(texts) // 8))]}
print(json.dumps(result))
"#;

fn best_rate(embedder: &Embedder, texts: &[String], rounds: usize) -> anyhow::Result<(f64, Vec<Vec<f32>>)> {
    let mut vectors = embedder.embed(texts).context("embed")?;
    let mut best = 0.0_f64;
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        vectors = embedder.embed(texts).context("embed")?;
        best = best.max(texts.len() as f64 / started.elapsed().as_secs_f64());
    }
    Ok((best, vectors))
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let cranfield = cranfield_dir();
    let collection = Collection::load(&cranfield)
        .with_context(|| format!("load the Cranfield collection in {}", cranfield.display()))?;
    let abstracts: Vec<String> = rcp_corpus::read_jsonl(&collection.corpus)
        .context("read the Cranfield corpus")?
        .filter_map(Result::ok)
        .map(|d| d.text)
        .take(args.abstracts)
        .collect();
    let queries: Vec<String> =
        collection.queries.iter().map(|(_, text)| text.clone()).cycle().take(args.queries).collect();
    let sets = [("abstracts", &abstracts), ("queries", &queries)];
    let dir = args.model_dir.clone().unwrap_or_else(model::default_dir);
    let files = model::locate_or_fetch(&dir, &mut |m| eprintln!("{m}"))
        .with_context(|| format!("locate or fetch the model in {}", dir.display()))?;
    println!(
        "texts: {} Cranfield abstracts, {} short queries; best of {} passes; {} cores",
        abstracts.len(),
        queries.len(),
        args.rounds,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut ours: Option<Vec<Vec<Vec<f32>>>> = None;
    for spec in &args.layouts {
        let (sessions, threads) = layout(spec)?;
        let options = EmbedderOptions {
            sessions: Some(sessions),
            threads: Some(threads),
            arena: args.arena,
            batch_tokens: args.batch_tokens,
            ..EmbedderOptions::default()
        };
        let before = rcp_bench::proc::status(std::process::id()).rss_kb;
        let embedder = Embedder::load(&files, options).with_context(|| format!("{spec}: load the model"))?;
        let loaded = rcp_bench::proc::status(std::process::id()).rss_kb;
        eprintln!("{spec}: model loaded, RSS +{:.0} MB", (loaded as f64 - before as f64) / 1024.0);
        let mut rates = Vec::new();
        let mut vectors = Vec::new();
        for (name, texts) in sets {
            let (rate, v) = best_rate(&embedder, texts, args.rounds).with_context(|| format!("{spec}: {name}"))?;
            rates.push(rate);
            vectors.push(v);
        }
        eprintln!("{spec}: {rates:.1?}");
        ours.get_or_insert(vectors);
        let arena = if args.arena { ", arena" } else { "" };
        rows.push((format!("rcp-embedder {sessions} session(s) × {threads} thread(s){arena}"), rates));
    }

    let mut agreement = None;
    if let Some(py) = &args.python {
        let payload: serde_json::Map<String, Value> = sets.iter().map(|(n, t)| (n.to_string(), json!(t))).collect();
        let model_dir = files.onnx().parent().map(|p| p.to_path_buf()).unwrap_or_default();
        let extra =
            [args.rounds.to_string(), EmbedderOptions::default().max_length.to_string(), args.python_batch.to_string()];
        let v = run_python(py, PYTHON, "embed_bench", &model_dir, &Value::Object(payload), &extra)?;
        let rate = |n: &str| v[n]["texts_per_s"].as_f64().unwrap_or(0.0);
        rows.push((
            format!("Python onnxruntime + tokenizers, batches of {}", args.python_batch),
            sets.iter().map(|(n, _)| rate(n)).collect(),
        ));
        if let Some(ours) = &ours {
            let mut lowest = f64::INFINITY;
            for ((name, texts), mine) in sets.iter().zip(ours) {
                let step = (texts.len() / 8).max(1);
                let theirs = v[*name]["sample"].as_array().cloned().unwrap_or_default();
                for (k, t) in theirs.iter().enumerate() {
                    let t: Vec<f64> = t.as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
                    let m = &mine[k * step];
                    let cos: f64 = m.iter().zip(&t).map(|(a, b)| *a as f64 * b).sum();
                    lowest = lowest.min(cos);
                }
            }
            agreement = Some(lowest);
        }
    }

    println!();
    println!("| encoder | abstracts texts/s | short queries texts/s |");
    println!("|---|---|---|");
    for (label, rates) in &rows {
        println!("| {label} | {:.1} | {:.1} |", rates[0], rates[1]);
    }
    if let Some((_, py)) = rows.iter().find(|(l, _)| l.starts_with("Python")) {
        println!();
        for (label, rates) in rows.iter().filter(|(l, _)| !l.starts_with("Python")) {
            println!(
                "- {label}: {:.2}x Python on abstracts, {:.2}x on short queries",
                rates[0] / py[0],
                rates[1] / py[1]
            );
        }
    }
    if let Some(c) = agreement {
        println!("- lowest cosine between our vectors and Python's on the sampled texts: {c:.5}");
    }
    Ok(())
}
