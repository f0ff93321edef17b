//! `retrieve` behaviour (§3.3, §6.1, §7.7): hits, k, scores, the funnel, options and the
//! `strict` rule; plus the reproducibility handles of §7.7.1 at L2.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::session::{BROAD_QUERIES, Main};
use crate::verdict::{
    Res, expect_invalid_params, expect_option_unsupported, fail, hit_key, hits, pass, pass_note, show, skip, verdict,
};

pub(crate) const NO_RETRIEVE: &str = "retrieve not advertised";
const NO_HITS: &str = "the broad query returned no hits to check (use --query to pick one)";

pub(crate) async fn basic(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let candidates: Vec<String> = if m.configured_query {
        vec![m.broad.clone()]
    } else {
        BROAD_QUERIES.iter().map(|q| (*q).to_owned()).collect()
    };
    let mut best: Option<(String, Vec<Value>)> = None;
    for q in candidates {
        let r = m.retrieve(json!({"query": q, "k": m.probe_k})).await?;
        let h = hits(&r)?;
        let better = best.as_ref().is_none_or(|(_, b)| h.len() > b.len());
        let full = h.len() as u64 >= m.probe_k;
        if better {
            best = Some((q, h));
        }
        if full {
            break;
        }
    }
    if let Some((q, h)) = best {
        m.broad = q;
        m.baseline = h;
    }
    pass_note(format!("{} hits for the broad query at k={}", m.baseline.len(), m.probe_k))
}

async fn fresh_hits(m: &mut Main, k: u64) -> Result<Vec<Value>, String> {
    let r = m.broad_hits(k, json!({})).await?;
    hits(&r)
}

pub(crate) async fn hit_shape(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let hs = fresh_hits(m, m.probe_k).await?;
    for h in &hs {
        if !matches!(h.get("id"), Some(Value::String(_) | Value::Number(_))) {
            return fail(format!("hit id is not a string or number: {}", show(h)));
        }
        if !h.get("score").is_some_and(Value::is_number) {
            return fail(format!("hit score is not a number: {}", show(h)));
        }
    }
    if hs.is_empty() {
        return skip(NO_HITS);
    }
    pass()
}

pub(crate) async fn unique_ids(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let hs = fresh_hits(m, m.probe_k).await?;
    let mut seen = HashSet::new();
    for h in &hs {
        if !seen.insert(hit_key(h)) {
            return fail(format!("id {} appears twice", hit_key(h)));
        }
    }
    if hs.len() < 2 {
        return skip(NO_HITS);
    }
    pass()
}

/// The first adjacent pair out of descending order, if any.
pub(crate) fn out_of_order(hs: &[Value]) -> Option<(f64, f64)> {
    let scores: Vec<f64> = hs.iter().filter_map(|h| h.get("score").and_then(Value::as_f64)).collect();
    scores.windows(2).find(|w| w[0] < w[1]).map(|w| (w[0], w[1]))
}

pub(crate) async fn scores_descending(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let hs = fresh_hits(m, m.probe_k).await?;
    if hs.len() < 2 {
        return skip(NO_HITS);
    }
    match out_of_order(&hs) {
        Some((a, b)) => fail(format!("score {a} is followed by the higher score {b}")),
        None => pass(),
    }
}

pub(crate) async fn k_ceiling(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    for k in 1..=3u64 {
        let k = m.k(k);
        let hs = fresh_hits(m, k).await?;
        if hs.len() as u64 > k {
            return fail(format!("{} hits for k={k}", hs.len()));
        }
    }
    if m.baseline.is_empty() {
        return pass_note("the corpus returned no hits; the ceiling held trivially");
    }
    pass()
}

pub(crate) async fn maxk_clamp(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let Some(max_k) = m.caps.u64_at(&["retrieve", "maxK"]) else {
        return skip("retrieve.maxK not advertised");
    };
    let k = max_k.saturating_mul(10);
    let r = m.broad_hits(k, json!({})).await?;
    let hs = match hits(&r) {
        Ok(h) => h,
        Err(_) => return fail(format!("k={k} above maxK={max_k} must be clamped, not rejected: {}", r.brief())),
    };
    verdict(hs.len() as u64 <= max_k, || format!("{} hits for k={k} although maxK={max_k}", hs.len()))
}

