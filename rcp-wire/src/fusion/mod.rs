//! Federation-side fusion of ranked lists from several engines (§16.3): Reciprocal Rank
//! Fusion (the default), weighted min-max score fusion, and convex combination anchored on
//! each engine's advertised `scoreFloor` (§6.1).
//!
//! The result is a total order that does not depend on the order of the input lists (engine
//! response arrival order): contributions are summed in engine-name order, so shuffled input
//! produces bit-identical scores, and ties are broken by (1) higher fused score, (2) higher
//! summed engine weight, (3) lexicographically smaller stringified id (§16.3).
//!
//! The body (`text`, `content`, `citation` and every other field) is the richest one returned
//! (§16.3 dedup): the longest `text`, else the most `content` blocks, ties by better rank then
//! engine name. Every fused hit carries, in `meta`:
//! - `engine`: the engine whose body is kept (§16.3 "its origin"), with its `engineRank` and
//!   `engineScore` in its own list, so a hit never names one engine while carrying another's
//!   text or citation (the public SDKs' `rrf_fuse` also names the body's engine);
//! - `engineRanks` / `engineScores`: objects engine → 1-based rank / original score;
//! - `fusedScore`: the fused score, which is also the hit's `score`;
//! - `engineMeta` (only when engines disagree): engine → the `meta` values of that engine that
//!   lost a conflict.
//!
//! The one rule for `meta` (§16.3 "merge `meta`"): every key any engine returned is kept; where
//! engines return different values for one key, the body's engine wins, and among the others
//! the richer hit wins; each losing value stays visible under `engineMeta.<engine>.<key>`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::Meta;
use crate::error::RcpError;
use crate::retrieve::Hit;

/// The conventional RRF constant `rrfK` (§16.3, Cormack et al. 2009).
pub const DEFAULT_RRF_K: f64 = 60.0;

/// The default convex mixing weight `α` (§16.3).
pub const DEFAULT_ALPHA: f64 = 0.5;

/// The engine name that receives `α` in a two-engine convex fusion unless another is named
/// (§16.3 writes `α · norm_dense + (1-α) · norm_lexical`).
pub const DEFAULT_ALPHA_ENGINE: &str = "dense";

/// One engine's ranked result list, input to [`fuse`] (§16.3).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineList {
    /// The engine's registry id; becomes `meta.engine` and the keys of `meta.engineRanks`.
    /// Must be unique among the lists being fused.
    pub engine: String,
    /// The engine's fusion weight (`weight_engine` of §16.3); finite and `>= 0`.
    pub weight: f64,
    /// Hits in rank order: `hits[0]` has rank 1. A repeated id keeps its first (best) rank.
    pub hits: Vec<Hit>,
    /// The engine's advertised `retrieve.scoreFloor` (§6.1); required by convex fusion.
    pub score_floor: Option<f64>,
}

impl EngineList {
    /// A list with weight `1.0` and no score floor (§16.3).
    pub fn new(engine: impl Into<String>, hits: Vec<Hit>) -> Self {
        Self { engine: engine.into(), weight: 1.0, hits, score_floor: None }
    }

    /// Sets the fusion weight (§16.3).
    pub fn with_weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the engine's advertised `scoreFloor` (§6.1), enabling convex fusion.
    pub fn with_score_floor(mut self, floor: f64) -> Self {
        self.score_floor = Some(floor);
        self
    }
}

/// A fusion strategy of §16.3 (`retrieve.fusion.method`: `rrf`, `weighted`, `convex`).
#[derive(Debug, Clone, PartialEq)]
pub enum FusionMethod {
    /// Reciprocal Rank Fusion: `Σ weight_e / (rrf_k + rank_e(d))`. The default.
    Rrf {
        /// The damping constant `rrfK` (default 60); finite and `>= 0`.
        rrf_k: f64,
    },
    /// Weighted score fusion: `Σ weight_e · norm_e(d)`, with per-engine min-max
    /// normalisation over that engine's returned set (all-equal scores normalise to `1.0`).
    Weighted,
    /// Convex combination (TM2C2): like [`FusionMethod::Weighted`] but the lower end of each
    /// engine's normalisation interval is its advertised `scoreFloor`:
    /// `norm_e(d) = (score - floor_e) / (max_e - floor_e)`, clamped at `0` below the floor
    /// and `1.0` when `max_e <= floor_e` and `score >= floor_e`.
    ///
    /// `α` mapping: when exactly two lists are fused and one of them is named
    /// `alpha_engine`, that engine's contribution is multiplied by `alpha` and the other's by
    /// `1 - alpha` (on top of the engine weights). Otherwise `alpha` is not applied and the
    /// fusion is `Σ weight_e · norm_e(d)`. Naming the engine (rather than using list
    /// position) keeps the result independent of input order.
    Convex {
        /// The mixing weight `α` in `[0, 1]` (default 0.5).
        alpha: f64,
        /// The engine receiving `α` (default [`DEFAULT_ALPHA_ENGINE`], `"dense"`).
        alpha_engine: String,
    },
}

