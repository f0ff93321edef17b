//! `rerank_colbert_speed`: ColBERT document encoding (texts/s) on Cranfield abstracts with
//! rcp-rerank's encoder (`--layouts SESSIONSxTHREADS,...`), and, with `--python PATH` (a python
//! with `onnxruntime`, `tokenizers` and `numpy`, e.g. a throwaway venv outside the
//! repository), Python onnxruntime on the same model.onnx and the same texts in the same run:
//! one text per run unpadded (what the engine does, so a text's vectors do not depend on its
//! neighbours) and, as the fastest Python layout, length-sorted padded batches of 16.
//!
//! Each figure is the best of `--rounds` timed passes after a warm-up pass.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin rerank_colbert_speed
//! target/release/rerank_colbert_speed --python /tmp/venv/bin/python
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use rcp_bench::encoder_speed::{layout, run_python};
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_rerank::{COLBERT_MODEL, Colbert, EncoderOptions, Kind};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "ColBERT document texts/s, beside Python onnxruntime on the same file")]
struct Args {
    /// Encoder layouts measured, each SESSIONSxTHREADS.
    #[arg(long, value_delimiter = ',', default_value = "2x1,1x2")]
    layouts: Vec<String>,
    /// Abstracts encoded per pass.
    #[arg(long, default_value_t = 128)]
    abstracts: usize,
    /// Timed passes per figure (the best is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A python with onnxruntime, tokenizers and numpy: measure it on the same texts.
    #[arg(long)]
    python: Option<PathBuf>,
}

/// The Python side: the engine's document layout (`[CLS] [unused1] words [SEP]`, at most 512
/// tokens), default session options (intra-op threads = cores); one text per run, then
/// length-sorted padded batches of 16; the vectors L2-normalised.
const PYTHON: &str = r#"
import json, sys, time
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
model_dir, texts_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = Tokenizer.from_file(model_dir + "/tokenizer.json"); tok.no_padding(); tok.no_truncation()
sess = ort.InferenceSession(model_dir + "/model.onnx", providers=["CPUExecutionProvider"])
texts = json.load(open(texts_path))
def ids(t):
    return [101, 2] + tok.encode(t, add_special_tokens=False).ids[:509] + [102]
def run(rows):
    width = max(len(r) for r in rows)
    x = np.zeros((len(rows), width), dtype=np.int64); m = np.zeros_like(x)
    for i, r in enumerate(rows):
        x[i, :len(r)] = r; m[i, :len(r)] = 1
    h = sess.run(["last_hidden_state"], {"input_ids": x, "attention_mask": m, "token_type_ids": np.zeros_like(x)})[0]
    return h / np.clip(np.linalg.norm(h, axis=2, keepdims=True), 1e-12, None)
def alone():
    for t in texts:
        run([ids(t)])
def batched():
    rows = sorted((ids(t) for t in texts), key=len)
    for s in range(0, len(rows), 16):
        run(rows[s:s + 16])
out = {}
for name, f in (("alone", alone), ("batched", batched)):
    f()
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter(); f(); best = max(best, len(texts) / (time.perf_counter() - t))
    out[name] = best
print(json.dumps(out))
"#;

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let c = Collection::load(&cranfield_dir())?;
    let texts: Vec<String> =
        rcp_corpus::read_jsonl(&c.corpus)?.filter_map(Result::ok).map(|d| d.text).take(args.abstracts).collect();
    let files = COLBERT_MODEL.locate(&COLBERT_MODEL.default_dir())?;
    let mut rows: Vec<(String, f64)> = Vec::new();
    for spec in &args.layouts {
        let (sessions, threads) = layout(spec)?;
        let options = EncoderOptions { sessions: Some(sessions), threads: Some(threads), ..Default::default() };
        let colbert = Colbert::load(&files, options)?;
        colbert.encode(&texts, Kind::Document, &|| false)?;
        let mut best = 0.0f64;
        for _ in 0..args.rounds {
            let t = Instant::now();
            colbert.encode(&texts, Kind::Document, &|| false)?;
            best = best.max(texts.len() as f64 / t.elapsed().as_secs_f64());
        }
        rows.push((format!("rcp-rerank {sessions} session(s) × {threads} thread(s), one text per run"), best));
    }
    if let Some(py) = &args.python {
        let v = run_python(py, PYTHON, "colbert_speed", &files.dir, &json!(texts), &[args.rounds.to_string()])?;
        let rate = |n: &str| v[n].as_f64().unwrap_or(0.0);
        rows.push(("Python onnxruntime, one text per run".into(), rate("alone")));
        rows.push(("Python onnxruntime, padded batches of 16".into(), rate("batched")));
    }
    println!("ColBERT documents, {} Cranfield abstracts, best of {} passes", texts.len(), args.rounds);
    let first = rows.first().map_or(1.0, |r| r.1);
    for (name, rate) in &rows {
        println!("{name:<62} {rate:>8.1} texts/s  {:>5.2}x", first / rate.max(1e-9));
    }
    Ok(())
}
