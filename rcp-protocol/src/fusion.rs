//! Federation-side fusion of ranked lists from several engines (§16.3): Reciprocal Rank
//! Fusion (the default), weighted min-max score fusion, and convex combination anchored on
//! each engine's advertised `scoreFloor` (§6.1).
//!
//! The result is a total order that does not depend on the order of the input lists (engine
//! response arrival order): contributions are summed in engine-name order, so shuffled input
//! produces bit-identical scores, and ties are broken by (1) higher fused score, (2) higher
//! summed engine weight, (3) lexicographically smaller stringified id (§16.3).
//!
//! Every fused hit carries, in `meta`:
//! - `engine`: the engine that ranked it best (lowest rank; ties by engine name), with its
//!   `engineRank` and `engineScore` (§16.3);
//! - `engineRanks` / `engineScores`: objects engine → 1-based rank / original score;
//! - `fusedScore`: the fused score, which is also the hit's `score`.
//!
//! The body (`text`, `content` and every other field) is the richest one returned (§16.3
//! dedup): the longest `text`, else the most `content` blocks, ties by better rank then
//! engine name. `meta` is merged across engines, keys from richer hits winning.

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
    // Best-ranked engine: lowest rank; contributions are in engine-name order, so
    // `min_by_key` keeps the smallest name on a tie.
    let (best_engine, best_rank, best_score) =
        contributions.iter().min_by_key(|c| c.rank).map(|c| (c.engine_idx, c.rank, c.hit.score)).unwrap_or((0, 0, 0.0));

    let mut ranks = Meta::new();
    let mut scores = Meta::new();
    for c in &contributions {
        let name = order[c.engine_idx].engine.clone();
        ranks.insert(name.clone(), Value::from(c.rank as u64));
        scores.insert(name, Value::from(c.hit.score));
    }

    // Poorest first, so richer hits overwrite meta keys and the richest supplies the body.
    contributions.sort_by(richness);
    let mut merged = Meta::new();
    for c in &contributions {
        if let Some(m) = &c.hit.meta {
            merged.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut hit = match contributions.last() {
        Some(richest) => richest.hit.clone(),
        None => Hit::new(r.key.as_str(), r.fused),
    };
    hit.score = r.fused;
    merged.insert("engine".into(), Value::from(order.get(best_engine).map_or("", |l| l.engine.as_str())));
    merged.insert("engineRank".into(), Value::from(best_rank as u64));
    merged.insert("engineScore".into(), Value::from(best_score));
    merged.insert("engineRanks".into(), Value::Object(ranks));
    merged.insert("engineScores".into(), Value::Object(scores));
    merged.insert("fusedScore".into(), Value::from(r.fused));
    hit.meta = Some(merged);
    hit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Content;
    use crate::error::ErrorCode;
    use serde_json::json;

    fn hits(ids: &[&str]) -> Vec<Hit> {
        ids.iter().enumerate().map(|(i, id)| Hit::new(*id, 1.0 / (i as f64 + 1.0))).collect()
    }

    fn scored(pairs: &[(&str, f64)]) -> Vec<Hit> {
        pairs.iter().map(|(id, s)| Hit::new(*id, *s)).collect()
    }

    fn keys(hits: &[Hit]) -> Vec<String> {
        hits.iter().map(Hit::key).collect()
    }

    fn meta<'a>(h: &'a Hit, key: &str) -> &'a Value {
        &h.meta.as_ref().unwrap()[key]
    }

    #[test]
    fn rrf_hand_computed() {
        let lists = [EngineList::new("A", hits(&["a", "b", "c"])), EngineList::new("B", hits(&["b", "d"]))];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        assert_eq!(keys(&out), ["b", "a", "d", "c"]);
        assert_eq!(out[0].score, 1.0 / 62.0 + 1.0 / 61.0);
        assert_eq!(out[1].score, 1.0 / 61.0);
        assert_eq!(out[2].score, 1.0 / 62.0);
        assert_eq!(out[3].score, 1.0 / 63.0);
        assert_eq!(meta(&out[0], "fusedScore"), &json!(1.0 / 62.0 + 1.0 / 61.0));
        assert_eq!(meta(&out[0], "engineRanks"), &json!({"A": 2, "B": 1}));
        assert_eq!(meta(&out[0], "engineScores"), &json!({"A": 0.5, "B": 1.0}));
        // b: best rank 1 at B.
        assert_eq!(meta(&out[0], "engine"), "B");
        assert_eq!(meta(&out[0], "engineRank"), 1);
        assert_eq!(meta(&out[0], "engineScore"), 1.0);
        assert_eq!(meta(&out[3], "engine"), "A");
        // Truncation to k.
        assert_eq!(keys(&fuse(&lists, &FusionMethod::rrf(), 2).unwrap()), ["b", "a"]);
        assert!(fuse(&lists, &FusionMethod::rrf(), 0).unwrap().is_empty());
    }

    #[test]
    fn rrf_weights_and_custom_k() {
        let lists = [
            EngineList::new("A", hits(&["a", "b"])).with_weight(2.0),
            EngineList::new("B", hits(&["b", "a"])).with_weight(0.5),
        ];
        let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 0.0 }, 10).unwrap();
        // a: 2/1 + 0.5/2 = 2.25; b: 2/2 + 0.5/1 = 1.5.
        assert_eq!(keys(&out), ["a", "b"]);
        assert_eq!(out[0].score, 2.0 / 1.0 + 0.5 / 2.0);
        assert_eq!(out[1].score, 2.0 / 2.0 + 0.5 / 1.0);
    }

    #[test]
    fn ties_break_by_summed_weight_then_id() {
        // x: only A (w=1) at rank 1 -> 1/61. y: only B (w=1) at rank 1 -> 1/61.
        // z: C (w=0.5) rank 1 + D (w=0.5) rank 1 -> 0.5/61 + 0.5/61 = 1/61 exactly, weight 1.0.
        // So x, y, z tie on score and summed weight: by id. Then make z heavier.
        let lists = [
            EngineList::new("A", hits(&["y"])),
            EngineList::new("B", hits(&["x"])),
            EngineList::new("C", hits(&["z"])).with_weight(0.5),
            EngineList::new("D", hits(&["z"])).with_weight(0.5),
        ];
        let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 1.0 }, 10).unwrap();
        assert_eq!(out[0].score, out[2].score);
        assert_eq!(keys(&out), ["x", "y", "z"]);

        // Equal fused score (0.5 each), different summed weight: w=1 for "m" vs w=2 for "n".
        // m: A(w=1) rank 1, rrfK=1 -> 1/2. n: B(w=2) rank 3, rrfK=1 -> 2/4 = 1/2.
        let lists = [EngineList::new("A", hits(&["m"])), EngineList::new("B", hits(&["p", "q", "n"])).with_weight(2.0)];
        let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 1.0 }, 10).unwrap();
        let m = out.iter().position(|h| h.key() == "m").unwrap();
        let n = out.iter().position(|h| h.key() == "n").unwrap();
        assert_eq!(out[m].score, out[n].score);
        assert!(n < m, "higher summed weight wins the tie: {:?}", keys(&out));
    }

    #[test]
    fn id_tiebreak_is_bytewise_on_the_stringified_id() {
        let lists = [EngineList::new("A", vec![Hit::new(10, 1.0)]), EngineList::new("B", vec![Hit::new(9, 1.0)])];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        // "10" < "9" lexicographically.
        assert_eq!(keys(&out), ["10", "9"]);
        // A numeric id and the equal string id are the same document.
        let lists = [EngineList::new("A", vec![Hit::new(7, 1.0)]), EngineList::new("B", vec![Hit::new("7", 1.0)])];
        assert_eq!(fuse(&lists, &FusionMethod::rrf(), 10).unwrap().len(), 1);
    }

    #[test]
    fn input_order_does_not_matter() {
        let make = || {
            vec![
                EngineList::new("kw", scored(&[("a", 9.0), ("b", 7.5), ("c", 1.0), ("e", 0.3)]))
                    .with_weight(0.7)
                    .with_score_floor(0.0),
                EngineList::new("dense", scored(&[("b", 0.91), ("d", 0.8), ("a", 0.33)]))
                    .with_weight(1.3)
                    .with_score_floor(-1.0),
                EngineList::new("graph", scored(&[("e", 3.0), ("a", 2.0), ("f", 2.0)])).with_score_floor(0.0),
            ]
        };
        for method in [FusionMethod::rrf(), FusionMethod::Weighted, FusionMethod::convex(0.3)] {
            let base = fuse(&make(), &method, 10).unwrap();
            for perm in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
                let lists = make();
                let shuffled: Vec<EngineList> = perm.iter().map(|&i| lists[i].clone()).collect();
                let out = fuse(&shuffled, &method, 10).unwrap();
                assert_eq!(out, base, "{method:?} {perm:?}");
                let a: Vec<u64> = out.iter().map(|h| h.score.to_bits()).collect();
                let b: Vec<u64> = base.iter().map(|h| h.score.to_bits()).collect();
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn weighted_min_max_hand_computed() {
        // A: scores 10, 6, 2 -> norm 1, 0.5, 0. B (w=2): 0.9, 0.1 -> 1, 0. C: all 5 -> 1.
        let lists = [
            EngineList::new("A", scored(&[("a", 10.0), ("b", 6.0), ("c", 2.0)])),
            EngineList::new("B", scored(&[("c", 0.9), ("b", 0.1)])).with_weight(2.0),
            EngineList::new("C", scored(&[("d", 5.0), ("e", 5.0)])).with_weight(0.25),
        ];
        let out = fuse(&lists, &FusionMethod::Weighted, 10).unwrap();
        // a = 1; b = 0.5 + 0; c = 0 + 2; d = e = 0.25.
        assert_eq!(keys(&out), ["c", "a", "b", "d", "e"]);
        assert_eq!(out[0].score, 2.0);
        assert_eq!(out[1].score, 1.0);
        assert_eq!(out[2].score, 0.5);
        assert_eq!(out[3].score, 0.25);
        assert_eq!(meta(&out[0], "engineScores"), &json!({"A": 2.0, "B": 0.9}));
        assert_eq!(meta(&out[0], "engine"), "B");
    }

    #[test]
    fn convex_with_floors_hand_computed() {
        // dense floor -1: scores 0.8, 0.2 -> (0.8+1)/(0.8+1) = 1, (0.2+1)/1.8 = 2/3.
        // sparse floor 0: scores 12, 3 -> 1, 0.25. α = 0.75 on "dense", 0.25 on "sparse".
        let lists = [
            EngineList::new("sparse", scored(&[("x", 12.0), ("y", 3.0)])).with_score_floor(0.0),
            EngineList::new("dense", scored(&[("y", 0.8), ("z", 0.2)])).with_score_floor(-1.0),
        ];
        let out = fuse(&lists, &FusionMethod::convex(0.75), 10).unwrap();
        let y = 0.75 * 1.0 + 0.25 * 0.25;
        let z = 0.75 * ((0.2 - -1.0) / (0.8 - -1.0));
        let x = 0.25 * 1.0;
        assert_eq!(keys(&out), ["y", "z", "x"]);
        // Summation is in engine-name order: dense first, then sparse.
        assert_eq!(out[0].score, 0.0 + 0.75 * 1.0 + 0.25 * 0.25);
        assert_eq!(out[0].score, y);
        assert_eq!(out[1].score, z);
        assert_eq!(out[2].score, x);

        // Explicit α engine; and with three lists α is not applied.
        let out = fuse(&lists, &FusionMethod::convex_for(0.75, "sparse"), 10).unwrap();
        assert_eq!(keys(&out), ["x", "y", "z"]);
        assert_eq!(out[0].score, 0.75);
        let mut three = lists.to_vec();
        three.push(EngineList::new("graph", scored(&[("q", 1.0)])).with_score_floor(0.0));
        let out = fuse(&three, &FusionMethod::convex(0.75), 10).unwrap();
        assert_eq!(out[0].key(), "y");
        assert_eq!(out[0].score, 1.0 + 0.25);
    }

    #[test]
    fn convex_guards_and_clamps() {
        // Single score equal to the floor: max == floor -> 1.0. A score below the floor
        // (a misbehaving engine) clamps to 0.
        let lists = [
            EngineList::new("a", scored(&[("p", 0.0)])).with_score_floor(0.0),
            EngineList::new("b", scored(&[("q", 1.0), ("r", -5.0)])).with_score_floor(0.0),
        ];
        let out = fuse(&lists, &FusionMethod::convex(0.5), 10).unwrap();
        assert_eq!(keys(&out), ["p", "q", "r"]);
        assert_eq!(out[0].score, 1.0);
        assert_eq!(out[2].score, 0.0);
    }

    #[test]
    fn convex_without_floor_errors_and_falls_back() {
        let lists = [
            EngineList::new("A", hits(&["a", "b", "c"])).with_score_floor(0.0),
            EngineList::new("C", hits(&["c"])),
            EngineList::new("B", hits(&["b", "d"])),
        ];
        let err = fuse(&lists, &FusionMethod::convex(0.5), 10).unwrap_err();
        assert_eq!(err, FusionError::MissingScoreFloor { engines: vec!["B".into(), "C".into()] });
        let rcp: RcpError = err.into();
        assert_eq!(rcp.code, ErrorCode::OPTION_UNSUPPORTED);
        assert_eq!(rcp.option(), Some("fusion.method"));

        let outcome = fuse_or_fallback(&lists, &FusionMethod::convex(0.5), 10).unwrap();
        assert_eq!(outcome.method, FusionMethod::rrf());
        assert_eq!(outcome.hits, fuse(&lists, &FusionMethod::rrf(), 10).unwrap());
        let note = outcome.note.unwrap();
        assert!(note.contains("B, C") && note.contains("rrf"), "{note}");

        let ok = fuse_or_fallback(&lists, &FusionMethod::Weighted, 3).unwrap();
        assert_eq!(ok.note, None);
        assert_eq!(ok.method, FusionMethod::Weighted);
        assert_eq!(ok.hits.len(), 3);
    }

    #[test]
    fn invalid_parameters_are_rejected() {
        let lists = [EngineList::new("A", hits(&["a"]))];
        for (method, param) in [
            (FusionMethod::Rrf { rrf_k: -1.0 }, "fusion.rrfK"),
            (FusionMethod::Rrf { rrf_k: f64::NAN }, "fusion.rrfK"),
            (FusionMethod::convex(1.5), "fusion.alpha"),
            (FusionMethod::convex(f64::NAN), "fusion.alpha"),
        ] {
            let e = fuse(&lists, &method, 5).unwrap_err();
            assert!(matches!(e, FusionError::InvalidParameter { param: p, .. } if p == param), "{e:?}");
            let rcp: RcpError = e.into();
            assert_eq!(rcp.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(rcp.field(), Some(param));
        }
        for w in [-0.5, f64::INFINITY, f64::NAN] {
            let lists = [EngineList::new("A", hits(&["a"])).with_weight(w)];
            let e = fuse(&lists, &FusionMethod::rrf(), 5).unwrap_err();
            assert!(matches!(e, FusionError::InvalidParameter { param: "fusion.weights", .. }));
        }
        let dup = [EngineList::new("A", hits(&["a"])), EngineList::new("A", hits(&["b"]))];
        assert_eq!(fuse(&dup, &FusionMethod::rrf(), 5).unwrap_err(), FusionError::DuplicateEngine("A".into()));
        assert_eq!(RcpError::from(FusionError::DuplicateEngine("A".into())).code, ErrorCode::INTERNAL_ERROR);
    }

    #[test]
    fn dedup_keeps_richest_body_and_merges_meta() {
        let short = Hit::new("d", 0.9).with_text("short").with_meta("lang", "en").with_meta("src", "A");
        let long = Hit::new("d", 0.1).with_text("a much longer body").with_meta("src", "B").with_meta("year", 2024);
        let lists = [EngineList::new("A", vec![short]), EngineList::new("B", vec![Hit::new("x", 1.0), long])];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        let d = out.iter().find(|h| h.key() == "d").unwrap();
        assert_eq!(d.text.as_deref(), Some("a much longer body"));
        let m = d.meta.as_ref().unwrap();
        assert_eq!(m["lang"], "en");
        assert_eq!(m["src"], "B", "the richer hit's keys win");
        assert_eq!(m["year"], 2024);
        // meta.engine is the best-ranked engine (A, rank 1), not the body's engine.
        assert_eq!(m["engine"], "A");
        assert_eq!(m["engineRanks"], json!({"A": 1, "B": 2}));
        assert_eq!(d.score, 1.0 / 61.0 + 1.0 / 62.0);
    }

    #[test]
    fn dedup_by_content_blocks_and_rank_ties() {
        let one = Hit { content: Some(vec![Content::text("p")]), ..Hit::new("d", 1.0) };
        let two = Hit { content: Some(vec![Content::text("p"), Content::text("q")]), ..Hit::new("d", 1.0) };
        let lists = [EngineList::new("A", vec![one]), EngineList::new("B", vec![two.clone()])];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        assert_eq!(out[0].content, two.content);
        // Same richness and rank: engine name order picks A for both body and meta.engine.
        let lists = [
            EngineList::new("B", vec![Hit::new("d", 1.0).with_meta("from", "B")]),
            EngineList::new("A", vec![Hit::new("d", 2.0).with_meta("from", "A")]),
        ];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        assert_eq!(meta(&out[0], "engine"), "A");
        assert_eq!(meta(&out[0], "from"), "A");
        assert_eq!(meta(&out[0], "engineScore"), 2.0);
    }

    #[test]
    fn repeated_id_within_a_list_keeps_first_rank() {
        let lists = [EngineList::new("A", hits(&["a", "b", "a", "c"]))];
        let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
        assert_eq!(keys(&out), ["a", "b", "c"]);
        assert_eq!(out[0].score, 1.0 / 61.0);
        // c keeps its list position (4).
        assert_eq!(meta(&out[2], "engineRank"), 4);
    }

    #[test]
    fn empty_inputs_and_non_finite_scores() {
        assert!(fuse(&[], &FusionMethod::rrf(), 10).unwrap().is_empty());
        assert!(fuse(&[EngineList::new("A", vec![])], &FusionMethod::Weighted, 10).unwrap().is_empty());
        let lists = [EngineList::new("A", scored(&[("a", f64::NAN), ("b", 2.0), ("c", 1.0)]))];
        let out = fuse(&lists, &FusionMethod::Weighted, 10).unwrap();
        assert_eq!(keys(&out), ["b", "a", "c"]);
        assert!(out.iter().all(|h| h.score.is_finite()));
    }

    #[test]
    fn method_names_round_trip() {
        for m in [FusionMethod::rrf(), FusionMethod::Weighted, FusionMethod::convex(DEFAULT_ALPHA)] {
            assert_eq!(FusionMethod::from_name(m.name()), Some(m));
        }
        assert_eq!(FusionMethod::from_name("borda"), None);
        assert_eq!(FusionMethod::default(), FusionMethod::Rrf { rrf_k: 60.0 });
    }
}
