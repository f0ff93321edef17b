//! Pagination (§10): pages by cursor, alone and under `minScore` (§7.7).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::session::Main;
use crate::verdict::{Outcome, Res, fail, hit_key, hits, show, skip, verdict};

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
/// pages are disjoint, that a cursor is stable (the same cursor twice yields the same page), and
/// that the pages, taken together, are the same hits as one unpaged request for as many.
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
    // Order consistency: the pages are the top of the ranking, as one request would return it.
    let total = ids.len() as u64;
    let big_k = m.k(total);
    let big: Vec<String> = hits(&m.broad_hits(big_k, json!({})).await?)?.iter().map(hit_key).collect();
    let expected: HashSet<&str> = ids.iter().take(big.len()).map(|s| s.as_str()).collect();
    let got: HashSet<&str> = big.iter().map(String::as_str).collect();
    let how = if exhausted { "every page" } else { "the first pages" };
    verdict(got == expected, || {
        let missing: Vec<&&str> = expected.difference(&got).take(3).collect();
        let extra: Vec<&&str> = got.difference(&expected).take(3).collect();
        format!(
            "{how} ({} hits) and one request at k={big_k} ({} hits) disagree: only paged {missing:?}, only unpaged {extra:?}",
            ids.len(),
            big.len()
        )
    })
    .map(|o| match o {
        Outcome::Pass(_) => Outcome::Pass(format!("{} pages of up to {page_k} hits ({how})", pages.len())),
        other => other,
    })
}
