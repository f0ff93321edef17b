//! Searching the table: the planner's choice ([`Plan::choose`]) run against the graph or the
//! vectors, then the fallbacks that guarantee `want` results whenever that many documents
//! match.

use rcp_wire::filter::Filter;

use crate::ann::{self, Scored};

use super::plan::{Estimate, Plan, PlannerOptions};
use super::postings::Candidates;
use super::table::Table;

/// Documents sampled to estimate a filter the postings cannot answer.
const SAMPLE: usize = 512;

/// How a search was served: the filter's estimate, the planner's choice and the plan whose
/// results were returned (a later one when the choice came up short).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The filter's estimated matches.
    pub estimate: Estimate,
    /// The planner's choice.
    pub chosen: Plan,
    /// The plan that produced the results.
    pub ran: Plan,
}

impl Route {
    /// The note for `usage.notes`: every filtered search says which plan ran and why; an
    /// unfiltered one only when it had to leave the plain walk.
    pub fn note(&self) -> Option<String> {
        let ran = if self.ran == self.chosen {
            self.ran.describe()
        } else {
            format!("{} came up short, then {}", self.chosen.describe(), self.ran.describe())
        };
        match self.estimate {
            Estimate::All if self.ran == self.chosen => None,
            Estimate::All => Some(format!("search: {ran}")),
            Estimate::Postings(m) => Some(format!("filter plan: {ran}; {m} candidate documents by the postings")),
            Estimate::Sampled(m) => Some(format!("filter plan: {ran}; about {m} matching documents by a sample")),
        }
    }
}

impl Table {
    /// The `want` best live documents for a unit query vector among those `filter` accepts,
    /// each scored by its exact cosine, and how they were found.
    ///
    /// The filter's cardinality comes from the postings (or a sample of the documents for
    /// fields without postings); [`Plan::choose`] picks the search; a plan that returns fewer
    /// than `want` results while more may match is followed by the next one: a post-filtered
    /// walk by a filtered walk, a walk by an exact scan (of the candidates when the postings
    /// gave them), an unfiltered walk first by a ×4 beam.
    pub fn search(
        &self,
        query: &[f32],
        want: usize,
        ef: usize,
        filter: Option<&Filter>,
        options: &PlannerOptions,
    ) -> (Vec<Scored>, Route) {
        let candidates = filter.and_then(|f| self.meta.candidates(f));
        let estimate = match (filter, &candidates) {
            (None, _) => Estimate::All,
            (Some(_), Some(c)) => Estimate::Postings(c.len()),
            (Some(f), None) => Estimate::Sampled(self.sample_matches(f)),
        };
        let live = self.live();
        let chosen = Plan::choose(live, ef.max(want), estimate, options);
        let mut route = Route { estimate, chosen, ran: chosen };
        if want == 0 || live == 0 {
            return (Vec::new(), route);
        }
        let bound = match estimate {
            Estimate::Postings(m) => m,
            Estimate::All | Estimate::Sampled(_) => live,
        };
        let enough = want.min(bound);
        let mut plan = Some(chosen);
        while let Some(p) = plan {
            let found = self.run(p, query, want, filter, candidates.as_ref());
            route.ran = p;
            plan = self.next_plan(p, ef.max(want), candidates.as_ref().map(Candidates::len));
            if found.len() >= enough || plan.is_none() {
                return (found, route);
            }
        }
        (Vec::new(), route)
    }

    /// What follows a plan that came up short; `None` after an exact one.
    fn next_plan(&self, plan: Plan, ef: usize, candidates: Option<usize>) -> Option<Plan> {
        let exact = candidates.map_or(Plan::FullScan, |candidates| Plan::MatchScan { candidates });
        match plan {
            Plan::Hnsw { ef: used } => {
                let wider = used.saturating_mul(4).min(self.docs.len());
                Some(if used == ef && wider > used { Plan::Hnsw { ef: wider } } else { Plan::FullScan })
            }
            Plan::PostFilter { .. } => Some(Plan::FilteredWalk { ef }),
            Plan::FilteredWalk { .. } => Some(exact),
            Plan::MatchScan { .. } | Plan::FullScan => None,
        }
    }

    /// Runs one plan: up to `want` results, best first, exact cosines. The graph plans may
    /// return fewer than exist; the scans never do. Public so benchmarks can force a plan.
    pub fn run(
        &self,
        plan: Plan,
        query: &[f32],
        want: usize,
        filter: Option<&Filter>,
        candidates: Option<&Candidates>,
    ) -> Vec<Scored> {
        let matches = |s: usize| match self.docs.get(s) {
            Some(Some(d)) => filter.is_none_or(|f| f.matches(&d.meta)),
            _ => false,
        };
        // With candidates, the bitmap rejects most slots before any metadata is read.
        let keep = |s: usize| match candidates {
            Some(c) => {
                u32::try_from(s).is_ok_and(|s32| c.slots.contains(s32))
                    && (if c.exact { self.docs.get(s).is_some_and(Option::is_some) } else { matches(s) })
            }
            None => matches(s),
        };
        match plan {
            Plan::FullScan => self.vectors.exact(query, want, None, &keep),
            Plan::MatchScan { .. } => match candidates {
                Some(c) => self.vectors.exact(query, want, Some(&mut c.slots.iter().map(|s| s as usize)), &keep),
                None => self.vectors.exact(query, want, None, &keep),
            },
            Plan::Hnsw { ef } | Plan::PostFilter { ef } => {
                let mut found = self.ann.search(query, ef, ef, None);
                found.retain(|s| keep(s.slot));
                self.rescore(query, found, want)
            }
            Plan::FilteredWalk { ef } => {
                let found = self.ann.search(query, ef, ef, Some(&keep));
                self.rescore(query, found, want)
            }
        }
    }

    /// Graph results scored with the exact `f32` cosine, best first, cut to `want`.
    fn rescore(&self, query: &[f32], mut found: Vec<Scored>, want: usize) -> Vec<Scored> {
        for s in &mut found {
            s.score = ann::dot(query, self.vector(s.slot));
        }
        found.sort_by(ann::by_score);
        found.truncate(want);
        found
    }

    /// The filter's matches among live documents, extrapolated from [`SAMPLE`] slots spread
    /// over the table by the golden-ratio sequence (no stride to alias with a periodic layout).
    fn sample_matches(&self, filter: &Filter) -> usize {
        const PHI: f64 = 0.618_033_988_749_894_9;
        let n = self.docs.len();
        let (mut seen, mut hits) = (0usize, 0usize);
        for k in 0..SAMPLE.min(n) {
            let slot = (((k as f64 + 0.5) * PHI).fract() * n as f64) as usize;
            if let Some(Some(doc)) = self.docs.get(slot) {
                seen += 1;
                hits += usize::from(filter.matches(&doc.meta));
            }
        }
        if seen == 0 { 0 } else { (hits as f64 / seen as f64 * self.live() as f64).round() as usize }
    }
}
