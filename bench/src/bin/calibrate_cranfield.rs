//! `calibrate_cranfield`: fits `hit.confidence` for all-MiniLM-L6-v2's cosines (or a reranker's scores) on Cranfield's
//! qrels and reports how well each map is calibrated.
//!
//! The dense engine (`--dense COMMAND`, over Cranfield's corpus) is asked `retrieve` with `k`
//! for every query; each hit is one pair (its cosine, whether the qrels judge it relevant, any
//! grade). A Platt map `p = 1 / (1 + exp(-(a·cos + b)))` is fitted by Newton's method on the
//! log-loss (Platt's smoothed targets), with `--folds` cross-validation by query: each fold's
//! pairs are scored by the map fitted on the others. Reported for the map shipped in
//! `rcp_embedder::calibration` and for the cross-validated fit: expected calibration error
//! (ECE, `--bins` equal-width bins), Brier score and log-loss; then the map fitted on every
//! pair, as slope and midpoint, which is what the engine ships.
//!
//! With `--scores FILE` the pairs are a reranker's instead: every (query, document) score of
//! one `--method` in the JSONL score cache `rerank_cranfield --scores` writes (the candidates
//! of its first-stage lists), and the shipped map is `rcp_rerank::calibration`'s for that
//! method; for the cross-encoder the logit read as a probability (`σ(logit)`, what a caller
//! without a map would do) is reported beside it.
//!
//! ```sh
//! rcp-dense index --data-dir dense ../shared/data/cranfield/corpus.jsonl
//! target/debug/calibrate_cranfield --dense "rcp-dense serve --data-dir dense"
//! target/debug/calibrate_cranfield --scores ce-scores.jsonl --method cross-encoder
//! ```

use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_bench::stdio::StdioServer;
use rcp_embedder::calibration::MINILM;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Cranfield: fit and measure the calibration of the dense model's confidence")]
struct Args {
    /// The dense engine's command line.
    #[arg(long, value_name = "COMMAND", required_unless_present = "scores", conflicts_with = "scores")]
    dense: Option<String>,
    /// A reranker's score cache (`rerank_cranfield --scores`): its pairs instead of the dense
    /// engine's.
    #[arg(long, value_name = "FILE", requires = "method")]
    scores: Option<std::path::PathBuf>,
    /// The reranking method whose scores are read from `--scores` (`cross-encoder`, `colbert`).
    #[arg(long, value_name = "METHOD", requires = "scores")]
    method: Option<String>,
    /// Hits asked per query (the pairs are every hit).
    #[arg(long, default_value_t = 100)]
    k: usize,
    /// Cross-validation folds (by query).
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Bins of the expected calibration error.
    #[arg(long, default_value_t = 10)]
    bins: usize,
}

/// One pair: its query's position (for the folds), its score (a cosine, a logit, a MaxSim) and
/// whether it is relevant.
#[derive(Debug, Clone, Copy)]
struct Pair {
    query: usize,
    score: f64,
    relevant: bool,
}

/// A Platt map `p = σ(a·x + b)`.
#[derive(Debug, Clone, Copy)]
struct Platt {
    a: f64,
    b: f64,
}

impl Platt {
    fn p(&self, x: f64) -> f64 {
        1.0 / (1.0 + (-(self.a * x + self.b)).exp())
    }

    /// Fits the map to `pairs` by Newton's method on the log-loss, with Platt's smoothed
    /// targets (`(N+ + 1)/(N+ + 2)` and `1/(N- + 2)`), which keep it finite when the classes
    /// separate.
    fn fit(pairs: &[Pair]) -> Self {
        let positives = pairs.iter().filter(|p| p.relevant).count() as f64;
        let negatives = pairs.len() as f64 - positives;
        let (hi, lo) = ((positives + 1.0) / (positives + 2.0), 1.0 / (negatives + 2.0));
        let mut m = Platt { a: 0.0, b: ((positives + 1.0) / (negatives + 1.0)).ln() };
        for _ in 0..100 {
            let (mut g_a, mut g_b, mut h_aa, mut h_ab, mut h_bb) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for pair in pairs {
                let t = if pair.relevant { hi } else { lo };
                let p = m.p(pair.score);
                let w = (p * (1.0 - p)).max(1e-12);
                let x = pair.score;
                g_a += (p - t) * x;
                g_b += p - t;
                h_aa += w * x * x;
                h_ab += w * x;
                h_bb += w;
            }
            let det = h_aa * h_bb - h_ab * h_ab;
            if det.abs() < 1e-18 {
                break;
            }
            let (da, db) = ((h_bb * g_a - h_ab * g_b) / det, (h_aa * g_b - h_ab * g_a) / det);
            m = Platt { a: m.a - da, b: m.b - db };
            if da.abs() < 1e-10 && db.abs() < 1e-10 {
                break;
            }
        }
        m
    }
}

