//! The rerank stage of `retrieve` and its funnel `candidateK >= rerank.topN >= k` (§3.3, §7.7),
//! in one place for every server that reranks inside `retrieve`: an engine that switches it on
//! with [`ServerBuilder::rerank_builtin`](crate::ServerBuilder::rerank_builtin) (the framework
//! then runs [`stage`]) and the gateway, which reranks its fused list.
//!
//! - [`Funnel::plan`] reads the validated request: no stage for `rerank: false` or a `cursor`
//!   (a page continues the first-stage list its cursor was minted for); otherwise the reranker
//!   rescores the top `rerank.topN` candidates (default [`Funnel::DEFAULT_TOP_N`]:
//!   `max(k, 20)`, within the request's `candidateK`), at most `rerank.maxCandidates`, and the
//!   best `k` are returned. The recall stage keeps the request's `candidateK` candidates when
//!   it names one, else just the `topN` the reranker rescores.
//! - [`Funnel::apply`] turns the reranker's scores into the result. By default the stage
//!   does not trust the reranker alone: each rescored hit's `score` becomes
//!   `0.5 · reranker + 0.5 · first stage`, both min-max normalised over the rescored hits
//!   (`rerank.fusion: "convex"`, [`RerankFusion`]; `"rrf"` fuses the two ranks instead,
//!   `"none"` keeps the reranker's order and score), because on Cranfield the cross-encoder
//!   alone ranks worse than the list it reranks (`docs/benchmarks.md`). `scores.rerank` holds the
//!   reranker's score and the first-stage score is kept beside it (`scores.sparse`,
//!   `scores.dense`, `scores.fusion`); candidates beyond `topN` are dropped (the best `k`
//!   come from the reranked ones, after a deadline cut also from the rest of the `topN`),
//!   `minScore` applies on the reranker's scale (`scores.rerank`) whatever the fusion, and
//!   `usage.candidates` / `usage.reranked` say what ran. With `mmr`, the inline stage diversifies the reranked hits (rerank, then
//!   diversify, as §3 draws the pipeline) with [`rcp_wire::mmr::diversify`]: by their vectors,
//!   or by their words when they carry none, their merged scores min-max normalised as MMR's
//!   relevance.
//! - The inline stage fits the rerank to the request's deadline (§13.1, [`deadline`]): the
//!   server learns what each reranking method costs per passage (a moving average over its
//!   past calls in this server, one estimator per registered reranker), and when the time left
//!   after recall, less a margin (25 ms and 15% of it), cannot hold `topN` passages at that
//!   cost, the reranker scores only the best `n` that fit. The other candidates of the `topN`
//!   are not dropped: they follow the rescored ones in first-stage order (each `score` just
//!   below the one before, the first-stage score kept in `scores`, `minScore` judged on that
//!   score), so `k` hits still come back. When not even one passage fits, the reranker is not
//!   called and the answer is the first stage's, never an error. `usage.reranked` counts the
//!   rescored hits and `usage.notes` says what was cut and why ("reranked 12 of 20 candidates
//!   to meet the deadline (~31 ms per passage); ..."). Before a method's first call there is
//!   no estimate and nothing is cut; a call the deadline ends teaches a lower bound.

pub(crate) mod deadline;
pub(crate) mod fusion;
pub(crate) mod stage;

use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::mmr::{self, Likeness};
use rcp_wire::retrieve::{RERANK_FUSION_KEY, RerankFusion, RerankOption};
use rcp_wire::{Hit, InputItem, Mode, RetrieveParams, RetrieveResult};

use crate::handler::RetrieveRequest;

/// One request's rerank stage: how many candidates recall keeps and which of them are
/// rescored, by which method (§7.7).
#[derive(Debug, Clone, PartialEq)]
pub struct Funnel {
    /// Candidates the recall stage is asked for (`candidateK`, never below `top_n`).
    pub candidates: usize,
    /// Candidates the reranker rescores (`rerank.topN`, at most `rerank.maxCandidates`).
    pub top_n: usize,
    /// The final result count.
    pub k: usize,
    /// The method asked of the reranker (§7.6).
    pub method: String,
    /// The model asked of the reranker, if the request names one.
    pub model: Option<String>,
    /// The key under which each hit's first-stage score is kept in `scores`.
    pub first_stage: String,
    /// MMR's `lambda` when the reranked hits are diversified after the rerank (the pipeline's
    /// order, §3), from the hits' vectors; `None` leaves them in reranked order.
    pub diversify: Option<f64>,
    /// How the reranker's ranking is merged with the first stage's (`rerank.fusion`; by
    /// default [`Funnel::DEFAULT_FUSION`], the convex combination).
    pub fusion: RerankFusion,
    /// The `meta` key of a hit's title, read before its text ([`Funnel::passage`]).
    pub title_field: String,
}

