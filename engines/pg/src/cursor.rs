//! `cursor`/`nextCursor` (§10): an opaque token holding the offset of the next page, the index
//! version the first page was ranked on, and a fingerprint of the request.
//!
//! Pages are stable or refused: a cursor is only accepted for the same request (query, mode,
//! unit, filter, fusion, k; another request's cursor is `-32602`) and only while the index is at
//! the version it was issued on. Another write in between (from this process or any other)
//! expires it: `-32015` naming `cursor`, with the versions, and the client starts again from the
//! first page; PostgreSQL keeps no old snapshots to page through (see
//! [`rcp_server::cursor`] for which refusal is which).

use rcp_server::RetrieveRequest;
use rcp_server::cursor::{CursorState, Fingerprint};
use rcp_wire::{Mode, RcpError};
use serde::{Deserialize, Serialize};

use crate::query::Unit;

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

impl CursorState for Cursor {
    const REPEAT: &'static str = "query, mode, unit, filter, fusion, minScore, recency, candidateK and k";

    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

impl Cursor {
    /// Refuses the cursor as expired (`-32015`) when the index moved on since the first page.
    pub fn check_version(&self, now: i64) -> Result<(), RcpError> {
        if self.version == now {
            return Ok(());
        }
        Err(RcpError::cursor_expired(format!(
            "the index changed since the first page (version {} -> {now}); repeat the request without a cursor",
            self.version
        )))
    }
}

/// A digest of everything that shapes the ranking: the request without `cursor`, `_meta`
/// and the fields that only change what each hit carries.
pub fn fingerprint(req: &RetrieveRequest, mode: &Mode, unit: Unit) -> String {
    let fusion = req.fusion.as_ref().and_then(|f| serde_json::to_string(f).ok()).unwrap_or_default();
    Fingerprint::of_request(req).part(mode.as_str()).part(unit.as_str()).part(fusion).finish()
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
        assert!(c.check_version(7).is_ok());
        let expired = c.check_version(8).unwrap_err();
        assert!(expired.to_string().contains("7 -> 8"), "{expired}");
        assert_eq!((expired.code, expired.field()), (rcp_wire::ErrorCode::NOT_FOUND, Some("cursor")));
    }
}