impl Default for FusionMethod {
    /// RRF with `rrfK = 60`, the §16.3 default.
    fn default() -> Self {
        Self::rrf()
    }
}

impl FusionMethod {
    /// RRF with the default `rrfK = 60` (§16.3).
    pub fn rrf() -> Self {
        FusionMethod::Rrf { rrf_k: DEFAULT_RRF_K }
    }

    /// Convex combination with this `α`, applied to the engine named `"dense"` (§16.3).
    pub fn convex(alpha: f64) -> Self {
        FusionMethod::Convex { alpha, alpha_engine: DEFAULT_ALPHA_ENGINE.to_string() }
    }

    /// Convex combination with `α` applied to the named engine (§16.3).
    pub fn convex_for(alpha: f64, alpha_engine: impl Into<String>) -> Self {
        FusionMethod::Convex { alpha, alpha_engine: alpha_engine.into() }
    }

    /// The wire name (§7.7 `fusion.method`): `"rrf"`, `"weighted"` or `"convex"`.
    pub fn name(&self) -> &'static str {
        match self {
            FusionMethod::Rrf { .. } => "rrf",
            FusionMethod::Weighted => "weighted",
            FusionMethod::Convex { .. } => "convex",
        }
    }

    /// The method for a wire name (§7.7 `fusion.method`) with default parameters, or `None`
    /// for an unknown name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "rrf" => Some(Self::rrf()),
            "weighted" => Some(FusionMethod::Weighted),
            "convex" => Some(Self::convex(DEFAULT_ALPHA)),
            _ => None,
        }
    }
}

/// Why [`fuse`] could not fuse (§16.3).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FusionError {
    /// Convex fusion needs every engine's `scoreFloor`; a client **MUST** fall back to RRF
    /// (§16.3). See [`fuse_or_fallback`].
    #[error("convex fusion needs a scoreFloor from every engine; missing: {}", engines.join(", "))]
    MissingScoreFloor {
        /// The engines without a (finite) floor, sorted by name.
        engines: Vec<String>,
    },
    /// Two input lists share an engine name, so their contributions cannot be told apart.
    #[error("engine '{0}' appears in more than one fusion input list")]
    DuplicateEngine(String),
    /// A parameter is out of range; `param` is its params path (`fusion.rrfK`,
    /// `fusion.alpha`, `fusion.weights`).
    #[error("invalid fusion parameter {param}: {detail}")]
    InvalidParameter {
        /// The params path of the offending parameter.
        param: &'static str,
        /// What is wrong and what is allowed.
        detail: String,
    },
}

impl From<FusionError> for RcpError {
    /// Maps to the protocol error a server answers with (§12): a missing floor is `-32005`
    /// on `fusion.method`, a bad parameter `-32602` on its path, a duplicate engine `-32603`.
    fn from(e: FusionError) -> Self {
        let detail = e.to_string();
        match e {
            FusionError::MissingScoreFloor { .. } => {
                RcpError::option_unsupported("fusion.method", "convex", &["rrf", "weighted"]).with_detail(detail)
            }
            FusionError::InvalidParameter { param, .. } => RcpError::invalid_params(param, detail),
            FusionError::DuplicateEngine(_) => RcpError::internal(detail),
        }
    }
}

/// The outcome of [`fuse_or_fallback`]: the fused hits, the method actually used, and a
/// note (for `usage.notes`, §16.2) when it differs from the one asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct FuseOutcome {
    /// The fused hits, best first, at most `k`.
    pub hits: Vec<Hit>,
    /// The method that produced `hits`.
    pub method: FusionMethod,
    /// Set when the requested method was replaced (convex → RRF).
    pub note: Option<String>,
}

