//! `cursor`/`nextCursor` (§10) of rcp-dense: a keyset cursor, stable across writes.
//!
//! A page ends at a hit; the cursor holds that hit's score and id (the key), the number of
//! hits already returned, and a fingerprint of the request. The next page is the ranking of
//! the same request, now, cut after the key: every hit ordered after it (lower score, or the
//! same score and a greater id). A document written or deleted between pages therefore never
//! makes a page repeat or skip a hit that was ranked before it; a new document that ranks
//! above the key belongs to pages already read and is not shown. Under `mmr` the order is not
//! a score order, so its pages are cut by the count of hits already returned instead.
//!
//! The approximate search of a later page gathers as many candidates as the first page's did
//! (recorded in the cursor, [`Cursor::depth`]), so the candidate set, and with it the ranking,
//! is the one the first page was cut from: pages of one ranking are exactly the hits of one
//! request for their summed `k` (while that stays within the first page's depth, `candidateK`,
//! 100 by default; a page beyond it searches deeper).

use rcp_server::RetrieveRequest;
use rcp_server::cursor::{CursorState, Fingerprint};
use serde::{Deserialize, Serialize};

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    /// Hits already returned.
    #[serde(rename = "o")]
    pub offset: usize,
    /// The score of the last hit returned.
    #[serde(rename = "s")]
    pub score: f32,
    /// The id of the last hit returned.
    #[serde(rename = "i")]
    pub id: String,
    /// The clock (epoch ms) `recency` decayed the first page by, kept for every later page so
    /// their scores compare with `score`; 0 in a cursor of a build before it.
    #[serde(rename = "t", default)]
    pub clock_ms: i64,
    /// [`fingerprint`] of the request.
    #[serde(rename = "f")]
    pub fingerprint: String,
    /// How many candidates the first page's approximate search gathered: every later page of
    /// the ranking searches the same depth (and beam), so the pages partition the ranking one
    /// request would give instead of each page searching its own candidate set; 0 in a cursor
    /// of a build before it.
    #[serde(rename = "d", default)]
    pub depth: usize,
}

impl CursorState for Cursor {
    const REPEAT: &'static str = "query, filter, minScore, recency, mmr, candidateK and k";

    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

impl Cursor {
    /// Whether a hit `(score, id)` comes after this cursor's key in the ranking order (score
    /// descending, then id ascending).
    pub fn precedes(&self, score: f32, id: &str) -> bool {
        score < self.score || (score == self.score && id > self.id.as_str())
    }
}

/// A digest of everything that shapes the ranking: the request without `cursor`, `_meta` and
/// the fields that only change what each hit carries.
pub fn fingerprint(req: &RetrieveRequest) -> String {
    Fingerprint::of_request(req).part(req.mmr.map(|m| m.lambda.to_string()).unwrap_or_default()).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_order_and_refusals() {
        let c = Cursor { offset: 3, score: 0.5, id: "m".into(), clock_ms: 1, fingerprint: "abc".into(), depth: 100 };
        assert_eq!(Cursor::decode(&c.encode(), "abc").unwrap(), c);
        assert!(Cursor::decode(&c.encode(), "abd").unwrap_err().to_string().contains("different request"));
        assert!(Cursor::decode("%%%", "abc").is_err());
        assert!(c.precedes(0.4, "a") && c.precedes(0.5, "n"));
        assert!(!c.precedes(0.5, "m") && !c.precedes(0.5, "a") && !c.precedes(0.6, "z"));
    }
}
