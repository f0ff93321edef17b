//! Opaque pagination cursors (§10) for engines built on the framework: one token format and one
//! request fingerprint, whatever position an engine keeps in its cursor.
//!
//! A cursor is the engine's own state (an offset, a keyset, an index version, ...) serialised
//! as JSON and encoded base64url without padding, with a [`Fingerprint`] of the request that
//! minted it. A token that does not decode is `-32602` on `cursor` ("not a cursor this server
//! issued"); one minted for another request (another query, filter, `k`, ...) is `-32602` too,
//! naming what must be repeated unchanged. The client cannot forge a position it was not given
//! into another request's pages, and the engine never serves a page of a ranking it did not
//! start.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcp_wire::RcpError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::handler::RetrieveRequest;

/// A digest of everything that shapes a ranking: built part by part, each part separated from
/// the next so that two parts can never run together into a third request's.
#[derive(Debug, Clone, Default)]
pub struct Fingerprint(Sha256);

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Self {
        Self::default()
    }

    /// The parts every ranked `retrieve` shares: the query text, the page size `k`, `filter`,
    /// `minScore`, `candidateK` and `recency`. An engine adds what else shapes its ranking
    /// (its mode, `fusion`, `mmr`, ...) with [`Self::part`].
    pub fn of_request(req: &RetrieveRequest) -> Self {
        Self::new()
            .part(req.query.text())
            .part(req.k.to_le_bytes())
            .part(req.filter.as_ref().map(|f| f.to_value().to_string()).unwrap_or_default())
            .part(req.min_score.map(|m| m.to_string()).unwrap_or_default())
            .part(req.candidate_k.to_le_bytes())
            .part(req.recency.as_ref().map(|r| format!("{}:{}", r.field, r.half_life_days)).unwrap_or_default())
    }

    /// Adds one part.
    pub fn part(mut self, bytes: impl AsRef<[u8]>) -> Self {
        self.0.update(bytes.as_ref());
        self.0.update([0]);
        self
    }

    /// The fingerprint: the first 12 bytes of the digest, in hex.
    pub fn finish(self) -> String {
        self.0.finalize()[..12].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What an engine keeps in a cursor: its position, and the [`Fingerprint`] of the request.
pub trait CursorState: Serialize + DeserializeOwned {
    /// The request fields the fingerprint covers, named in the `-32602` a cursor of another
    /// request gets ("query, filter and k").
    const REPEAT: &'static str;

    /// The fingerprint of the request the cursor was minted for.
    fn fingerprint(&self) -> &str;

    /// The opaque token ([`encode`]).
    fn encode(&self) -> String {
        encode(self)
    }

    /// The state in `token`, if this server minted it for the request fingerprinted
    /// `fingerprint` ([`decode`]).
    fn decode(token: &str, fingerprint: &str) -> Result<Self, RcpError> {
        decode(token, fingerprint, Self::REPEAT)
    }
}

/// The opaque token of `state`.
pub fn encode<T: CursorState>(state: &T) -> String {
    // Serialising plain fields cannot fail; an empty token would end pagination.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(state).unwrap_or_default())
}

/// The state a client sent back in `token`, if this server minted it for the request whose
/// fingerprint is `fingerprint`; otherwise `-32602` on `cursor`, saying that `repeat` (the
/// request fields the fingerprint covers) must be sent unchanged.
pub fn decode<T: CursorState>(token: &str, fingerprint: &str, repeat: &str) -> Result<T, RcpError> {
    let invalid = |why: &str| RcpError::invalid_params("cursor", format!("not a cursor this server issued ({why})"));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("not base64url"))?;
    let state: T = serde_json::from_slice(&bytes).map_err(|_| invalid("malformed"))?;
    if state.fingerprint() != fingerprint {
        return Err(RcpError::invalid_params(
            "cursor",
            format!("the cursor belongs to a different request ({repeat} must be repeated unchanged)"),
        ));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct At {
        offset: usize,
        fingerprint: String,
    }

    impl CursorState for At {
        const REPEAT: &'static str = "query and k";

        fn fingerprint(&self) -> &str {
            &self.fingerprint
        }
    }

    #[test]
    fn tokens_round_trip_and_belong_to_one_request() {
        let a = Fingerprint::of_request(&RetrieveRequest::new("q", 10)).finish();
        let b = Fingerprint::of_request(&RetrieveRequest::new("q", 11)).finish();
        let c = Fingerprint::of_request(&RetrieveRequest::new("q", 10)).part("dense").finish();
        assert_eq!(a.len(), 24);
        assert!(a != b && a != c && b != c);
        assert_eq!(a, Fingerprint::of_request(&RetrieveRequest::new("q", 10)).finish());
        // Parts never run together: ("ab", "c") is not ("a", "bc").
        assert_ne!(Fingerprint::new().part("ab").part("c").finish(), Fingerprint::new().part("a").part("bc").finish());

        let at = At { offset: 7, fingerprint: a.clone() };
        let token = encode(&at);
        assert_eq!(decode::<At>(&token, &a, "query and k").ok(), Some(at));
        let e = decode::<At>(&token, &b, "query and k").expect_err("another request");
        assert_eq!(e.field(), Some("cursor"));
        assert!(e.to_string().contains("query and k must be repeated unchanged"), "{e}");
        assert!(decode::<At>("%%%", &a, "k").is_err_and(|e| e.to_string().contains("not base64url")));
        assert!(
            decode::<At>(&URL_SAFE_NO_PAD.encode(b"[1]"), &a, "k").is_err_and(|e| e.to_string().contains("malformed"))
        );
    }
}
