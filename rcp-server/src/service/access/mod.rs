//! Access scopes (§15.6): what an authenticated caller may do, whatever the transport that
//! authenticated it.
//!
//! A caller holds a set of [`Scope`]s. `read` allows the retrieval side (`retrieve`, `embed*`,
//! `rerank`, `query/transform`, `graph`, `catalog/list`, `memory/recall`); `write` the methods
//! that change what is stored (`index/add`, `index/delete`, `feedback`, `memory/build`);
//! `admin` the operations endpoints (`/metrics`). The lifecycle methods (`initialize`, `info`,
//! `ping`, `shutdown`) need no scope. Scopes are independent: a line of the tokens file names
//! every scope its token gets (`read,write` for an application that reads and writes, `write`
//! alone for an ingestion job, `admin` alone for a metrics scraper).
//!
//! The rule is applied once, in the dispatcher's gate, before capability gating (so a caller
//! cannot tell which capabilities exist by probing what it may not call): a method outside the
//! session's scopes is `-32012` and runs nothing. A session's `initialize` advertises only what
//! its scopes allow ([`Scopes::narrow`]). Sessions that no transport authenticated (stdio, a
//! byte stream, [`crate::Server::connect`]) hold [`Scopes::ALL`].
//!
//! A [`Grant`] is the scopes of one caller with, for `read` and `write`, the collections each
//! reaches (`read@fruit`); the framework gates methods by its scopes, the handlers of a server
//! with collections decide what each call reaches.

mod grant;

pub use grant::{Grant, MAX_COLLECTION_NAME};

use std::fmt;

use rcp_wire::RcpError;
use rcp_wire::capabilities::{Capabilities, Capability};
use rcp_wire::methods::{Effect, Method};

/// One thing a caller may be allowed to do (§15.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The retrieval side: methods that read what is stored.
    Read,
    /// The methods that change what is stored: `index/*`, `feedback`, `memory/build`.
    Write,
    /// The operations endpoints (`/metrics`).
    Admin,
}