/// What of a request decides its funnel.
struct Ask<'a> {
    /// The request continues a page (`cursor`): never reranked.
    continues_page: bool,
    /// `rerank` as sent.
    rerank: Option<&'a RerankOption>,
    /// The mode that runs.
    mode: Option<&'a Mode>,
    /// Whether the client set `candidateK`.
    explicit_candidate_k: bool,
}

impl Funnel {
    /// The funnel of a validated request (the framework has checked `candidateK >= topN >= k`
    /// and clamped each to `maxK` / `maxCandidates`), or `None` when it asks for no rerank
    /// (`rerank: false`) or continues a page (`cursor`). An absent `rerank` means the server's
    /// default stage: `default_method` over the top [`Funnel::DEFAULT_TOP_N`] (or `k`, if
    /// larger), fused with the first stage by [`Funnel::DEFAULT_FUSION`]. `max_candidates` is
    /// the reranker's `rerank.maxCandidates`.
    pub fn plan(
        params: &RetrieveParams,
        k: usize,
        candidate_k: usize,
        default_method: &str,
        max_candidates: Option<u32>,
    ) -> Option<Self> {
        let ask = Ask {
            continues_page: params.cursor.is_some(),
            rerank: params.rerank.as_ref(),
            mode: params.mode.as_ref(),
            explicit_candidate_k: params.candidate_k.is_some(),
        };
        Self::plan_ask(ask, k, candidate_k, default_method, max_candidates)
    }

    /// [`Self::plan`] of a resolved request.
    pub(crate) fn plan_request(
        req: &RetrieveRequest,
        default_method: &str,
        max_candidates: Option<u32>,
    ) -> Option<Self> {
        let ask = Ask {
            continues_page: req.cursor.is_some(),
            rerank: req.rerank_option(),
            mode: req.mode.as_ref(),
            explicit_candidate_k: req.passthrough.explicit_candidate_k,
        };
        Self::plan_ask(ask, req.k, req.candidate_k, default_method, max_candidates)
    }

    fn plan_ask(
        ask: Ask<'_>,
        k: usize,
        candidate_k: usize,
        default_method: &str,
        max_candidates: Option<u32>,
    ) -> Option<Self> {
        if ask.continues_page {
            return None;
        }
        let stage = match ask.rerank {
            Some(RerankOption::Enabled(false)) => return None,
            Some(RerankOption::Stage(s)) => s.clone(),
            Some(RerankOption::Enabled(true)) | None => Default::default(),
        };
        let ceiling = max_candidates.map_or(usize::MAX, |m| m as usize);
        let top_n = stage
            .top_n
            .map_or(candidate_k.max(k).min(Self::DEFAULT_TOP_N.max(k)), |n| usize::try_from(n).unwrap_or(usize::MAX));
        let top_n = top_n.min(ceiling).max(1);
        let first_stage = match ask.mode {
            Some(Mode::Hybrid) => "fusion".to_owned(),
            Some(m) => m.as_str().to_owned(),
            None => "recall".to_owned(),
        };
        // Candidates beyond `top_n` are never rescored and the answer is cut from the rescored
        // ones, so without an explicit `candidateK` recall fetches just those.
        let candidates = if ask.explicit_candidate_k { candidate_k.max(top_n) } else { top_n };
        Some(Self {
            candidates,
            top_n,
            k,
            method: stage.method.unwrap_or_else(|| default_method.to_owned()),
            model: stage.model,
            first_stage,
            diversify: None,
            fusion: stage.fusion.unwrap_or(Self::DEFAULT_FUSION),
            title_field: Self::DEFAULT_TITLE_FIELD.to_owned(),
        })
    }

    /// Advertises an inline rerank stage in `retrieve` (§6.1): `rerankBuiltin`, and the
    /// `rerank.fusion` values this stage accepts under [`RERANK_FUSION_KEY`], the default
    /// first.
    pub fn advertise(retrieve: &mut RetrieveCapability) {
        retrieve.rerank_builtin = Some(true);
        let mut values = vec![Self::DEFAULT_FUSION.as_str()];
        values.extend(RerankFusion::ALL.iter().map(|f| f.as_str()).filter(|&f| f != Self::DEFAULT_FUSION.as_str()));
        retrieve.extra.insert(RERANK_FUSION_KEY.into(), values.into());
    }

    /// Keeps `fusion` as the key of the first-stage score (a gateway's fused list).
    pub fn with_first_stage(mut self, key: impl Into<String>) -> Self {
        self.first_stage = key.into();
        self
    }

    /// The `meta` key of a hit's title unless the engine declares another
    /// ([`crate::Retrieve::title_field`]).
    pub const DEFAULT_TITLE_FIELD: &'static str = "title";

    /// The passages the reranker scores: [`Funnel::passage`] of each of the top `top_n` hits,
    /// and how many of them carry neither text nor title (scored as empty passages).
    pub fn passages(&self, hits: &[Hit]) -> (Vec<InputItem>, usize) {
        let head = &hits[..self.top_n.min(hits.len())];
        let passages: Vec<String> = head.iter().map(|h| Self::passage(h, &self.title_field)).collect();
        let missing = passages.iter().filter(|p| p.is_empty()).count();
        (passages.into_iter().map(InputItem::Text).collect(), missing)
    }

