//! Pagination (§10): pages by cursor, alone and under `minScore` (§7.7).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::session::Main;
use crate::verdict::{Res, fail, hit_key, hits, pass_note, show, skip, warn};

/// How many pages the pagination check follows: enough to exercise cursors, bounded so the
/// check costs the same on a 6-document fixture and on a million-document corpus.
const PAGES: usize = 5;

/// The hits of one page and the `nextCursor` it returned (missing or empty: the last page, §10).
async fn page(m: &mut Main, k: u64, cursor: Option<&Value>) -> Result<(Vec<String>, Option<Value>), String> {
    let extra = cursor.map_or(json!({}), |c| json!({"cursor": c}));
    let r = m.broad_hits(k, extra).await?;
    let hs = hits(&r)?;
    if hs.len() as u64 > k {
        return Err(format!("a page has {} hits for k={k} (§7.7: never more than k)", hs.len()));
    }
    let next =
        r.result().and_then(|x| x.get("nextCursor")).filter(|c| c.as_str().is_none_or(|s| !s.is_empty())).cloned();
    Ok((hs.iter().map(hit_key).collect(), next))
}

/// Pagination (§10) on a corpus of any size: follows at most [`PAGES`] pages and checks that
/// pages are disjoint and that a cursor is stable (the same cursor twice yields the same page).
///
/// It also compares the pages, taken together, with one unpaged request for as many hits. §10
/// states no such rule (cursors are "opaque and server-defined"; a server may page a ranking
/// that moves, or a different one), so a mismatch is this suite's expectation, reported as a
/// WARN, never a FAIL.
pub(crate) async fn covers_once(m: &mut Main) -> Res {
    if !m.caps.has("pagination") || !m.caps.has("retrieve") {
        return skip("pagination not advertised");
    }
    let page_k = m.k(10);
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut exhausted = false;
    for n in 0..PAGES {
        let (ids, next) = page(m, page_k, cursor.as_ref()).await?;
        if let Some(c) = &cursor {
            let (again, _) = page(m, page_k, Some(c)).await?;
            if again != ids {
                return fail(format!("the same cursor {} gave two different pages: {ids:?} then {again:?}", show(c)));
            }
        }
        pages.push(ids);
        if next.is_none() {
            exhausted = true;
            break;
        }
        if n + 1 < PAGES {
            cursor = next;
        }
    }
    let ids: Vec<&String> = pages.iter().flatten().collect();
    let mut seen = HashSet::new();
    if let Some(dup) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return fail(format!("hit {dup} appears on more than one page"));
    }
    if pages.len() < 2 {
        return skip(format!("the broad query has only {} hit(s): a second page could not be exercised", ids.len()));
    }
    // Consistency with one request: an expectation of this suite, not a rule of §10 (a WARN).
    let total = ids.len() as u64;
    let big_k = m.k(total);
    let big: Vec<String> = hits(&m.broad_hits(big_k, json!({})).await?)?.iter().map(hit_key).collect();
    let expected: HashSet<&str> = ids.iter().take(big.len()).map(|s| s.as_str()).collect();
    let got: HashSet<&str> = big.iter().map(String::as_str).collect();
    let how = if exhausted { "every page" } else { "the first pages" };
    if got != expected {
        let missing: Vec<&&str> = expected.difference(&got).take(3).collect();
        let extra: Vec<&&str> = got.difference(&expected).take(3).collect();
        return warn(format!(
            "{how} ({} hits) and one request at k={big_k} ({} hits) disagree: only paged {missing:?}, only unpaged \
             {extra:?} (§10 states no such rule; the suite expects pages to be the top of one request's ranking)",
            ids.len(),
            big.len()
        ));
    }
    pass_note(format!("{} pages of up to {page_k} hits ({how})", pages.len()))
}

