//! Pagination cursors (§10): each page after the first is cut from the same snapshot and
//! the same ranking, which the cursor names and fingerprints.

use crate::error::EngineError;

/// A pagination cursor (§10): the snapshot, the offset of the next page, the fingerprint of
/// the ranking and the recency clock, so every page is cut from the same ranking.
pub(super) struct Cursor {
    pub(super) version: String,
    pub(super) offset: usize,
    pub(super) fingerprint: u64,
    pub(super) now_ms: i64,
}

impl Cursor {
    /// The cursor as sent on the wire (`nextCursor`).
    pub(super) fn encode(&self) -> String {
        format!("{}.{}.{:016x}.{}", self.version, self.offset, self.fingerprint, self.now_ms)
    }

    /// Parses a cursor this server issued; anything else is `-32602` at `cursor`.
    pub(super) fn decode(s: &str) -> Result<Self, EngineError> {
        let bad = || EngineError::invalid("cursor", "not a cursor issued by this server");
        let parts: Vec<&str> = s.split('.').collect();
        let [version, offset, fp, now] = parts.as_slice() else { return Err(bad()) };
        Ok(Self {
            version: (*version).to_owned(),
            offset: offset.parse().map_err(|_| bad())?,
            fingerprint: u64::from_str_radix(fp, 16).map_err(|_| bad())?,
            now_ms: now.parse().map_err(|_| bad())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_rejected() {
        let c = Cursor { version: "uid-7".into(), offset: 20, fingerprint: 0xabc, now_ms: -5 };
        let back = Cursor::decode(&c.encode()).expect("a cursor we issued decodes");
        assert_eq!((back.version.as_str(), back.offset, back.fingerprint, back.now_ms), ("uid-7", 20, 0xabc, -5));
        for bad in ["", "uid-7.20.abc", "uid-7.x.0abc.1", "uid-7.20.zz.1", "a.b.c.d.e"] {
            assert!(Cursor::decode(bad).is_err(), "{bad:?}");
        }
    }
}