/// ECE, Brier score and log-loss of `predicted` probabilities against the pairs' labels.
fn calibration(pairs: &[Pair], predicted: &[f64], bins: usize) -> (f64, f64, f64) {
    let n = pairs.len().max(1) as f64;
    let mut sum_p = vec![0.0; bins];
    let mut sum_y = vec![0.0; bins];
    let mut count = vec![0usize; bins];
    let (mut brier, mut log_loss) = (0.0, 0.0);
    for (pair, &p) in pairs.iter().zip(predicted) {
        let y = if pair.relevant { 1.0 } else { 0.0 };
        let bin = ((p * bins as f64) as usize).min(bins - 1);
        sum_p[bin] += p;
        sum_y[bin] += y;
        count[bin] += 1;
        brier += (p - y) * (p - y);
        let p = p.clamp(1e-12, 1.0 - 1e-12);
        log_loss -= y * p.ln() + (1.0 - y) * (1.0 - p).ln();
    }
    let ece = (0..bins).map(|b| (sum_p[b] - sum_y[b]).abs()).sum::<f64>() / n;
    (ece, brier / n, log_loss / n)
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.folds >= 2 && args.bins >= 1, "--folds must be at least 2 and --bins at least 1");
    let c = Collection::load(&cranfield_dir())?;
    let (pairs, shipped_label, shipped) = match (&args.dense, &args.scores, &args.method) {
        (Some(dense), _, _) => {
            (dense_pairs(&c, dense, args.k)?, "shipped map (rcp_embedder::calibration)".to_owned(), MINILM)
        }
        (None, Some(file), Some(method)) => {
            let map = rcp_rerank::calibration::map(method)
                .with_context(|| format!("no shipped map for the method '{method}'"))?;
            (score_pairs(&c, file, method)?, format!("shipped map (rcp_rerank::calibration, {method})"), map)
        }
        _ => anyhow::bail!("give --dense, or --scores with --method"),
    };
    let positives = pairs.iter().filter(|p| p.relevant).count();
    println!(
        "Cranfield, {} queries, {}: {} pairs, {} relevant ({:.1}%)",
        c.queries.len(),
        args.method.as_deref().map_or_else(|| format!("top {}", args.k), |m| format!("{m} scores")),
        pairs.len(),
        positives,
        100.0 * positives as f64 / pairs.len().max(1) as f64
    );
    let shipped: Vec<f64> = pairs.iter().map(|p| shipped.apply(p.score)).collect();
    let logit: Vec<f64> = pairs.iter().map(|p| 1.0 / (1.0 + (-p.score).exp())).collect();
    let mut held_out = vec![0.0; pairs.len()];
    for fold in 0..args.folds {
        let train: Vec<Pair> = pairs.iter().copied().filter(|p| p.query % args.folds != fold).collect();
        let m = Platt::fit(&train);
        for (i, p) in pairs.iter().enumerate().filter(|(_, p)| p.query % args.folds == fold) {
            held_out[i] = m.p(p.score);
        }
    }
    println!("{:<52} {:>8} {:>8} {:>9}", "", "ECE", "Brier", "log-loss");
    let mut rows =
        vec![(shipped_label, &shipped), (format!("Platt, {}-fold cross-validated by query", args.folds), &held_out)];
    if args.method.as_deref() == Some("cross-encoder") {
        rows.insert(0, ("the logit read as a probability, σ(logit)".into(), &logit));
    }
    for (label, predicted) in rows {
        let (ece, brier, log_loss) = calibration(&pairs, predicted, args.bins);
        println!("{label:<52} {ece:>8.4} {brier:>8.4} {log_loss:>9.4}");
    }
    let all = Platt::fit(&pairs);
    println!(
        "Platt on every pair: p = 1/(1+exp(-(a*x + b))), a = {:.4}, b = {:.4} (slope {:.4}, midpoint {:.4})",
        all.a,
        all.b,
        all.a,
        -all.b / all.a
    );
    Ok(())
}

