//! The rerank stage against the request's deadline (§13.1): what each reranking method has cost
//! per passage in this server ([`RerankCosts`]), and how many of the `topN` passages fit in the
//! time left ([`affordable`]). The stage rescores only those; the rest follow in first-stage
//! order ([`Funnel::apply`](super::Funnel::apply)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Time kept back from the rerank call whatever the deadline: the fusion, the cut and the
/// answer's framing run after it.
pub(crate) const MARGIN_FLOOR: Duration = Duration::from_millis(25);

/// Share of the time left kept back besides [`MARGIN_FLOOR`]: the estimate is an average, and a
/// call can run slower than the calls it was learnt from.
pub(crate) const MARGIN_SHARE: f64 = 0.15;

/// Weight of the newest measurement in the moving average of [`RerankCosts`].
pub(crate) const EWMA_WEIGHT: f64 = 0.3;

/// Factor on a method's estimate each time a request skips the reranker (see
/// [`RerankCosts::ease`]): after five skips the estimate is a third of what it was.
pub(crate) const EASE: f64 = 0.8;

/// Seconds per passage each reranking method (§7.6) has taken in this server's stage: an
/// exponentially weighted moving average of the completed calls ([`EWMA_WEIGHT`] on the
/// newest). A call cut short (the deadline passed, the client cancelled) proves only a lower
/// bound, which raises the estimate when it is above it. Keyed by method, a closed set (the
/// advertised `rerank.methods`; any other is refused before the stage runs), so it stays small.
/// One per registered reranker, so per server.
#[derive(Debug, Default)]
pub(crate) struct RerankCosts {
    per_passage: Mutex<HashMap<String, f64>>,
}

impl RerankCosts {
    /// The estimated time per passage of `method`, or `None` before its first measurement.
    pub(crate) fn estimate(&self, method: &str) -> Option<Duration> {
        let costs = self.per_passage.lock().unwrap_or_else(PoisonError::into_inner);
        costs.get(method).map(|&s| Duration::from_secs_f64(s))
    }

    /// Folds a completed call into the average: `passages` scored in `elapsed`.
    pub(crate) fn record(&self, method: &str, elapsed: Duration, passages: usize) {
        let Some(sample) = per_passage(elapsed, passages) else { return };
        let mut costs = self.per_passage.lock().unwrap_or_else(PoisonError::into_inner);
        costs
            .entry(method.to_owned())
            .and_modify(|s| *s = EWMA_WEIGHT * sample + (1.0 - EWMA_WEIGHT) * *s)
            .or_insert(sample);
    }

    /// A call of `passages` that was still running after `elapsed`: the method costs at least
    /// that much per passage, so the estimate rises to it if below.
    pub(crate) fn record_at_least(&self, method: &str, elapsed: Duration, passages: usize) {
        let Some(bound) = per_passage(elapsed, passages) else { return };
        let mut costs = self.per_passage.lock().unwrap_or_else(PoisonError::into_inner);
        let s = costs.entry(method.to_owned()).or_insert(bound);
        *s = s.max(bound);
    }

    /// A request skipped the reranker because not one passage fit at the estimate: the
    /// estimate eases by [`EASE`], so a method whose cost was learnt under a burst of load (or
    /// from a call cut short) is tried again after a few skipped requests instead of never.
    pub(crate) fn ease(&self, method: &str) {
        let mut costs = self.per_passage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = costs.get_mut(method) {
            *s *= EASE;
        }
    }

    /// Starts timing a call of `method` over `passages`: [`Timing::finish`] records it; a
    /// timing dropped unfinished (the call's future dropped at the deadline or on cancel)
    /// records a lower bound; [`Timing::abandon`] records nothing (the call failed).
    pub(crate) fn time(self: &Arc<Self>, method: &str, passages: usize) -> Timing {
        Timing { costs: Some(Arc::clone(self)), method: method.to_owned(), passages, started: Instant::now() }
    }
}

/// Seconds per passage, for a positive count and a finite result.
fn per_passage(elapsed: Duration, passages: usize) -> Option<f64> {
    let s = elapsed.as_secs_f64() / passages as f64;
    (passages > 0 && s.is_finite()).then_some(s)
}

/// One rerank call being timed (see [`RerankCosts::time`]).
#[derive(Debug)]
pub(crate) struct Timing {
    /// Where the measurement goes; `None` once recorded or abandoned.
    costs: Option<Arc<RerankCosts>>,
    method: String,
    passages: usize,
    started: Instant,
}

impl Timing {
    /// The call completed: its time per passage joins the average.
    pub(crate) fn finish(mut self) {
        if let Some(costs) = self.costs.take() {
            costs.record(&self.method, self.started.elapsed(), self.passages);
        }
    }

    /// The call failed: its time says nothing about the method's cost.
    pub(crate) fn abandon(mut self) {
        self.costs = None;
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        if let Some(costs) = self.costs.take() {
            costs.record_at_least(&self.method, self.started.elapsed(), self.passages);
        }
    }
}

