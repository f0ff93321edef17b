//! `cursor`/`nextCursor` (§10): an opaque token holding the offset of the next page, the index
//! version the first page was ranked on, and a fingerprint of the request.
//!
//! Pages are stable or refused: a cursor is only accepted for the same request (query, mode,
//! filter, fusion, k) and only while the index is at the version it was issued on. Another
//! write in between (from this process or any other) makes it `-32602` naming `cursor`, with
//! the versions, and the client starts again from the first page; PostgreSQL keeps no old
//! snapshots to page through.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcp_wire::{Mode, RcpError, RetrieveParams};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Hits already returned.
    #[serde(rename = "o")]
    pub offset: usize,
    /// The index version of the first page.
    #[serde(rename = "v")]
    pub version: i64,
    /// [`fingerprint`] of the request.
    #[serde(rename = "f")]
    pub fingerprint: String,
}

impl Cursor {
    /// The opaque token.
    pub fn encode(&self) -> String {
        // Serialising three plain fields cannot fail; an empty token would end pagination.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decodes and checks a token sent back by the client against this request.
    pub fn decode(token: &str, fingerprint: &str) -> Result<Self, RcpError> {
        let invalid =
            |why: &str| RcpError::invalid_params("cursor", format!("not a cursor this server issued ({why})"));
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("not base64url"))?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid("malformed"))?;
        if cursor.fingerprint != fingerprint {
            return Err(RcpError::invalid_params(
                "cursor",
                "the cursor belongs to a different request (query, mode, filter, fusion and k must be repeated unchanged)",
            ));
        }
        Ok(cursor)
    }

    /// Refuses the cursor when the index moved on since the first page.
    pub fn check_version(&self, now: i64) -> Result<(), RcpError> {
        if self.version == now {
            return Ok(());
        }
        Err(RcpError::invalid_params(
            "cursor",
            format!(
                "the index changed since the first page (version {} -> {now}); repeat the request without a cursor",
                self.version
            ),
        ))
    }
}

/// A digest of everything that shapes the ranking: the request without `cursor`, `_meta`
/// and the fields that only change what each hit carries.
pub fn fingerprint(params: &RetrieveParams, mode: &Mode, k: usize) -> String {
    let mut h = Sha256::new();
    h.update(params.query.text().as_bytes());
    h.update([0]);
    h.update(mode.as_str().as_bytes());
    h.update([0]);
    h.update(k.to_le_bytes());
    for part in [
        params.filter.as_ref().map(|f| f.to_string()),
        params.fusion.as_ref().and_then(|f| serde_json::to_string(f).ok()),
        params.min_score.map(|m| m.to_string()),
        params.candidate_k.map(|c| c.to_string()),
        params.recency.as_ref().and_then(|r| serde_json::to_string(r).ok()),
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
    fn round_trip_and_refusals() {
        let c = Cursor { offset: 10, version: 7, fingerprint: "abc".into() };
        let token = c.encode();
        assert_eq!(Cursor::decode(&token, "abc").unwrap(), c);
        assert!(Cursor::decode(&token, "abd").unwrap_err().to_string().contains("different request"));
        assert!(Cursor::decode("%%%", "abc").is_err());
        assert!(Cursor::decode(&URL_SAFE_NO_PAD.encode(b"[1]"), "abc").is_err());
        assert!(c.check_version(7).is_ok());
        assert!(c.check_version(8).unwrap_err().to_string().contains("7 -> 8"));
    }
}
