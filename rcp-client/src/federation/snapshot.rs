//! A federation's snapshot (§7.7.1): one `indexVersion` naming the snapshot each engine served,
//! for [`super::Federation`] and aggregators such as rcp-gateway alike.
//!
//! A federation offers `retrieve.snapshots` when every engine does. Its answer's `indexVersion`
//! is the engines' own versions under their ids (`fed1:{"a":"17","b":"9"}`), set when every
//! engine that answered echoed one. A request that pins such a token sends each engine its own
//! version, and the fused answer stands only if it is exactly that snapshot again (the same
//! engines answered, each with the version pinned); otherwise — a token this federation did not
//! mint, an engine gone, failed or skipped, an engine that no longer has its snapshot — it is
//! `-32010`, never a different snapshot served silently.

use std::collections::BTreeMap;

use rcp_wire::{RcpError, RetrieveParams};

/// The prefix of the tokens a federation mints.
const PREFIX: &str = "fed1:";

/// The versions of one federated answer, by engine id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<String, String>);

impl Snapshot {
    /// The snapshot of the engines that answered, each with the `indexVersion` it echoed; `None`
    /// when one of them echoed none (then no token can pin the answer).
    pub fn of<'a>(answers: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Option<Self> {
        let mut versions = BTreeMap::new();
        for (engine, version) in answers {
            versions.insert(engine.to_owned(), version?.to_owned());
        }
        (!versions.is_empty()).then_some(Self(versions))
    }

    /// The `indexVersion` naming this snapshot.
    pub fn token(&self) -> String {
        format!("{PREFIX}{}", serde_json::to_string(&self.0).unwrap_or_default())
    }

    /// The snapshot a pinned `indexVersion` names; `-32010` when it is not one this federation
    /// minted.
    pub fn parse(token: &str) -> Result<Self, RcpError> {
        token
            .strip_prefix(PREFIX)
            .and_then(|json| serde_json::from_str::<BTreeMap<String, String>>(json).ok())
            .filter(|m| !m.is_empty())
            .map(Self)
            .ok_or_else(|| {
                RcpError::backend_unavailable(format!(
                    "indexVersion '{}' is not a snapshot this federation served",
                    truncate(token)
                ))
                .with_retryable(false)
            })
    }

    /// The version `engine` served in this snapshot.
    pub fn version_of(&self, engine: &str) -> Option<&str> {
        self.0.get(engine).map(String::as_str)
    }

    /// `params` as `engine` receives them under this pin: its own version, or none when the
    /// snapshot holds none of it (its answer then cannot match, see [`Self::check_served`]).
    pub fn pin(&self, engine: &str, params: &mut RetrieveParams) {
        params.index_version = self.version_of(engine).map(str::to_owned);
    }

    /// The `indexVersion` of an answer whose engines served `served`, under the request's
    /// `pin`: the token of `served`, or `-32010` when a pin was asked and `served` is not
    /// exactly it ([`Self::check_served`]).
    pub fn settle(pin: Option<&Snapshot>, served: Option<Snapshot>) -> Result<Option<String>, RcpError> {
        if let Some(pin) = pin {
            pin.check_served(served.as_ref())?;
        }
        Ok(served.map(|s| s.token()))
    }

    /// `Ok` when `served` (the snapshot of the answers) is this pinned one; `-32010` naming the
    /// first difference otherwise.
    pub fn check_served(&self, served: Option<&Snapshot>) -> Result<(), RcpError> {
        let empty = BTreeMap::new();
        let got = served.map_or(&empty, |s| &s.0);
        let differs = self.0.iter().find(|(e, v)| got.get(*e) != Some(*v)).map(|(e, _)| e.as_str());
        let extra = got.keys().find(|e| !self.0.contains_key(*e)).map(String::as_str);
        match (differs, extra) {
            (None, None) => Ok(()),
            (Some(e), _) => Err(RcpError::backend_unavailable(format!(
                "the pinned indexVersion's snapshot of engine '{e}' could not be served (the engine did not answer it, \
                 or no longer has it)"
            ))),
            (None, Some(e)) => Err(RcpError::backend_unavailable(format!(
                "engine '{e}' answered but has no snapshot in the pinned indexVersion (it joined after it was taken)"
            ))),
        }
    }
}

fn truncate(s: &str) -> &str {
    s.get(..s.char_indices().nth(64).map_or(s.len(), |(i, _)| i)).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_each_engines_version_and_pins_it_back() {
        let s = Snapshot::of([("b", Some("9")), ("a", Some("17"))]).expect("both echoed");
        let token = s.token();
        assert_eq!(token, r#"fed1:{"a":"17","b":"9"}"#);
        let pinned = Snapshot::parse(&token).expect("ours");
        assert_eq!(pinned, s);
        let mut p = RetrieveParams::new("q", 3);
        pinned.pin("a", &mut p);
        assert_eq!(p.index_version.as_deref(), Some("17"));
        pinned.pin("c", &mut p);
        assert_eq!(p.index_version, None);
        assert!(pinned.check_served(Some(&s)).is_ok());
    }

    #[test]
    fn anything_but_the_pinned_snapshot_is_backend_unavailable() {
        assert!(Snapshot::of([("a", Some("1")), ("b", None)]).is_none(), "b cannot be pinned");
        for bad in ["17", "fed1:", "fed1:{}", "fed1:[1]", "fed1:{\"a\":1}"] {
            assert_eq!(
                Snapshot::parse(bad).map_err(|e| e.code),
                Err(rcp_wire::ErrorCode::BACKEND_UNAVAILABLE),
                "{bad}"
            );
        }
        let pinned = Snapshot::of([("a", Some("1")), ("b", Some("2"))]).expect("pinned");
        let fewer = Snapshot::of([("a", Some("1"))]);
        let other = Snapshot::of([("a", Some("1")), ("b", Some("3"))]);
        let more = Snapshot::of([("a", Some("1")), ("b", Some("2")), ("c", Some("5"))]);
        for served in [None, fewer.as_ref(), other.as_ref(), more.as_ref()] {
            let e = pinned.check_served(served).expect_err("not the pinned snapshot");
            assert_eq!(e.code, rcp_wire::ErrorCode::BACKEND_UNAVAILABLE);
        }
    }
}
