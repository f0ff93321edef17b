//! `mmr` over a federation (§7.7, §16.3): diversification runs once, on the fused list, not in
//! each engine — an engine's MMR only sees its own candidates, and the union of several
//! diversified lists is not diversified. [`engine_params`](super::engine_params) therefore never
//! forwards `mmr`; it asks the engines that honour `includeVectors` for vectors instead, and
//! [`diversify_fused`] picks from the fused candidates by [`rcp_wire::mmr::diversify`].

use rcp_wire::mmr::{self, Likeness};
use rcp_wire::{Hit, RetrieveParams};

/// The most fused candidates MMR chooses from: its cost grows with the square of the pool.
pub const MAX_MMR_POOL: usize = 300;

/// How many fused candidates MMR chooses from: `candidateK` when the request sets it, else
/// 100 (the §7.7 funnel's default), at least `k + 1`, at most [`MAX_MMR_POOL`]. It does not
/// depend on the page: every page of a diversified ranking is cut from one pool, and pages end
/// with it.
pub fn mmr_pool(params: &RetrieveParams) -> usize {
    let candidate_k = params.candidate_k.map_or(100, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let k = usize::try_from(params.k).unwrap_or(usize::MAX);
    candidate_k.max(k.saturating_add(1)).min(MAX_MMR_POOL.max(k.saturating_add(1)))
}

/// The first `want` hits of `fused` in MMR order when the request asks for `mmr` (the fused
/// list unchanged, cut to `want`, otherwise), and the note to add when likeness had to be
/// measured by words. Vectors fetched only for MMR are dropped unless the request asked for
/// them (`includeVectors`).
pub fn diversify_fused(mut fused: Vec<Hit>, params: &RetrieveParams, want: usize) -> (Vec<Hit>, Option<String>) {
    let Some(m) = params.mmr else {
        fused.truncate(want);
        return (fused, None);
    };
    let (order, likeness) = mmr::diversify(&fused, m.lambda, want);
    let mut slots: Vec<Option<Hit>> = fused.into_iter().map(Some).collect();
    let mut hits: Vec<Hit> = order.into_iter().filter_map(|i| slots[i].take()).collect();
    if params.include_vectors != Some(true) {
        for h in &mut hits {
            h.vector = None;
        }
    }
    let note = (likeness == Likeness::Words).then(|| {
        "mmr: not every fused hit carries a vector of one dimension; likeness measured by their words".to_owned()
    });
    (hits, note)
}

#[cfg(test)]
mod tests {
    use rcp_wire::retrieve::{MmrParams, WireVector};

    use super::*;

    #[test]
    fn diversifies_the_fused_list_and_drops_vectors_nobody_asked_for() {
        let mut hits: Vec<Hit> = ["a", "b", "c"].iter().map(|id| Hit::new(*id, 1.0).with_text(*id)).collect();
        for (h, v) in hits.iter_mut().zip([[1.0f32, 0.0], [1.0, 0.0], [0.0, 1.0]]) {
            h.vector = Some(WireVector::Json(v.to_vec()));
        }
        let mut params = RetrieveParams::new("q", 2);
        assert_eq!(diversify_fused(hits.clone(), &params, 2).0.len(), 2);
        params.mmr = Some(MmrParams { lambda: 0.5 });
        let (out, note) = diversify_fused(hits.clone(), &params, 2);
        assert_eq!(out.iter().map(Hit::key).collect::<Vec<_>>(), ["a", "c"]);
        assert!(note.is_none() && out.iter().all(|h| h.vector.is_none()));
        params.include_vectors = Some(true);
        assert!(diversify_fused(hits, &params, 2).0.iter().all(|h| h.vector.is_some()));
        assert_eq!(mmr_pool(&params), 100);
        params.candidate_k = Some(5_000);
        assert_eq!(mmr_pool(&params), MAX_MMR_POOL, "bounded: MMR is quadratic in its pool");
    }
}