/// Fuses per-engine ranked lists into one list of at most `k` hits (§16.3).
///
/// See the module docs for scoring, tie-breaking, dedup and the `meta` keys added. Errors:
/// [`FusionError::MissingScoreFloor`] for convex fusion when a list has no finite
/// `score_floor`; [`FusionError::InvalidParameter`] for a non-finite or negative weight or
/// `rrfK`, or `α` outside `[0, 1]`; [`FusionError::DuplicateEngine`].
pub fn fuse(lists: &[EngineList], method: &FusionMethod, k: usize) -> Result<Vec<Hit>, FusionError> {
    check_params(lists, method)?;
    let mut order: Vec<&EngineList> = lists.iter().collect();
    order.sort_by(|a, b| a.engine.cmp(&b.engine));
    if let Some(w) = order.windows(2).find(|w| w[0].engine == w[1].engine) {
        return Err(FusionError::DuplicateEngine(w[0].engine.clone()));
    }
    if matches!(method, FusionMethod::Convex { .. }) {
        let missing: Vec<String> =
            order.iter().filter(|l| !l.score_floor.is_some_and(f64::is_finite)).map(|l| l.engine.clone()).collect();
        if !missing.is_empty() {
            return Err(FusionError::MissingScoreFloor { engines: missing });
        }
    }

    // Contributions per document, pushed in engine-name order.
    let mut docs: BTreeMap<String, Vec<Contribution<'_>>> = BTreeMap::new();
    for (engine_idx, list) in order.iter().enumerate() {
        let scale = list.weight * alpha_multiplier(method, &order, &list.engine);
        let norm = Normaliser::new(method, list);
        let mut seen = HashSet::new();
        for (pos, hit) in list.hits.iter().enumerate() {
            let key = hit.key();
            if !seen.insert(key.clone()) {
                continue;
            }
            let rank = pos + 1;
            let contribution = match method {
                FusionMethod::Rrf { rrf_k } => list.weight / (rrf_k + rank as f64),
                _ => scale * norm.apply(hit.score),
            };
            docs.entry(key).or_default().push(Contribution { engine_idx, rank, contribution, hit });
        }
    }

    let mut ranked: Vec<Ranked<'_>> = docs
        .into_iter()
        .map(|(key, contributions)| {
            let fused = contributions.iter().fold(0.0, |acc, c| acc + c.contribution);
            let weight = contributions.iter().fold(0.0, |acc, c| acc + order[c.engine_idx].weight);
            Ranked { key, fused, weight, contributions }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.fused.total_cmp(&a.fused).then_with(|| b.weight.total_cmp(&a.weight)).then_with(|| a.key.cmp(&b.key))
    });
    ranked.truncate(k);
    Ok(ranked.into_iter().map(|r| build_hit(r, &order)).collect())
}

/// [`fuse`], falling back to RRF (`rrfK = 60`) when convex fusion lacks a `scoreFloor`, as
/// §16.3 requires of clients; the outcome's `note` says so. Other errors are returned.
pub fn fuse_or_fallback(lists: &[EngineList], method: &FusionMethod, k: usize) -> Result<FuseOutcome, FusionError> {
    match fuse(lists, method, k) {
        Ok(hits) => Ok(FuseOutcome { hits, method: method.clone(), note: None }),
        Err(FusionError::MissingScoreFloor { engines }) => {
            let fallback = FusionMethod::rrf();
            let hits = fuse(lists, &fallback, k)?;
            let note = format!(
                "fusion: convex needs scoreFloor from every engine (missing: {}); fell back to rrf",
                engines.join(", ")
            );
            Ok(FuseOutcome { hits, method: fallback, note: Some(note) })
        }
        Err(e) => Err(e),
    }
}

struct Contribution<'a> {
    engine_idx: usize,
    rank: usize,
    contribution: f64,
    hit: &'a Hit,
}

struct Ranked<'a> {
    key: String,
    fused: f64,
    weight: f64,
    contributions: Vec<Contribution<'a>>,
}

