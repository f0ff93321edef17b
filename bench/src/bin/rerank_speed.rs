//! `rerank_speed`: the speed of rcp-rerank's two ONNX models on Cranfield, beside Python
//! onnxruntime + `tokenizers` running the same `model.onnx` on the same inputs in the same run.
//!
//! - `--model cross-encoder`: (query, abstract) pairs scored per second, as a rerank call
//!   sees them: Cranfield query `j` with the `--per-query` abstracts of block `j`
//!   (`[CLS] query [SEP] passage [SEP]`, at most 512 tokens, the passage cut first);
//! - `--model colbert`: documents encoded per second (`[CLS] [unused1] words [SEP]`, at most
//!   512 tokens, the vectors L2-normalised).
//!
//! rcp-rerank runs each input alone and unpadded (`--layouts SESSIONSxTHREADS,...`); Python
//! runs one input per call, unpadded (the same work), and, as its fastest layout,
//! length-sorted padded batches of 16. `--python PATH` names a python with `onnxruntime`,
//! `tokenizers` and `numpy` (e.g. a throwaway venv outside the repository). Each figure is the
//! best of `--rounds` timed passes after a warm-up pass.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin rerank_speed
//! target/release/rerank_speed --model cross-encoder --python /tmp/venv/bin/python
//! target/release/rerank_speed --model colbert --python /tmp/venv/bin/python
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use rcp_bench::encoder_speed::{layout, run_python};
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_rerank::{COLBERT_MODEL, Colbert, CrossEncoder, EncoderOptions, Kind, MODEL};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Model {
    /// ms-marco-MiniLM-L-12-v2: (query, passage) pairs scored per second.
    CrossEncoder,
    /// answerai-colbert-small-v1: documents encoded per second.
    Colbert,
}

#[derive(Debug, Parser)]
#[command(about = "rcp-rerank's cross-encoder pairs/s or ColBERT texts/s, beside Python onnxruntime on the same file")]
struct Args {
    /// The model measured.
    #[arg(long, value_enum, default_value = "cross-encoder")]
    model: Model,
    /// Encoder layouts measured, each SESSIONSxTHREADS.
    #[arg(long, value_delimiter = ',', default_value = "2x1,1x2")]
    layouts: Vec<String>,
    /// Abstracts per pass (each one pair for the cross-encoder, one document for ColBERT).
    #[arg(long, default_value_t = 128)]
    abstracts: usize,
    /// Cross-encoder passages per query (one rerank call per query).
    #[arg(long, default_value_t = 32)]
    per_query: usize,
    /// Timed passes per figure (the best is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A python with onnxruntime, tokenizers and numpy: measure it on the same inputs.
    #[arg(long)]
    python: Option<PathBuf>,
}

/// The Python side. Inputs are `[query, passage]` pairs (the cross-encoder, `pairs` mode) or
/// `[text]` (ColBERT, `documents` mode), tokenised as the engine does; default session options
/// (intra-op threads = cores); one input per call, then length-sorted padded batches of 16.
const PYTHON: &str = r#"
import json, sys, time
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
model_dir, inputs_path, rounds, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tok = Tokenizer.from_file(model_dir + "/tokenizer.json"); tok.no_padding()
sess = ort.InferenceSession(model_dir + "/model.onnx", providers=["CPUExecutionProvider"])
inputs = json.load(open(inputs_path))
if mode == "pairs":
    tok.enable_truncation(512, strategy="only_second")
    def encode(x):
        e = tok.encode(x[0], x[1])
        return e.ids, e.type_ids
    output = "logits"
else:
    tok.no_truncation()
    def encode(x):
        ids = [101, 2] + tok.encode(x[0], add_special_tokens=False).ids[:509] + [102]
        return ids, [0] * len(ids)
    output = "last_hidden_state"
