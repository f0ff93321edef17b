//! BEIR collections and IR metrics for the benchmarks. The collection loader and the metrics
//! live in `rcp_client::eval` (the `rcpctl eval` command uses the same code); this module adds
//! what only the benchmarks need: where Cranfield is, and latency percentiles.

use std::path::PathBuf;

pub use rcp_client::eval::{Collection, EvalError, Scores, evaluate, mrr_at, ndcg_at, recall_at};

/// The default location of Cranfield beside the workspace (`RCP_CRANFIELD` overrides).
pub fn cranfield_dir() -> PathBuf {
    std::env::var("RCP_CRANFIELD")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cranfield"))
}

/// The `p`-th percentile (0–100) of `samples` (sorted in place), nearest-rank.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    samples[rank.min(samples.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let mut s = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&mut s, 50.0), 3.0);
        assert_eq!(percentile(&mut s, 99.0), 5.0);
    }

    #[test]
    fn cranfield_loads_when_present() {
        let dir = cranfield_dir();
        if !dir.exists() {
            return;
        }
        let c = Collection::load(&dir).unwrap();
        assert_eq!(c.queries.len(), 225);
        assert!(c.qrels.len() > 200);
    }
}
