//! The filter planner: which search answers a query, chosen from the filter's estimated
//! cardinality, as vector databases with payload indexes do.
//!
//! * **exact scan of the matches** ([`Plan::MatchScan`]): when few documents match, scoring
//!   just them (their slots come from the postings) is cheaper than any graph walk;
//! * **filtered walk** ([`Plan::FilteredWalk`]): one HNSW walk that still steps through the
//!   documents the filter rejects but keeps only matches in its beam; it visits about
//!   `1 / selectivity` times the nodes of a plain walk, so it pays when enough documents match;
//! * **post-filter** ([`Plan::PostFilter`]): when almost everything matches, a plain walk with
//!   the beam widened by `1 / selectivity` (plus a margin) holds enough matches.
//!
//! The exact scan costs about one dot product per match (`m`), the filtered walk about
//! `ef · live / m` node visits, so the scan wins while `m² ≤ scan_factor · ef · live`: the
//! threshold grows with the square root of the collection, and `scan_factor` (the price of a
//! graph visit against a scanned vector, times the visits per beam place) is measured
//! (`bench/src/bin/dense_filtered.rs`, engines/dense/README.md).

/// The planner's tunables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannerOptions {
    /// Collections at or below this many live documents are scanned exactly, filter or not.
    pub full_scan_threshold: usize,
    /// Scan the matches while `matches² ≤ scan_factor · ef · live`.
    pub scan_factor: f64,
    /// Post-filter a plain walk when at least this fraction of the documents matches.
    pub post_filter_from: f64,
}

impl Default for PlannerOptions {
    fn default() -> Self {
        Self { full_scan_threshold: 1000, scan_factor: 10.0, post_filter_from: 0.5 }
    }
}

impl PlannerOptions {
    /// The defaults, but no collection is too small for the graph (tests and benchmarks).
    pub fn without_full_scan() -> Self {
        Self { full_scan_threshold: 0, ..Self::default() }
    }
}

/// How many documents a filter is expected to match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimate {
    /// No filter: every live document.
    All,
    /// Counted from the postings: the matches are among these many candidate slots.
    Postings(usize),
    /// Extrapolated from a sample of the documents (fields without postings).
    Sampled(usize),
}

/// A search plan, as chosen and as run (reported in `usage.notes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Exact scan of every live document, the filter checked on each.
    FullScan,
    /// Plain HNSW walk with this beam, no filter.
    Hnsw {
        /// Beam width.
        ef: usize,
    },
    /// Exact scan of the filter's candidate slots from the postings.
    MatchScan {
        /// Candidate slots scanned.
        candidates: usize,
    },
    /// One HNSW walk keeping only matches in its beam of `ef`.
    FilteredWalk {
        /// Beam width (matches kept).
        ef: usize,
    },
    /// Plain HNSW walk with a widened beam, then the filter.
    PostFilter {
        /// Widened beam width.
        ef: usize,
    },
}

impl Plan {
    /// The planner's choice for a collection of `live` documents, a beam of `ef` (at least the
    /// number of results wanted) and the filter's `estimate`.
    pub fn choose(live: usize, ef: usize, estimate: Estimate, options: &PlannerOptions) -> Plan {
        if live <= options.full_scan_threshold {
            return Plan::FullScan;
        }
        let matches = match estimate {
            Estimate::All => return Plan::Hnsw { ef },
            Estimate::Postings(m) | Estimate::Sampled(m) => m.min(live),
        };
        let selectivity = matches as f64 / live as f64;
        if selectivity >= options.post_filter_from {
            return Plan::PostFilter { ef: post_filter_beam(ef, selectivity, live) };
        }
        let scan_pays = (matches as f64).powi(2) <= options.scan_factor * ef as f64 * live as f64;
        match estimate {
            Estimate::Postings(m) if scan_pays => Plan::MatchScan { candidates: m },
            // Without postings a scan reads every document; only a filter the sample never
            // saw match (rarer than one in the sample) is worth that: the walk would flood the
            // graph anyway.
            Estimate::Sampled(0) => Plan::FullScan,
            _ => Plan::FilteredWalk { ef },
        }
    }

    /// The plan's name in `usage.notes`.
    pub fn name(self) -> &'static str {
        match self {
            Plan::FullScan => "exact scan",
            Plan::Hnsw { .. } => "hnsw",
            Plan::MatchScan { .. } => "exact scan of the matches",
            Plan::FilteredWalk { .. } => "filtered hnsw walk",
            Plan::PostFilter { .. } => "hnsw + post-filter",
        }
    }

    /// A description with its parameters, e.g. `filtered hnsw walk (ef=100)`.
    pub fn describe(self) -> String {
        match self {
            Plan::FullScan => self.name().to_owned(),
            Plan::MatchScan { candidates } => format!("{} ({candidates} candidates)", self.name()),
            Plan::Hnsw { ef } | Plan::FilteredWalk { ef } | Plan::PostFilter { ef } => {
                format!("{} (ef={ef})", self.name())
            }
        }
    }
}

/// The plain beam that holds `ef` matches at `selectivity`, with three standard deviations of
/// margin (the matches in a beam of `b` are about binomial(b, selectivity)).
fn post_filter_beam(ef: usize, selectivity: f64, live: usize) -> usize {
    let ef = ef as f64;
    let beam = (ef + 3.0 * ef.sqrt()) / selectivity.max(f64::MIN_POSITIVE);
    (beam.ceil() as usize).clamp(ef as usize, live.max(ef as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_follows_selectivity() {
        let o = PlannerOptions::default();
        let live = 100_000;
        let at = |m: usize| Plan::choose(live, 100, Estimate::Postings(m), &o);
        assert_eq!(Plan::choose(live, 100, Estimate::All, &o), Plan::Hnsw { ef: 100 });
        assert_eq!(Plan::choose(800, 100, Estimate::Postings(5), &o), Plan::FullScan);
        assert_eq!(at(100), Plan::MatchScan { candidates: 100 }, "0.1%");
        assert_eq!(at(1_000), Plan::MatchScan { candidates: 1_000 }, "1%");
        // sqrt(10 · 100 · 100,000) = 10,000 matches is where the walk starts to pay.
        assert_eq!(at(10_000), Plan::MatchScan { candidates: 10_000 });
        assert_eq!(at(10_100), Plan::FilteredWalk { ef: 100 });
        assert_eq!(at(40_000), Plan::FilteredWalk { ef: 100 });
        assert_eq!(at(50_000), Plan::PostFilter { ef: 260 }, "50%: (100 + 30) / 0.5");
        assert_eq!(at(100_000), Plan::PostFilter { ef: 130 });
        // Without postings a scan reads everything: only a filter the sample never matched.
        assert_eq!(Plan::choose(live, 100, Estimate::Sampled(0), &o), Plan::FullScan);
        assert_eq!(Plan::choose(live, 100, Estimate::Sampled(1_000), &o), Plan::FilteredWalk { ef: 100 });
    }

    #[test]
    fn post_filter_beam_is_bounded_by_the_collection() {
        assert_eq!(post_filter_beam(100, 1.0, 100_000), 130);
        assert_eq!(post_filter_beam(100, 0.001, 5_000), 5_000);
        assert_eq!(post_filter_beam(100, 0.0, 50), 100);
    }
}
