//! Pagination cursors (§10): each page after the first is cut from the same snapshot and
//! the same ranking, which the cursor names and fingerprints.

use super::search::SearchRequest;
use crate::error::EngineError;

/// A stable fingerprint of what defines a ranking, carried in cursors so a cursor cannot
/// be replayed against a different query.
pub(super) fn fingerprint(req: &SearchRequest) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes.iter().chain([0xffu8].iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(req.query.as_bytes());
    feed(req.filter.as_ref().map(|f| f.to_value().to_string()).unwrap_or_default().as_bytes());
    feed(req.min_score.map(|m| m.to_string()).unwrap_or_default().as_bytes());
    feed(req.recency.as_ref().map(|r| format!("{}:{}", r.field, r.half_life_days)).unwrap_or_default().as_bytes());
    h
}

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

    #[test]
    fn fingerprint_follows_what_defines_the_ranking() {
        let base = SearchRequest::new("inverted index", 10);
        let same_ranking = SearchRequest { k: 3, include_text: false, ..base.clone() };
        assert_eq!(fingerprint(&base), fingerprint(&same_ranking));
        let other_query = SearchRequest::new("inverted indexes", 10);
        assert_ne!(fingerprint(&base), fingerprint(&other_query));
        let with_floor = SearchRequest { min_score: Some(1.0), ..base.clone() };
        assert_ne!(fingerprint(&base), fingerprint(&with_floor));
    }
}