def run(rows):
    width = max(len(r[0]) for r in rows)
    x = np.zeros((len(rows), width), dtype=np.int64); m = np.zeros_like(x); t = np.zeros_like(x)
    for i, (ids, types) in enumerate(rows):
        x[i, :len(ids)] = ids; m[i, :len(ids)] = 1; t[i, :len(ids)] = types
    h = sess.run([output], {"input_ids": x, "attention_mask": m, "token_type_ids": t})[0]
    if mode != "pairs":
        h = h / np.clip(np.linalg.norm(h, axis=2, keepdims=True), 1e-12, None)
    return h
def alone():
    for i in inputs:
        run([encode(i)])
def batched():
    rows = sorted((encode(i) for i in inputs), key=lambda r: len(r[0]))
    for s in range(0, len(rows), 16):
        run(rows[s:s + 16])
out = {}
for name, f in (("alone", alone), ("batched", batched)):
    f()
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter(); f(); best = max(best, len(inputs) / (time.perf_counter() - t))
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
    anyhow::ensure!(!texts.is_empty() && !c.queries.is_empty(), "the collection has no abstracts or no queries");
    // Abstract i is paired with query i / per_query (cycling): the cross-encoder's pairs.
    let per_query = args.per_query.max(1);
    let queries: Vec<&str> =
        (0..texts.len()).map(|i| c.queries[(i / per_query) % c.queries.len()].1.as_str()).collect();
    let (model, unit, mode) = match args.model {
        Model::CrossEncoder => (MODEL, "pairs", "pairs"),
        Model::Colbert => (COLBERT_MODEL, "texts", "documents"),
    };
    let files = model.locate(&model.default_dir())?;
    let mut rows: Vec<(String, f64)> = Vec::new();
    for spec in &args.layouts {
        let (sessions, threads) = layout(spec)?;
        let options = EncoderOptions { sessions: Some(sessions), threads: Some(threads), ..Default::default() };
        // One pass of the engine's own path over every input.
        let pass: Box<dyn Fn() -> anyhow::Result<()>> = match args.model {
            Model::CrossEncoder => {
                let ce = CrossEncoder::load(&files, options)?;
                // One `score` call per query block, as the engine serves a rerank request.
                let calls: Vec<(String, Vec<String>)> = texts
                    .chunks(per_query)
                    .zip(queries.iter().step_by(per_query))
                    .map(|(passages, q)| ((*q).to_owned(), passages.to_vec()))
                    .collect();
                Box::new(move || {
                    for (q, passages) in &calls {
                        ce.score(q, passages, &|| false)?;
                    }
                    Ok(())
                })
            }
            Model::Colbert => {
                let colbert = Colbert::load(&files, options)?;
                let texts = texts.clone();
                Box::new(move || {
                    colbert.encode(&texts, Kind::Document, &|| false)?;
                    Ok(())
                })
            }
        };
        pass()?;
        let mut best = 0.0f64;
        for _ in 0..args.rounds {
            let t = Instant::now();
            pass()?;
            best = best.max(texts.len() as f64 / t.elapsed().as_secs_f64());
        }
        rows.push((format!("rcp-rerank {sessions} session(s) × {threads} thread(s), one input per run"), best));
    }
    if let Some(py) = &args.python {
        let inputs = match args.model {
            Model::CrossEncoder => json!(queries.iter().zip(&texts).map(|(q, t)| [*q, t.as_str()]).collect::<Vec<_>>()),
            Model::Colbert => json!(texts.iter().map(|t| [t.as_str()]).collect::<Vec<_>>()),
        };
        let v =
            run_python(py, PYTHON, "rerank_speed", &files.dir, &inputs, &[args.rounds.to_string(), mode.to_owned()])?;
        let rate = |n: &str| v[n].as_f64().unwrap_or(0.0);
        rows.push(("Python onnxruntime, one input per call".into(), rate("alone")));
        rows.push(("Python onnxruntime, padded batches of 16".into(), rate("batched")));
    }
    println!("{:?}: {} Cranfield abstracts, {unit}/s, best of {} passes", args.model, texts.len(), args.rounds);
    let first = rows.first().map_or(1.0, |r| r.1);
    for (name, rate) in &rows {
        println!("{name:<62} {rate:>8.1} {unit}/s  {:>5.2}x", first / rate.max(1e-9));
    }
    Ok(())
}