pub(crate) async fn min_score(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let base = fresh_hits(m, m.probe_k).await?;
    let scores: Vec<f64> = base.iter().filter_map(|h| h.get("score").and_then(Value::as_f64)).collect();
    if scores.len() < 2 {
        return skip(NO_HITS);
    }
    // A threshold some unfiltered hit scores below, so minScore must drop at least one: the
    // median when a lower score exists, else the highest score above the lowest.
    let lowest = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let median = scores[scores.len() / 2];
    let threshold = if median > lowest { median } else { scores.iter().copied().fold(f64::NEG_INFINITY, f64::max) };
    if threshold <= lowest {
        let r = m.broad_hits(m.probe_k, json!({"minScore": threshold})).await?;
        let hs = hits(&r)?;
        return pass_note(format!(
            "all {} unfiltered hits score {lowest}: minScore accepted ({} hits) but cannot be shown to exclude one",
            scores.len(),
            hs.len()
        ));
    }
    let below = scores.iter().filter(|s| **s < threshold).count();
    let r = m.broad_hits(m.probe_k, json!({"minScore": threshold})).await?;
    let hs = hits(&r)?;
    if let Some(low) = hs.iter().find(|h| h.get("score").and_then(Value::as_f64).is_some_and(|s| s < threshold)) {
        return fail(format!("minScore {threshold}, but hit {} scored {}", hit_key(low), show(&low["score"])));
    }
    pass_note(format!(
        "{} of {} hits at minScore {threshold} ({below} unfiltered hits scored below it)",
        hs.len(),
        scores.len()
    ))
}

pub(crate) async fn funnel(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let k = m.k(5);
    if k < 2 {
        return skip("maxK is 1: no candidateK below k can be formed");
    }
    let r = m.broad_hits(k, json!({"candidateK": k - 1})).await?;
    expect_invalid_params(&r, &["candidateK"])
}

pub(crate) async fn funnel_valid(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let k = m.k(3);
    let r = m.broad_hits(k, json!({"candidateK": m.k(20).max(k)})).await?;
    let hs = hits(&r)?;
    verdict(hs.len() as u64 <= k, || format!("{} hits for k={k}", hs.len()))
}

pub(crate) async fn rerank_funnel(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "rerankBuiltin"]) {
        return skip("retrieve.rerankBuiltin not advertised");
    }
    let k = m.k(5);
    if k < 2 {
        return skip("maxK is 1: no topN below k can be formed");
    }
    let r = m.broad_hits(k, json!({"rerank": {"topN": k - 1}})).await?;
    expect_invalid_params(&r, &["topN"])
}

fn unadvertised_mode(m: &Main) -> Option<&'static str> {
    let modes = m.caps.strings(&["retrieve", "modes"])?;
    ["dense", "sparse", "hybrid"].into_iter().find(|x| !modes.iter().any(|a| a == x))
}

pub(crate) async fn strict_false(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let Some(mode) = unadvertised_mode(m) else {
        return skip("retrieve.modes absent or lists all three modes");
    };
    let r = m.broad_hits(m.k(3), json!({"mode": mode, "strict": false})).await?;
    if r.result().is_none() {
        return fail(format!("mode '{mode}' with strict:false must fall back, got {}", r.brief()));
    }
    let notes = r.result().and_then(|x| x.get("usage")).and_then(|u| u.get("notes")).and_then(Value::as_array);
    match notes {
        Some(n) if !n.is_empty() => pass(),
        _ => pass_note("fell back without usage.notes (SHOULD note it)"),
    }
}

pub(crate) async fn modes_served(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let Some(modes) = m.caps.strings(&["retrieve", "modes"]) else {
        return skip("retrieve.modes not advertised");
    };
    for mode in &modes {
        let r = m.broad_hits(m.k(3), json!({"mode": mode})).await?;
        if r.result().is_none() {
            return fail(format!("advertised mode '{mode}' failed: {}", r.brief()));
        }
    }
    pass_note(format!("modes: {}", modes.join(", ")))
}