impl Scope {
    /// Every scope, in the order they are written.
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];

    /// Its name in a tokens file and in messages (`read`, `write`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The scope a call of `m` needs; `None` for the lifecycle methods, which every
    /// authenticated caller may call.
    pub fn required_for(m: Method) -> Option<Self> {
        match m.effect() {
            Effect::Lifecycle => None,
            Effect::Read => Some(Scope::Read),
            Effect::Write => Some(Scope::Write),
        }
    }

    fn bit(self) -> u8 {
        scope_bit(self)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Scope`]s: what one caller may do.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// No scope at all: only the lifecycle methods.
    pub const NONE: Scopes = Scopes(0);
    /// Every scope: what a caller no transport authenticated holds, and a `--tokens-env` token.
    pub const ALL: Scopes = Scopes(1 | 2 | 4);

    /// These scopes and `scope`.
    pub const fn with(self, scope: Scope) -> Self {
        Scopes(self.0 | scope_bit(scope))
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Whether every scope of `other` is in this set.
    pub fn covers(self, other: Scopes) -> bool {
        self.0 & other.0 == other.0
    }

    /// The set as a bit mask (read 1, write 2, admin 4): the slot of its advertised set.
    pub(crate) fn bits(self) -> u8 {
        self.0
    }

    /// A comma-separated list of scope names (`read,write`), as a tokens file writes it.
    pub fn parse_list(list: &str) -> Result<Self, String> {
        let mut scopes = Scopes::NONE;
        for name in list.split(',') {
            let name = name.trim();
            let scope = Scope::parse(name)
                .ok_or_else(|| format!("unknown scope '{name}' (allowed: read, write, admin, separated by commas)"))?;
            scopes = scopes.with(scope);
        }
        Ok(scopes)
    }

    /// Whether a caller with these scopes may call `m`.
    pub fn permits(self, m: Method) -> bool {
        Scope::required_for(m).is_none_or(|s| self.contains(s))
    }

    /// `Ok` if these scopes permit `m`, else the `-32012` that answers it (naming the scope it
    /// needs, never anything stored).
    pub fn admit(self, m: Method) -> Result<(), RcpError> {
        match Scope::required_for(m) {
            Some(scope) if !self.contains(scope) => Err(RcpError::unauthorized()
                .with_detail(format!("'{m}' needs the '{scope}' scope, which this caller's credentials lack"))),
            _ => Ok(()),
        }
    }

    /// `caps` as a caller with these scopes sees it: every capability none of whose methods it
    /// may call is left out (a `read` caller sees no `index` and no `feedback`), so what
    /// `initialize` advertises is what the caller may do. Capabilities without methods of their
    /// own (`filter`, `streaming`, ...) stay.
    pub fn narrow(self, caps: &Capabilities) -> Capabilities {
        let mut narrowed = caps.clone();
        if self == Scopes::ALL {
            return narrowed;
        }
        for cap in Capability::ALL {
            let methods = Method::ALL.into_iter().filter(|m| m.capability() == Some(cap));
            let mut any = false;
            let mut permitted = false;
            for m in methods {
                any = true;
                permitted |= self.permits(m);
            }
            if any && !permitted {
                narrowed.remove(cap);
            }
        }
        narrowed
    }
}

const fn scope_bit(scope: Scope) -> u8 {
    match scope {
        Scope::Read => 1,
        Scope::Write => 2,
        Scope::Admin => 4,
    }
}

impl Default for Scopes {
    /// [`Scopes::NONE`]: nothing is granted unless a transport says so.
    fn default() -> Self {
        Scopes::NONE
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scopes({self})")
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Scope::ALL.into_iter().filter(|s| self.contains(*s)).map(Scope::as_str).collect();
        if names.is_empty() { f.write_str("none") } else { f.write_str(&names.join(",")) }
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::ErrorCode;
    use rcp_wire::capabilities::{Flag, IndexCapability, RetrieveCapability};

    use super::*;

    #[test]
    fn lists_parse_and_unknown_names_are_refused() {
        assert_eq!(Scopes::parse_list("read").ok(), Some(Scopes::NONE.with(Scope::Read)));
        assert_eq!(Scopes::parse_list("read, write,admin").ok(), Some(Scopes::ALL));
        assert!(Scopes::parse_list("read,root").is_err_and(|e| e.contains("'root'")));
        assert!(Scopes::parse_list("").is_err());
        assert!(Scopes::parse_list("read,").is_err());
        assert_eq!(Scopes::ALL.to_string(), "read,write,admin");
    }

    #[test]
    fn every_method_but_lifecycle_needs_a_scope() {
        let read = Scopes::NONE.with(Scope::Read);
        for m in Method::ALL {
            assert_eq!(Scope::required_for(m).is_none(), m.callable_before_initialize(), "{m}");
            assert!(Scopes::ALL.permits(m), "{m}");
        }
        assert!(read.permits(Method::Retrieve) && !read.permits(Method::IndexAdd) && !read.permits(Method::Feedback));
        let e = read.admit(Method::IndexDelete).expect_err("refused");
        assert_eq!(e.code, ErrorCode::UNAUTHORIZED);
        let write = Scopes::NONE.with(Scope::Write);
        assert!(write.permits(Method::IndexAdd) && !write.permits(Method::Retrieve));
    }

    #[test]
    fn a_read_caller_is_not_advertised_what_it_may_not_call() {
        let caps = Capabilities {
            retrieve: Some(RetrieveCapability::default()),
            index: Some(IndexCapability { writable: true, ..Default::default() }),
            feedback: Some(Flag::default()),
            ..Capabilities::default()
        };
        let read = Scopes::NONE.with(Scope::Read).narrow(&caps);
        assert!(read.retrieve.is_some() && read.index.is_none() && read.feedback.is_none());
        assert_eq!(Scopes::ALL.narrow(&caps), caps);
        let write = Scopes::NONE.with(Scope::Write).narrow(&caps);
        assert!(write.retrieve.is_none() && write.index.is_some_and(|i| i.writable));
    }
}