/// How many of `passages` the reranker can score in `remaining` at `per_passage` each, after
/// the margin ([`MARGIN_FLOOR`] plus [`MARGIN_SHARE`] of `remaining`): all of them when there is
/// no estimate yet (a first call is never cut), else at most that many, `0` when not even one
/// fits.
pub(crate) fn affordable(passages: usize, remaining: Duration, per_passage: Option<Duration>) -> usize {
    let Some(cost) = per_passage.filter(|c| !c.is_zero()) else { return passages };
    let margin = MARGIN_FLOOR + remaining.mul_f64(MARGIN_SHARE);
    let usable = remaining.saturating_sub(margin);
    let fit = usable.as_secs_f64() / cost.as_secs_f64();
    // `as` saturates a large or infinite quotient; the quotient is never NaN (cost > 0).
    (fit.floor() as usize).min(passages)
}

#[cfg(test)]
mod ease_tests {
    use super::*;

    #[test]
    fn a_skipped_method_is_tried_again_after_a_few_requests() {
        let costs = RerankCosts::default();
        costs.record("cross-encoder", Duration::from_millis(60), 1);
        let left = Duration::from_millis(80);
        let mut skipped = 0;
        while affordable(20, left, costs.estimate("cross-encoder")) == 0 {
            costs.ease("cross-encoder");
            skipped += 1;
            assert!(skipped < 10, "never tried again");
        }
        assert!(skipped > 0, "60 ms a passage cannot fit in 80 ms less the margin at first");
        costs.ease("colbert");
        assert!(costs.estimate("colbert").is_none(), "easing an unmeasured method measures nothing");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_first_call_is_never_cut() {
        assert_eq!(affordable(20, MS(1), None), 20);
        assert_eq!(affordable(20, Duration::ZERO, None), 20);
        assert_eq!(affordable(20, MS(1), Some(Duration::ZERO)), 20, "a free method fits any count");
    }

    #[test]
    fn cuts_to_what_fits_after_the_margin() {
        // 1000 ms left: 25 + 150 ms kept back, 825 ms at 50 ms a passage is 16.
        assert_eq!(affordable(20, MS(1000), Some(MS(50))), 16);
        assert_eq!(affordable(10, MS(1000), Some(MS(50))), 10, "never more than asked");
        assert_eq!(affordable(20, MS(60_000), Some(MS(30))), 20, "no pressure, no cut");
        // 100 ms left: 40 ms kept back, 60 ms fit one 50 ms passage; 50 ms left fit none.
        assert_eq!(affordable(20, MS(100), Some(MS(50))), 1);
        assert_eq!(affordable(20, MS(50), Some(MS(50))), 0);
        assert_eq!(affordable(20, Duration::ZERO, Some(MS(50))), 0);
        assert_eq!(affordable(usize::MAX, Duration::MAX, Some(Duration::from_nanos(1))), usize::MAX);
    }

    #[test]
    fn the_estimate_is_a_moving_average_per_method() {
        let costs = Arc::new(RerankCosts::default());
        assert_eq!(costs.estimate("cross-encoder"), None);
        costs.record("cross-encoder", MS(400), 10);
        assert_eq!(costs.estimate("cross-encoder"), Some(MS(40)), "the first call sets it");
        costs.record("cross-encoder", MS(1000), 10);
        let s = costs.estimate("cross-encoder").map(|d| d.as_secs_f64()).unwrap_or_default();
        assert!((s - (0.3 * 0.1 + 0.7 * 0.04)).abs() < 1e-9, "{s}");
        assert_eq!(costs.estimate("colbert"), None, "another method is its own");
        costs.record("colbert", MS(10), 0);
        assert_eq!(costs.estimate("colbert"), None, "no passages, no measurement");
    }

    #[test]
    fn an_unfinished_call_only_raises_the_estimate() {
        let costs = Arc::new(RerankCosts::default());
        costs.record("m", MS(500), 10);
        costs.record_at_least("m", MS(100), 10);
        assert_eq!(costs.estimate("m"), Some(MS(50)), "a lower bound below the estimate says nothing");
        costs.record_at_least("m", MS(800), 10);
        assert_eq!(costs.estimate("m"), Some(MS(80)));
        costs.record_at_least("new", MS(300), 10);
        assert_eq!(costs.estimate("new"), Some(MS(30)), "a bound is the first estimate");
    }

    #[tokio::test]
    async fn timings_record_by_how_the_call_ended() {
        let costs = Arc::new(RerankCosts::default());
        costs.time("failed", 4).abandon();
        assert_eq!(costs.estimate("failed"), None);
        let t = costs.time("done", 2);
        tokio::time::sleep(MS(20)).await;
        t.finish();
        assert!(costs.estimate("done").is_some_and(|d| d >= MS(10)), "{:?}", costs.estimate("done"));
        let t = costs.time("dropped", 2);
        tokio::time::sleep(MS(20)).await;
        drop(t);
        assert!(costs.estimate("dropped").is_some_and(|d| d >= MS(10)), "{:?}", costs.estimate("dropped"));
    }
}
