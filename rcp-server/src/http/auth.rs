//! Bearer authentication (§15.6): checked before anything else, in constant time.

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

/// Whether the request presents one of `tokens` as `Authorization: Bearer <token>`; with no
/// tokens configured every request is accepted.
///
/// The presented token is compared against every configured one without stopping early, each
/// comparison in constant time, so timing tells nothing about which or how much matched.
pub(super) fn authorized(tokens: &[String], headers: &HeaderMap) -> bool {
    if tokens.is_empty() {
        return true;
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .unwrap_or("")
        .as_bytes();
    let mut ok = subtle::Choice::from(0u8);
    for t in tokens {
        ok |= t.as_bytes().ct_eq(presented);
    }
    bool::from(ok)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with_auth(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn no_tokens_means_no_authentication() {
        assert!(authorized(&[], &HeaderMap::new()));
    }

    #[test]
    fn only_a_configured_bearer_token_passes() {
        let tokens = vec!["alpha".to_owned(), "beta".to_owned()];
        assert!(authorized(&tokens, &with_auth("Bearer beta")));
        assert!(authorized(&tokens, &with_auth("bearer alpha")));
        assert!(!authorized(&tokens, &with_auth("Bearer alph")));
        assert!(!authorized(&tokens, &with_auth("Basic alpha")));
        assert!(!authorized(&tokens, &HeaderMap::new()));
    }
}
