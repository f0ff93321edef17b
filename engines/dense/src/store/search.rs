//! Searching the table: the graph with a widening beam, a filtered walk, and the exact scan
//! that guarantees `want` whenever that many documents match.

use rcp_protocol::filter::Filter;

use crate::ann::{self, Scored};

use super::table::Table;

/// How a search was served, for `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchPath {
    /// The HNSW graph, with this beam width.
    Hnsw {
        /// The final `ef`.
        ef: usize,
    },
    /// An exact scan of a collection at or below the full-scan threshold.
    Exact,
    /// An exact scan after the graph could not fill the request (a very selective filter).
    ExactFallback,
}

impl Table {
    /// The `want` best live documents for a unit query vector among those `filter` accepts,
    /// each scored by its exact cosine.
    ///
    /// Collections up to `full_scan_threshold` live documents are scanned exactly. Otherwise:
    /// 1. the plain graph search with beam `ef` (at least `want`) returns the whole beam, and
    ///    tombstones and documents the filter rejects are dropped; when fewer than `want` remain,
    ///    the beam is widened ×4 and the search repeated once;
    /// 2. with a filter, a filtered graph walk follows (the filter applied during the walk,
    ///    which reaches the matches of a selective filter);
    /// 3. an exact scan, so `want` is met whenever that many documents match.
    pub fn search(
        &self,
        query: &[f32],
        want: usize,
        ef: usize,
        filter: Option<&Filter>,
        full_scan_threshold: usize,
    ) -> (Vec<Scored>, SearchPath) {
        let keep = |s: usize| match self.docs.get(s) {
            Some(Some(d)) => filter.is_none_or(|f| f.matches(&d.meta)),
            _ => false,
        };
        let live = self.live();
        if want == 0 || live == 0 {
            return (Vec::new(), SearchPath::Exact);
        }
        if live <= full_scan_threshold {
            return (ann::exact(&self.vectors, self.dim, query, want, None, &keep), SearchPath::Exact);
        }
        let enough = want.min(live);
        let rescore = |mut found: Vec<Scored>| {
            for s in &mut found {
                s.score = ann::dot(query, self.vector(s.slot));
            }
            found.sort_by(ann::by_score);
            found.truncate(want);
            found
        };
        let mut beam = ef.max(want);
        for _ in 0..2 {
            let mut found = self.ann.search(query, beam, beam, None);
            found.retain(|s| keep(s.slot));
            if found.len() >= enough {
                return (rescore(found), SearchPath::Hnsw { ef: beam });
            }
            beam = beam.saturating_mul(4).min(self.docs.len().max(want));
        }
        if filter.is_some() {
            let found = self.ann.search(query, want, ef.max(want), Some(&keep));
            if found.len() >= enough {
                return (rescore(found), SearchPath::Hnsw { ef: ef.max(want) });
            }
        }
        (ann::exact(&self.vectors, self.dim, query, want, None, &keep), SearchPath::ExactFallback)
    }
}