pub(crate) async fn unit_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let units = m.caps.strings(&["retrieve", "units"]).unwrap_or_else(|| vec!["chunk".into(), "passage".into()]);
    let all = ["chunk", "passage", "document", "node", "triplet", "path", "subgraph", "community", "tree-node", "page"];
    let Some(unit) = all.into_iter().find(|u| !units.iter().any(|a| a == u)) else {
        return skip("every unit is advertised");
    };
    let r = m.broad_hits(1, json!({"unit": unit})).await?;
    ignored_or_rejected(&r, "unit")
}

/// An option the server did not advertise but may safely ignore (§7.7.2) or reject with
/// `-32005` under the strict rule: both pass; any other answer misses the MAY-level probe.
fn ignored_or_rejected(r: &crate::conn::Resp, option: &str) -> Res {
    if r.result().is_some() {
        return pass_note(format!("the unadvertised {option} was ignored (allowed: not a mode or method, §7.7)"));
    }
    expect_option_unsupported(r)
}

pub(crate) async fn mmr_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    if m.caps.flag(&["retrieve", "mmr"]) {
        return skip("retrieve.mmr is advertised (see retrieve.mmr-served)");
    }
    let r = m.broad_hits(1, json!({"mmr": {"lambda": 0.5}})).await?;
    ignored_or_rejected(&r, "mmr")
}

pub(crate) async fn unicode(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m.retrieve(json!({"query": "naïve café — 検索 🚀 Ωμέγα \u{10FFFD}", "k": m.k(3)})).await?;
    hits(&r)?;
    pass()
}

pub(crate) async fn seed_never_errors(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m.broad_hits(m.k(3), json!({"seed": 12345})).await?;
    hits(&r)?;
    pass()
}

pub(crate) async fn confidence(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "confidence"]) {
        return skip("retrieve.confidence not advertised");
    }
    let hs = fresh_hits(m, m.probe_k).await?;
    if hs.is_empty() {
        return skip(NO_HITS);
    }
    for h in &hs {
        match h.get("confidence").and_then(Value::as_f64) {
            Some(c) if (0.0..=1.0).contains(&c) => {}
            _ => {
                return fail(format!(
                    "hit {} has confidence {}",
                    hit_key(h),
                    h.get("confidence").map_or("absent".into(), show)
                ));
            }
        }
    }
    pass()
}

pub(crate) async fn citations(m: &mut Main) -> Res {
    if !m.caps.has("citations") || !m.caps.has("retrieve") {
        return skip("citations not advertised");
    }
    let hs = fresh_hits(m, m.probe_k).await?;
    if hs.is_empty() {
        return skip(NO_HITS);
    }
    let bare: Vec<String> = hs
        .iter()
        .filter(|h| !h.get("citation").is_some_and(Value::is_object) && !h.get("trust").is_some_and(Value::is_object))
        .map(hit_key)
        .collect();
    verdict(bare.is_empty(), || {
        format!("{} of {} hits carry neither citation nor trust (e.g. {})", bare.len(), hs.len(), bare[0])
    })
}

fn summary(hs: &[Value]) -> Vec<(String, Option<f64>)> {
    hs.iter().map(|h| (hit_key(h), h.get("score").and_then(Value::as_f64))).collect()
}

pub(crate) async fn deterministic(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "deterministic"]) {
        return skip("retrieve.deterministic not advertised");
    }
    let a = hits(&m.broad_hits(m.k(10), json!({"seed": 7})).await?)?;
    let b = hits(&m.broad_hits(m.k(10), json!({"seed": 7})).await?)?;
    verdict(summary(&a) == summary(&b), || "two identical seeded requests returned different hits".to_owned())
}

