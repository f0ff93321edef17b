//! Bearer authentication (§15.6): checked before anything else, in constant time, and turned
//! into what the caller is granted ([`crate::access::Grant`]).

use axum::http::{HeaderMap, header};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::tokens::{AccessTokens, Sha256Digest, digest};
use crate::service::access::Grant;

/// Who may call: full-access tokens (`--tokens-env`) and scoped ones (`--tokens-file`), both
/// kept as SHA-256 digests. With neither configured nobody is asked for a token.
#[derive(Debug)]
pub(super) struct Credentials {
    full: Vec<Sha256Digest>,
    scoped: Option<AccessTokens>,
}

impl Credentials {
    /// Credentials from the full-access `bearer_tokens` and the scoped `tokens`.
    pub(super) fn new(bearer_tokens: &[String], tokens: Option<AccessTokens>) -> Self {
        Self { full: bearer_tokens.iter().map(|t| digest(t.as_bytes())).collect(), scoped: tokens }
    }

    /// Whether a token is asked for at all.
    fn required(&self) -> bool {
        !self.full.is_empty() || self.scoped.is_some()
    }

    /// What the caller presenting `headers` is granted: everything when no token is asked
    /// for, the grant of its `Authorization: Bearer <token>` when it matches one, else `None`.
    /// A full-access token (`--tokens-env`) outranks a tokens-file line for the same token.
    ///
    /// The presented token is hashed once and its digest compared with every configured one,
    /// each in constant time and without stopping early, so timing tells nothing about which
    /// token or how much of one matched.
    pub(super) fn grant(&self, headers: &HeaderMap) -> Option<Grant> {
        if !self.required() {
            return Some(Grant::all());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .unwrap_or("");
        let presented = digest(presented.as_bytes());
        let mut full = 0u8;
        for d in &self.full {
            full |= u8::conditional_select(&0, &1, d.ct_eq(&presented));
        }
        let scoped = self.scoped.as_ref().and_then(|t| t.grant_of(&presented));
        if full == 1 { Some(Grant::all()) } else { scoped }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use crate::service::access::{Scope, Scopes};

    impl Credentials {
        fn scopes_of(&self, headers: &HeaderMap) -> Option<Scopes> {
            self.grant(headers).map(|g| g.scopes())
        }
    }

    fn with_auth(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn no_tokens_means_no_authentication() {
        assert_eq!(Credentials::new(&[], None).scopes_of(&HeaderMap::new()), Some(Scopes::ALL));
    }

    #[test]
    fn only_a_configured_bearer_token_passes() {
        let creds = Credentials::new(&["alpha".to_owned(), "beta".to_owned()], None);
        assert_eq!(creds.scopes_of(&with_auth("Bearer beta")), Some(Scopes::ALL));
        assert_eq!(creds.scopes_of(&with_auth("bearer alpha")), Some(Scopes::ALL));
        assert_eq!(creds.scopes_of(&with_auth("Bearer alph")), None);
        assert_eq!(creds.scopes_of(&with_auth("Basic alpha")), None);
        assert_eq!(creds.scopes_of(&HeaderMap::new()), None);
    }

    #[test]
    fn scoped_tokens_grant_their_scopes_and_an_empty_file_refuses_everyone() {
        let tokens = AccessTokens::parse("read reader\nread,write writer").expect("tokens");
        let creds = Credentials::new(&["full".to_owned()], Some(tokens));
        assert_eq!(creds.scopes_of(&with_auth("Bearer reader")), Some(Scopes::NONE.with(Scope::Read)));
        assert_eq!(
            creds.scopes_of(&with_auth("Bearer writer")),
            Some(Scopes::NONE.with(Scope::Read).with(Scope::Write))
        );
        assert_eq!(creds.scopes_of(&with_auth("Bearer full")), Some(Scopes::ALL));
        let none = Credentials::new(&[], Some(AccessTokens::parse("# revoked").expect("tokens")));
        assert_eq!(none.scopes_of(&with_auth("Bearer reader")), None);
        assert_eq!(none.scopes_of(&HeaderMap::new()), None);
    }
}
