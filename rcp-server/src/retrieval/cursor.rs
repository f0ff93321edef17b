//! Opaque pagination cursors (§10) for engines built on the framework: one token format and one
//! request fingerprint, whatever position an engine keeps in its cursor.
//!
//! A cursor is the engine's own state (an offset, a keyset, an index version, ...) serialised
//! as a JSON object with the state's format version (`_v`, [`CursorState::FORMAT`]) and a
//! [`Fingerprint`] of the request that minted it, encoded base64url without padding. The client
//! cannot forge a position it was not given into another request's pages, and the engine never
//! serves a page of a ranking it did not start.
//!
//! A cursor the server cannot serve is refused on `cursor` (`error.data.field`) with one of two
//! codes, by whose cursor it is (§12):
//!
//! - `-32602` `InvalidParams` ([`RcpError::invalid_params`]): **not one of ours**. The token
//!   does not decode (not base64url, not a JSON object, not this engine's state), or it was
//!   minted for another request (another query, filter, `k`, ...; the message names what must
//!   be repeated unchanged), or it holds a position this server never mints. Retrying cannot
//!   help; the client must fix the request.
//! - `-32015` `NotFound` ([`RcpError::cursor_expired`]): **ours, but expired**. The token is
//!   this server's for this request, but it can no longer be honoured: its format version is
//!   not the one this build reads (minted by an older or a newer build), or the engine no longer
//!   holds what it points into (the index changed since the first page, its snapshot was
//!   dropped). The client restarts pagination without a cursor (§12.2).
//!
//! [`decode`] makes the first decision for every engine (shape, format version, fingerprint);
//! an engine answers the second kind itself, with [`RcpError::cursor_expired`], when the state
//! it decoded names something it no longer holds.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcp_wire::RcpError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
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

/// The key of the format version in a token's JSON object; a token without it is format 1 (the
/// format before versions were written).
const FORMAT_KEY: &str = "_v";

/// What an engine keeps in a cursor: its position, and the [`Fingerprint`] of the request. It
/// serialises as a JSON object (a struct with named fields) without a `_v` key.
pub trait CursorState: Serialize + DeserializeOwned {
    /// The request fields the fingerprint covers, named in the `-32602` a cursor of another
    /// request gets ("query, filter and k").
    const REPEAT: &'static str;

    /// The version of this state's format. Bump it when a change would make an older token
    /// unreadable or mean another position: a token of any other version is then `-32015`
    /// (restart pagination), never misread.
    const FORMAT: u32 = 1;

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

/// The opaque token of `state`: its JSON object with the format version added.
pub fn encode<T: CursorState>(state: &T) -> String {
    // Serialising plain fields cannot fail; an empty token would end pagination.
    let mut object = match serde_json::to_value(state) {
        Ok(Value::Object(object)) => object,
        _ => Map::new(),
    };
    object.insert(FORMAT_KEY.to_owned(), Value::from(T::FORMAT));
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&object).unwrap_or_default())
}

/// The state a client sent back in `token`, if this server minted it, in the format this build
/// reads, for the request whose fingerprint is `fingerprint`. A token that is not ours (does not
/// decode, or another request's) is `-32602` on `cursor`, saying that `repeat` (the request
/// fields the fingerprint covers) must be sent unchanged; one of another format version is
/// `-32015` on `cursor` (see the module documentation).
pub fn decode<T: CursorState>(token: &str, fingerprint: &str, repeat: &str) -> Result<T, RcpError> {
    let invalid = |why: &str| RcpError::invalid_params("cursor", format!("not a cursor this server issued ({why})"));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("not base64url"))?;
    let Ok(Value::Object(mut object)) = serde_json::from_slice(&bytes) else { return Err(invalid("malformed")) };
    let format = match object.remove(FORMAT_KEY) {
        None => 1,
        Some(v) => v.as_u64().ok_or_else(|| invalid("malformed format version"))?,
    };
    if format != u64::from(T::FORMAT) {
        return Err(RcpError::cursor_expired(format!(
            "the cursor is of format version {format}; this server reads version {}",
            T::FORMAT
        )));
    }
    let state: T = serde_json::from_value(Value::Object(object)).map_err(|_| invalid("malformed"))?;
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

    /// The token of `object`, as a build writing it would mint it.
    fn token_of(object: serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(object.to_string())
    }

    #[test]
    fn another_format_version_is_expired_and_a_foreign_token_is_invalid() {
        let f = Fingerprint::of_request(&RetrieveRequest::new("q", 10)).finish();
        let at = At { offset: 7, fingerprint: f.clone() };
        // Tokens carry the format version; one written before versions were is format 1.
        let written: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(encode(&at)).unwrap()).unwrap();
        assert_eq!(written["_v"], 1);
        let unversioned = token_of(serde_json::json!({"offset": 7, "fingerprint": f}));
        assert_eq!(decode::<At>(&unversioned, &f, "k").ok(), Some(at));

        // Ours, of a format this build does not read (older or newer): -32015 on cursor.
        for v in [0, 2] {
            let e = decode::<At>(&token_of(serde_json::json!({"_v": v, "offset": 7, "fingerprint": f})), &f, "k")
                .expect_err("another format");
            assert_eq!((e.code, e.field()), (rcp_wire::ErrorCode::NOT_FOUND, Some("cursor")), "{e}");
            assert!(e.to_string().contains(&format!("format version {v}")), "{e}");
        }
        // Not ours: -32602 on cursor.
        for token in [
            "%%%".to_owned(),
            token_of(serde_json::json!([1])),
            token_of(serde_json::json!({"_v": "one", "offset": 7, "fingerprint": f})),
            token_of(serde_json::json!({"_v": 1, "position": 7})),
            token_of(serde_json::json!({"_v": 1, "offset": 7, "fingerprint": "another"})),
        ] {
            let e = decode::<At>(&token, &f, "k").expect_err("not ours");
            assert_eq!((e.code, e.field()), (rcp_wire::ErrorCode::INVALID_PARAMS, Some("cursor")), "{token}: {e}");
        }
    }
}