    /// What a reranker reads of `hit`, the passage a person would: its title (the string at
    /// `meta.<title_field>`), a line break, then its text; the text alone when it already begins
    /// with the title (as many collections store it), the title alone when there is no text.
    /// One rule for every engine's inline stage and the gateway's.
    pub fn passage(hit: &Hit, title_field: &str) -> String {
        let text = hit.text.as_deref().unwrap_or_default();
        let title = hit.meta.as_ref().and_then(|m| m.get(title_field)).and_then(|t| t.as_str()).map(str::trim);
        match title.filter(|t| !t.is_empty() && !text.trim_start().starts_with(t)) {
            Some(t) if text.trim().is_empty() => t.to_owned(),
            Some(t) => format!("{t}\n{text}"),
            None => text.to_owned(),
        }
    }

    /// Applies the reranker's `scores` to the recall stage's `result`: one score per passage of
    /// [`Funnel::passages`], in order, or per passage of a head of them (a deadline cut: the
    /// reranker had time for only the first `scores.len()`). Each rescored hit is scored by
    /// [`Funnel::fusion`] (see [`Funnel::fused_scores`]), best first (equal scores keep their
    /// first-stage order), those whose reranker score is below `min_score` left out. The
    /// passages not rescored follow in first-stage order, those whose first-stage score is below
    /// `min_score` left out; when rescored hits precede them, each keeps its first-stage score in
    /// `scores` and takes a `score` just below the one before it (so `score` still orders the
    /// list); with no rescored hit the result is the first stage's. The whole is cut to `k`;
    /// `usage.reranked` set to the rescored count, and `usage.candidates` unless the recall
    /// stage counted its own.
    pub fn apply(&self, result: &mut RetrieveResult, scores: Vec<f64>, min_score: Option<f64>) {
        let candidates = result.hits.len();
        let planned = self.top_n.min(candidates);
        let n = scores.len().min(planned);
        result.hits.truncate(planned);
        let unscored = result.hits.split_off(n);
        let first: Vec<f64> = result.hits.iter().map(|h| h.score).collect();
        let fused = Self::fused_scores(self.fusion, &first, &scores[..n]);
        let mut head: Vec<Hit> = std::mem::take(&mut result.hits)
            .into_iter()
            .zip(scores.into_iter().zip(fused))
            .filter(|(_, (s, _))| min_score.is_none_or(|min| *s >= min))
            .map(|(h, (s, f))| self.rescored(h, s, f))
            .collect();
        head.sort_by(|a, b| b.score.total_cmp(&a.score));
        let usage = result.usage.get_or_insert_with(Default::default);
        if let Some(lambda) = self.diversify {
            let (order, likeness) = mmr::diversify(&head, lambda, self.k);
            if likeness == Likeness::Words {
                usage
                    .notes
                    .push("mmr: the reranked hits carry no vectors of one dimension; likeness by their words".into());
            }
            let mut slots: Vec<Option<Hit>> = head.into_iter().map(Some).collect();
            head = order.into_iter().filter_map(|i| slots[i].take()).collect();
        }
        if self.k > self.top_n && n == self.top_n {
            usage.notes.push(format!(
                "k ({}) exceeds the {} candidates the reranker can score (rerank.maxCandidates): at most {} hits",
                self.k, self.top_n, self.top_n
            ));
        }
        head.truncate(self.k);
        let room = self.k.saturating_sub(head.len());
        let mut floor = head.iter().map(|h| h.score).reduce(f64::min);
        let tail = unscored.into_iter().filter(|h| min_score.is_none_or(|min| h.score >= min)).take(room);
        for mut hit in tail {
            if let Some(below) = floor.map(f64::next_down) {
                let scores = hit.scores.get_or_insert_with(Default::default);
                scores.entry(self.first_stage.clone()).or_insert(hit.score);
                hit.score = below;
                floor = Some(below);
            }
            head.push(hit);
        }
        result.hits = head;
        // The recall stage's own count (an engine's, a gateway's sum over engines) stands.
        usage.candidates.get_or_insert(candidates as u64);
        usage.reranked = Some(n as u64);
    }

    /// `hit` scored `fused`, the reranker's `score` in `scores.rerank` (NaN stands as the
    /// lowest number), its first-stage score kept.
    fn rescored(&self, mut hit: Hit, score: f64, fused: f64) -> Hit {
        let score = if score.is_nan() { f64::MIN } else { score };
        let scores = hit.scores.get_or_insert_with(Default::default);
        scores.entry(self.first_stage.clone()).or_insert(hit.score);
        scores.insert("rerank".into(), score);
        hit.score = fused;
        hit
    }
}

#[cfg(test)]
mod tests;