pub(crate) async fn snapshots(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "snapshots"]) {
        return skip("retrieve.snapshots not advertised");
    }
    let r = m.broad_hits(m.k(3), json!({})).await?;
    let Some(version) = r.ok()?.get("indexVersion").and_then(Value::as_str).map(str::to_owned) else {
        return fail("a server advertising snapshots must echo the served indexVersion");
    };
    let r = m.broad_hits(m.k(3), json!({"indexVersion": version})).await?;
    if r.code() == Some(-32010) {
        return pass_note("the pinned snapshot was already collected (-32010)");
    }
    let got = r.ok()?.get("indexVersion").cloned();
    verdict(got == Some(json!(version)), || format!("pinned indexVersion {version}, served {got:?}"))
}

pub(crate) async fn mmr_served(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "mmr"]) {
        return skip("retrieve.mmr not advertised");
    }
    let k = m.k(5);
    let hs = hits(&m.broad_hits(k, json!({"mmr": {"lambda": 0.5}})).await?)?;
    verdict(hs.len() as u64 <= k, || format!("{} hits for k={k}", hs.len()))
}

pub(crate) async fn rerank_builtin(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "rerankBuiltin"]) {
        return skip("retrieve.rerankBuiltin not advertised");
    }
    let k = m.k(3);
    let hs = hits(&m.broad_hits(k, json!({"rerank": {"topN": m.k(10).max(k)}})).await?)?;
    verdict(hs.len() as u64 <= k, || format!("{} hits for k={k}", hs.len()))
}

pub(crate) async fn fusion_served(m: &mut Main) -> Res {
    let hybrid = m.caps.strings(&["retrieve", "modes"]).is_some_and(|ms| ms.iter().any(|x| x == "hybrid"));
    let Some(methods) = m.caps.strings(&["retrieve", "fusion"]).filter(|f| hybrid && !f.is_empty()) else {
        return skip("hybrid mode with retrieve.fusion not advertised");
    };
    for f in &methods {
        let r = m.broad_hits(m.k(3), json!({"mode": "hybrid", "fusion": {"method": f}})).await?;
        if r.result().is_none() {
            return fail(format!("advertised fusion '{f}' failed: {}", r.brief()));
        }
    }
    pass_note(format!("fusion: {}", methods.join(", ")))
}

pub(crate) async fn candidate_k_clamp(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let Some(max_k) = m.caps.u64_at(&["retrieve", "maxK"]) else {
        return skip("retrieve.maxK not advertised");
    };
    let k = m.k(3);
    let r = m.broad_hits(k, json!({"candidateK": max_k.saturating_mul(10)})).await?;
    match hits(&r) {
        Ok(hs) => verdict(hs.len() as u64 <= k, || format!("{} hits for k={k}", hs.len())),
        Err(_) => fail(format!("candidateK above maxK must be clamped, not rejected: {}", r.brief())),
    }
}

const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg==";

/// An image block, for modality checks (§4.8).
pub(crate) fn image_block() -> Value {
    json!({"type": "image", "mimeType": "image/png", "data": IMAGE})
}

pub(crate) async fn modality_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let modalities = m.caps.strings(&["retrieve", "modalities"]).unwrap_or_else(|| vec!["text".into()]);
    if modalities.iter().any(|x| x == "image" || x == "multimodal") {
        return skip("retrieve.modalities includes images");
    }
    let r = m.retrieve(json!({"query": image_block(), "k": 1})).await?;
    match r.code() {
        Some(-32005) => pass(),
        Some(-32602) => pass_note("-32602: a text-only server may accept only the string form (§4.8)"),
        _ => {
            fail(format!("an image query outside retrieve.modalities must be rejected with -32005, got {}", r.brief()))
        }
    }
}

pub(crate) async fn k_integral_number(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m.broad_hits(1, json!({"k": 3.0})).await?;
    match hits(&r) {
        Ok(hs) => verdict(hs.len() <= 3, || format!("{} hits for k=3.0", hs.len())),
        Err(_) => skip(format!(
            "k = 3.0 was rejected ({}), although the schema's integer type admits it and §12 reserves -32602 for non-integers (interop probe)",
            r.brief()
        )),
    }
}