/// The dense engine's top `k` for every query: (cosine, relevant) pairs.
fn dense_pairs(c: &Collection, command: &str, k: usize) -> anyhow::Result<Vec<Pair>> {
    let mut parts = command.split_whitespace();
    let mut cmd = Command::new(parts.next().context("empty --dense command")?);
    cmd.args(parts).stderr(Stdio::null());
    let mut dense = StdioServer::spawn(cmd)?;
    let mut pairs = Vec::new();
    for (q, (qid, text)) in c.queries.iter().enumerate() {
        let r = dense.call("retrieve", json!({"query": text, "k": k}))?;
        let judged = c.qrels.get(qid);
        for hit in r["hits"].as_array().into_iter().flatten() {
            let id = hit["id"].as_str().context("hit without an id")?;
            let cosine =
                hit["scores"]["dense"].as_f64().or_else(|| hit["score"].as_f64()).context("hit without a score")?;
            let relevant = judged.is_some_and(|j| j.get(id).is_some_and(|g| *g > 0));
            pairs.push(Pair { query: q, score: cosine, relevant });
        }
    }
    dense.shutdown()?;
    Ok(pairs)
}

/// Every score of `method` in a `rerank_cranfield --scores` cache, for Cranfield's queries:
/// (score, relevant) pairs.
fn score_pairs(c: &Collection, file: &std::path::Path, method: &str) -> anyhow::Result<Vec<Pair>> {
    let position: std::collections::HashMap<&str, usize> =
        c.queries.iter().enumerate().map(|(i, (qid, _))| (qid.as_str(), i)).collect();
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut pairs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}:{}", file.display(), n + 1))?;
        if v["method"].as_str() != Some(method) {
            continue;
        }
        let (Some(qid), Some(doc), Some(score)) = (v["query"].as_str(), v["doc"].as_str(), v["score"].as_f64()) else {
            anyhow::bail!("{}:{}: expected query, doc and score", file.display(), n + 1);
        };
        let Some(&q) = position.get(qid) else { continue };
        let relevant = c.qrels.get(qid).is_some_and(|j| j.get(doc).is_some_and(|g| *g > 0));
        pairs.push(Pair { query: q, score, relevant });
    }
    anyhow::ensure!(!pairs.is_empty(), "{} holds no '{method}' scores", file.display());
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_recovers_a_known_map_and_ece_sees_miscalibration() {
        // Pairs drawn deterministically from p = σ(8x − 4): a fitted map close to it.
        let truth = Platt { a: 8.0, b: -4.0 };
        let mut pairs = Vec::new();
        for i in 0..2000 {
            let x = i as f64 / 2000.0;
            let p = truth.p(x);
            // 20 pairs per x-step group, relevant in proportion p.
            for j in 0..20 {
                pairs.push(Pair { query: i, score: x, relevant: (j as f64) < p * 20.0 });
            }
        }
        let m = Platt::fit(&pairs);
        assert!((m.a - 8.0).abs() < 0.5 && (m.b + 4.0).abs() < 0.3, "{m:?}");
        let fitted: Vec<f64> = pairs.iter().map(|p| m.p(p.score)).collect();
        let off: Vec<f64> = pairs.iter().map(|p| (m.p(p.score) + 0.2).min(1.0)).collect();
        let (good, _, _) = calibration(&pairs, &fitted, 10);
        let (bad, _, _) = calibration(&pairs, &off, 10);
        assert!(good < 0.02 && bad > 0.1, "{good} {bad}");
    }
}
