//! `cursor`/`nextCursor` (§10) of rcp-dense: a keyset cursor, stable across writes.
//!
//! A page ends at a hit; the cursor holds that hit's score and id (the key), the number of
//! hits already returned, and a fingerprint of the request. The next page is the ranking of
//! the same request, now, cut after the key: every hit ordered after it (lower score, or the
//! same score and a greater id). A document written or deleted between pages therefore never
//! makes a page repeat or skip a hit that was ranked before it; a new document that ranks
//! above the key belongs to pages already read and is not shown. Under `mmr` the order is not
//! a score order, so its pages are cut by the count of hits already returned instead.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcp_wire::{RcpError, RetrieveParams};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    /// [`fingerprint`] of the request.
    #[serde(rename = "f")]
    pub fingerprint: String,
}

impl Cursor {
    /// The opaque token.
    pub fn encode(&self) -> String {
        // Serialising plain fields cannot fail; an empty token would end pagination.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decodes a token sent back by the client and checks it belongs to this request.
    pub fn decode(token: &str, fingerprint: &str) -> Result<Self, RcpError> {
        let invalid =
            |why: &str| RcpError::invalid_params("cursor", format!("not a cursor this server issued ({why})"));
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("not base64url"))?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid("malformed"))?;
        if cursor.fingerprint != fingerprint {
            return Err(RcpError::invalid_params(
                "cursor",
                "the cursor belongs to a different request (query, filter, minScore, recency, mmr, candidateK and k must be repeated unchanged)",
            ));
        }
        Ok(cursor)
    }

    /// Whether a hit `(score, id)` comes after this cursor's key in the ranking order (score
    /// descending, then id ascending).
    pub fn precedes(&self, score: f32, id: &str) -> bool {
        score < self.score || (score == self.score && id > self.id.as_str())
    }
}

/// A digest of everything that shapes the ranking: the request without `cursor`, `_meta` and
/// the fields that only change what each hit carries.
pub fn fingerprint(params: &RetrieveParams, k: usize) -> String {
    let mut h = Sha256::new();
    h.update(params.query.text().as_bytes());
    h.update([0]);
    h.update(k.to_le_bytes());
    for part in [
        params.filter.as_ref().map(|f| f.to_string()),
        params.min_score.map(|m| m.to_string()),
        params.candidate_k.map(|c| c.to_string()),
        params.recency.as_ref().and_then(|r| serde_json::to_string(r).ok()),
        params.mmr.map(|m| m.lambda.to_string()),
    ] {
        h.update(part.unwrap_or_default().as_bytes());
        h.update([0]);
    }
    h.finalize()[..12].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_order_and_refusals() {
        let c = Cursor { offset: 3, score: 0.5, id: "m".into(), fingerprint: "abc".into() };
        assert_eq!(Cursor::decode(&c.encode(), "abc").unwrap(), c);
        assert!(Cursor::decode(&c.encode(), "abd").unwrap_err().to_string().contains("different request"));
        assert!(Cursor::decode("%%%", "abc").is_err());
        assert!(c.precedes(0.4, "a") && c.precedes(0.5, "n"));
        assert!(!c.precedes(0.5, "m") && !c.precedes(0.5, "a") && !c.precedes(0.6, "z"));
    }
}