/// `values` mapped to `[0, 1]` by their finite minimum and maximum; all equal → 1, non-finite
/// → 0 (an unscored candidate, or `f64::MIN` standing in for one, counts as the worst).
pub fn min_max(values: &[f64]) -> Vec<f64> {
    let usable = |v: f64| v.is_finite() && v > f64::MIN;
    let (lo, hi) = values
        .iter()
        .copied()
        .filter(|&v| usable(v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    values
        .iter()
        .map(|&v| match () {
            _ if !usable(v) => 0.0,
            _ if hi > lo => (v - lo) / (hi - lo),
            _ => 1.0,
        })
        .collect()
}

fn invalid(param: &'static str, detail: String) -> FusionError {
    FusionError::InvalidParameter { param, detail }
}

fn check_params(lists: &[EngineList], method: &FusionMethod) -> Result<(), FusionError> {
    for l in lists {
        if !(l.weight.is_finite() && l.weight >= 0.0) {
            return Err(invalid(
                "fusion.weights",
                format!("weight of engine '{}' is {}; expected a finite number >= 0", l.engine, l.weight),
            ));
        }
    }
    match method {
        FusionMethod::Rrf { rrf_k } if !(rrf_k.is_finite() && *rrf_k >= 0.0) => {
            Err(invalid("fusion.rrfK", format!("rrfK is {rrf_k}; expected a finite number >= 0")))
        }
        FusionMethod::Convex { alpha, .. } if !(0.0..=1.0).contains(alpha) => {
            Err(invalid("fusion.alpha", format!("alpha is {alpha}; expected a number in [0, 1]")))
        }
        _ => Ok(()),
    }
}

/// The convex `α` factor for `engine` (see [`FusionMethod::Convex`]); `1.0` otherwise.
fn alpha_multiplier(method: &FusionMethod, order: &[&EngineList], engine: &str) -> f64 {
    match method {
        FusionMethod::Convex { alpha, alpha_engine }
            if order.len() == 2 && order.iter().any(|l| l.engine == *alpha_engine) =>
        {
            if engine == alpha_engine {
                *alpha
            } else {
                1.0 - alpha
            }
        }
        _ => 1.0,
    }
}

/// Per-engine score normalisation for weighted and convex fusion (§16.3).
struct Normaliser {
    low: f64,
    high: f64,
    convex: bool,
}

impl Normaliser {
    fn new(method: &FusionMethod, list: &EngineList) -> Self {
        let finite = list.hits.iter().map(|h| h.score).filter(|s| s.is_finite());
        let high = finite.clone().fold(f64::NEG_INFINITY, f64::max);
        match method {
            FusionMethod::Convex { .. } => {
                Normaliser { low: list.score_floor.unwrap_or(f64::NEG_INFINITY), high, convex: true }
            }
            _ => Normaliser { low: finite.fold(f64::INFINITY, f64::min), high, convex: false },
        }
    }

    fn apply(&self, score: f64) -> f64 {
        if !score.is_finite() {
            return 0.0;
        }
        if self.high > self.low {
            let n = (score - self.low) / (self.high - self.low);
            if self.convex { n.max(0.0) } else { n }
        } else if score >= self.low {
            1.0
        } else {
            0.0
        }
    }
}

/// Richness order for dedup (§16.3): longer text, then more content blocks, then better
/// rank, then smaller engine name. `Greater` means richer.
fn richness(a: &Contribution<'_>, b: &Contribution<'_>) -> Ordering {
    let text_len = |c: &Contribution<'_>| c.hit.text.as_ref().map_or(0, |t| t.chars().count());
    let blocks = |c: &Contribution<'_>| c.hit.content.as_ref().map_or(0, Vec::len);
    text_len(a)
        .cmp(&text_len(b))
        .then_with(|| blocks(a).cmp(&blocks(b)))
        .then_with(|| b.rank.cmp(&a.rank))
        .then_with(|| b.engine_idx.cmp(&a.engine_idx))
}

fn build_hit(r: Ranked<'_>, order: &[&EngineList]) -> Hit {
    let mut contributions = r.contributions;
    let mut ranks = Meta::new();
    let mut scores = Meta::new();
    for c in &contributions {
        let name = order[c.engine_idx].engine.clone();
        ranks.insert(name.clone(), Value::from(c.rank as u64));
        scores.insert(name, Value::from(c.hit.score));
    }

    // Poorest first: the last contribution supplies the body and names the engine, and its
    // meta values win every conflict (the richer of the others win among themselves).
    contributions.sort_by(richness);
    let Some(body) = contributions.last() else { return Hit::new(r.key.as_str(), r.fused) };
    let body_engine = order[body.engine_idx].engine.as_str();
    let mut merged = Meta::new();
    for c in &contributions {
        if let Some(m) = &c.hit.meta {
            merged.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    // What each engine said that the merged meta does not show.
    let mut overruled = Meta::new();
    for c in &contributions {
        let Some(m) = &c.hit.meta else { continue };
        let lost: Meta =
            m.iter().filter(|(k, v)| merged.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !lost.is_empty() {
            overruled.insert(order[c.engine_idx].engine.clone(), Value::Object(lost));
        }
    }
    let mut hit = body.hit.clone();
    hit.score = r.fused;
    // Each engine's confidence is its own calibrated probability of relevance: the fused hit
    // keeps the strongest (§7.7.2), whichever engine's body it carries.
    // A value outside [0, 1] is no calibrated probability, and is not kept.
    hit.confidence =
        contributions.iter().filter_map(|c| c.hit.confidence).filter(|c| (0.0..=1.0).contains(c)).reduce(f64::max);
    merged.insert("engine".into(), Value::from(body_engine));
    merged.insert("engineRank".into(), Value::from(body.rank as u64));
    merged.insert("engineScore".into(), Value::from(body.hit.score));
    merged.insert("engineRanks".into(), Value::Object(ranks));
    merged.insert("engineScores".into(), Value::Object(scores));
    merged.insert("fusedScore".into(), Value::from(r.fused));
    if !overruled.is_empty() {
        merged.insert("engineMeta".into(), Value::Object(overruled));
    }
    hit.meta = Some(merged);
    hit
}

#[cfg(test)]
mod tests;
