//! `calibrate_cranfield`: fits `hit.confidence` for all-MiniLM-L6-v2's cosines on Cranfield's
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
//! ```sh
//! rcp-dense index --data-dir dense ../shared/data/cranfield/corpus.jsonl
//! target/debug/calibrate_cranfield --dense "rcp-dense serve --data-dir dense"
//! ```

use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_bench::stdio::StdioServer;
use rcp_embedder::calibration::confidence;
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Cranfield: fit and measure the calibration of the dense model's confidence")]
struct Args {
    /// The dense engine's command line.
    #[arg(long, value_name = "COMMAND")]
    dense: String,
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

/// One hit: its query's position (for the folds), its cosine and whether it is relevant.
#[derive(Debug, Clone, Copy)]
struct Pair {
    query: usize,
    cosine: f64,
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
                let p = m.p(pair.cosine);
                let w = (p * (1.0 - p)).max(1e-12);
                let x = pair.cosine;
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
    let mut parts = args.dense.split_whitespace();
    let mut cmd = Command::new(parts.next().context("empty --dense command")?);
    cmd.args(parts).stderr(Stdio::null());
    let mut dense = StdioServer::spawn(cmd)?;
    let mut pairs = Vec::new();
    for (q, (qid, text)) in c.queries.iter().enumerate() {
        let r = dense.call("retrieve", json!({"query": text, "k": args.k}))?;
        let judged = c.qrels.get(qid);
        for hit in r["hits"].as_array().into_iter().flatten() {
            let id = hit["id"].as_str().context("hit without an id")?;
            let cosine =
                hit["scores"]["dense"].as_f64().or_else(|| hit["score"].as_f64()).context("hit without a score")?;
            let relevant = judged.is_some_and(|j| j.get(id).is_some_and(|g| *g > 0));
            pairs.push(Pair { query: q, cosine, relevant });
        }
    }
    dense.shutdown()?;
    let positives = pairs.iter().filter(|p| p.relevant).count();
    println!(
        "Cranfield, {} queries, top {}: {} pairs, {} relevant ({:.1}%)",
        c.queries.len(),
        args.k,
        pairs.len(),
        positives,
        100.0 * positives as f64 / pairs.len().max(1) as f64
    );
    let shipped: Vec<f64> = pairs.iter().map(|p| confidence(p.cosine)).collect();
    let mut held_out = vec![0.0; pairs.len()];
    for fold in 0..args.folds {
        let train: Vec<Pair> = pairs.iter().copied().filter(|p| p.query % args.folds != fold).collect();
        let m = Platt::fit(&train);
        for (i, p) in pairs.iter().enumerate().filter(|(_, p)| p.query % args.folds == fold) {
            held_out[i] = m.p(p.cosine);
        }
    }
    println!("{:<44} {:>8} {:>8} {:>9}", "", "ECE", "Brier", "log-loss");
    for (label, predicted) in [
        ("shipped map (rcp_embedder::calibration)", &shipped),
        (&*format!("Platt, {}-fold cross-validated by query", args.folds), &held_out),
    ] {
        let (ece, brier, log_loss) = calibration(&pairs, predicted, args.bins);
        println!("{label:<44} {ece:>8.4} {brier:>8.4} {log_loss:>9.4}");
    }
    let all = Platt::fit(&pairs);
    println!(
        "Platt on every pair: p = 1/(1+exp(-(a*cos + b))), a = {:.4}, b = {:.4} (slope {:.4}, midpoint {:.4})",
        all.a,
        all.b,
        all.a,
        -all.b / all.a
    );
    Ok(())
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
                pairs.push(Pair { query: i, cosine: x, relevant: (j as f64) < p * 20.0 });
            }
        }
        let m = Platt::fit(&pairs);
        assert!((m.a - 8.0).abs() < 0.5 && (m.b + 4.0).abs() < 0.3, "{m:?}");
        let fitted: Vec<f64> = pairs.iter().map(|p| m.p(p.cosine)).collect();
        let off: Vec<f64> = pairs.iter().map(|p| (m.p(p.cosine) + 0.2).min(1.0)).collect();
        let (good, _, _) = calibration(&pairs, &fitted, 10);
        let (bad, _, _) = calibration(&pairs, &off, 10);
        assert!(good < 0.02 && bad > 0.1, "{good} {bad}");
    }
}