/// Pagination under `minScore` (§7.7, §10). `minScore` is taken between two scores of a first,
/// unfiltered answer, so that at least two hits pass it and at least one does not; the check
/// then pages through at `k = 2` with that `minScore` and compares the pages with one request
/// for as many hits (a WARN when they differ: as in [`covers_once`], no rule of §10).
///
/// The rule it holds a server to is a reading, not one sentence: §7.7 lets an answer hold fewer
/// than `k` hits "when the corpus or `minScore` yields fewer", and §10 makes a missing
/// `nextCursor` mean "no more results". A page short of `k` therefore says the ranking is
/// exhausted, and a `nextCursor` on it says the opposite: the page was cut before `minScore`
/// emptied it (an engine that pages first and filters after answers `{"hits": [],
/// "nextCursor": …}`). A hit scoring below `minScore` is only a warning here: honouring
/// `minScore` is a SHOULD (§14.2, `retrieve.min-score`).
pub(crate) async fn min_score(m: &mut Main) -> Res {
    if !m.caps.has("pagination") || !m.caps.has("retrieve") {
        return skip("pagination not advertised");
    }
    let unfiltered = hits(&m.broad_hits(m.probe_k, json!({})).await?)?;
    let scores: Vec<f64> = unfiltered.iter().filter_map(|h| h.get("score").and_then(Value::as_f64)).collect();
    let Some((threshold, passing)) = splitting_threshold(&scores) else {
        return skip(format!(
            "no minScore keeps two of the broad query's {} hits and drops another (too few distinct scores)",
            scores.len()
        ));
    };
    let page_k = m.k(2);
    let with_min = |extra: Value| {
        let mut p = json!({"minScore": threshold});
        if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        p
    };
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut below: Option<(String, Value)> = None;
    let mut cursor: Option<Value> = None;
    for n in 1..=PAGES {
        let extra = with_min(cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c})));
        let r = m.broad_hits(page_k, extra).await?;
        let hs = hits(&r)?;
        if below.is_none()
            && let Some(h) = hs.iter().find(|h| h.get("score").and_then(Value::as_f64).is_some_and(|s| s < threshold))
        {
            below = Some((hit_key(h), h["score"].clone()));
        }
        let next =
            r.result().and_then(|x| x.get("nextCursor")).filter(|c| c.as_str().is_none_or(|s| !s.is_empty())).cloned();
        if let Some(next) = &next
            && (hs.len() as u64) < page_k
        {
            let asked = cursor.as_ref().map_or("no cursor".to_owned(), |c| format!("cursor {}", show(c)));
            return fail(format!(
                "page {n} ({asked}, k={page_k}, minScore {threshold}) holds {} hit(s) yet carries nextCursor {}: a page \
                 short of k is the last one (§7.7: fewer than k only when the corpus or minScore yields fewer; §10: a \
                 missing nextCursor means no more results), so the page was cut before minScore was applied",
                hs.len(),
                show(next)
            ));
        }
        pages.push(hs.iter().map(hit_key).collect());
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let ids: Vec<&String> = pages.iter().flatten().collect();
    let big_k = m.k(page_k * pages.len() as u64);
    let big: Vec<String> = hits(&m.broad_hits(big_k, with_min(json!({}))).await?)?.iter().map(hit_key).collect();
    let expected: HashSet<&str> = ids.iter().take(big.len()).map(|s| s.as_str()).collect();
    let got: HashSet<&str> = big.iter().map(String::as_str).collect();
    if got != expected {
        let missing: Vec<&&str> = expected.difference(&got).take(3).collect();
        let extra: Vec<&&str> = got.difference(&expected).take(3).collect();
        return warn(format!(
            "at minScore {threshold}, {} page(s) of k={page_k} ({} hits) and one request at k={big_k} ({} hits) \
             disagree: only paged {missing:?}, only unpaged {extra:?} (§10 states no such rule; the suite expects \
             pages to be the top of one request's ranking)",
            pages.len(),
            ids.len(),
            big.len()
        ));
    }
    if let Some((id, score)) = below {
        return warn(format!(
            "minScore {threshold}, but hit {id} scored {} (honouring minScore is a SHOULD, §14.2)",
            show(&score)
        ));
    }
    pass_note(format!(
        "{} page(s) of up to {page_k} hits at minScore {threshold} ({passing} of {} unfiltered hits pass it): no \
         short page carried a nextCursor, and the pages match one request",
        pages.len(),
        scores.len()
    ))
}

/// A `minScore` between two scores of `scores` that at least two of them reach and at least
/// one does not, and how many reach it: halfway between the highest score that two reach and
/// the next lower one, so a score recomputed slightly differently does not change the side it
/// falls on. `None` when no such pair of scores exists.
fn splitting_threshold(scores: &[f64]) -> Option<(f64, usize)> {
    let mut distinct: Vec<f64> = scores.iter().copied().filter(|s| s.is_finite()).collect();
    distinct.sort_by(|a, b| b.total_cmp(a));
    distinct.dedup();
    let reach = |t: f64| scores.iter().filter(|s| **s >= t).count();
    distinct.windows(2).find(|w| reach(w[0]) >= 2).map(|w| {
        let threshold = w[0] / 2.0 + w[1] / 2.0;
        (threshold, reach(threshold))
    })
}

#[cfg(test)]
mod tests {
    use super::splitting_threshold;

    #[test]
    fn the_threshold_keeps_two_hits_or_more_and_drops_one() {
        assert_eq!(splitting_threshold(&[3.0, 2.0, 2.0, 1.0, 1.0]), Some((1.5, 3)));
        assert_eq!(splitting_threshold(&[5.0, 4.0, 1.0]), Some((2.5, 2)));
        assert_eq!(splitting_threshold(&[0.75, 0.75, 0.25]), Some((0.5, 2)));
        // Two distinct scores, but only one hit at the higher: no threshold keeps two.
        assert_eq!(splitting_threshold(&[2.0, 1.0]), None);
        assert_eq!(splitting_threshold(&[1.0, 1.0, 1.0]), None);
        assert_eq!(splitting_threshold(&[]), None);
    }
}
