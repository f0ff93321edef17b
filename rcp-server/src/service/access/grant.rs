//! Collection grants (§15.6): a caller's scopes, each reaching every collection or only the
//! named ones.
//!
//! A tokens-file line writes a grant as a comma-separated list: `read` (every collection),
//! `read@fruit` (only `fruit`), `read@fruit,read@veg,write@fruit`, `read,write@fruit` (reads
//! everything, writes only `fruit`). `admin` has no collections. The framework gates methods by
//! the grant's [`Scopes`]; which collections a call reaches is decided by the handlers of a
//! server that has collections (the gateway), through [`crate::RequestContext::grant`]. A
//! server that declares none ([`crate::ServerBuilder::collection_grants`]) refuses every
//! request of a collection-limited token, so a grant is never silently widened.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use super::{Scope, Scopes};

/// The longest collection name a grant may carry, in bytes.
pub const MAX_COLLECTION_NAME: usize = 256;

/// What one caller may do: its [`Scopes`], and for `read` and `write` the collections each
/// reaches (every one unless the grant names some).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Grant {
    scopes: Scopes,
    read: Limit,
    write: Limit,
}

/// The collections one scope reaches: `None` every one.
type Limit = Option<Arc<BTreeSet<String>>>;

impl Grant {
    /// Every scope on every collection: what a caller no transport authenticated holds.
    pub fn all() -> Self {
        Self::from(Scopes::ALL)
    }

    /// The scopes the grant holds, whatever collections they reach: what gates methods.
    pub fn scopes(&self) -> Scopes {
        self.scopes
    }

    /// The collections `scope` reaches when the grant names some; `None` when it reaches every
    /// collection (or is not held at all: see [`Grant::reaches`]).
    pub fn collections(&self, scope: Scope) -> Option<&BTreeSet<String>> {
        match scope {
            Scope::Read => self.read.as_deref(),
            Scope::Write => self.write.as_deref(),
            Scope::Admin => None,
        }
    }

    /// Whether the grant holds `scope` on `collection`.
    pub fn reaches(&self, scope: Scope, collection: &str) -> bool {
        self.scopes.contains(scope) && self.collections(scope).is_none_or(|c| c.contains(collection))
    }

    /// Whether some scope reaches only named collections.
    pub fn is_collection_limited(&self) -> bool {
        self.read.is_some() || self.write.is_some()
    }

    /// Whether this grant allows everything `other` does: each scope of `other` held here, on
    /// every collection `other` reaches with it.
    pub fn covers(&self, other: &Grant) -> bool {
        self.scopes.covers(other.scopes)
            && [Scope::Read, Scope::Write].into_iter().filter(|s| other.scopes.contains(*s)).all(|s| {
                match (self.collections(s), other.collections(s)) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(mine), Some(theirs)) => theirs.is_subset(mine),
                }
            })
    }

    /// A grant as a tokens file writes it: comma-separated `SCOPE` or `SCOPE@COLLECTION`
    /// items, no spaces (`read@fruit,write@fruit`). A plain scope and a limited one of the same
    /// scope on one line, `admin@...`, or an empty or over-long collection name are refused;
    /// the reason never repeats the text (a line with its fields swapped holds a secret here).
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut scopes = Scopes::NONE;
        let mut plain = Scopes::NONE;
        let mut read = BTreeSet::new();
        let mut write = BTreeSet::new();
        for item in list.split(',') {
            let (name, collection) = match item.split_once('@') {
                Some((name, collection)) => (name, Some(collection)),
                None => (item, None),
            };
            // Never repeats the item: a line with its fields swapped would put a secret here.
            let scope = Scope::parse(name.trim()).ok_or_else(|| {
                "an unknown scope (allowed: read, write, admin, read@COLLECTION, write@COLLECTION)".to_owned()
            })?;
            scopes = scopes.with(scope);
            let Some(collection) = collection else {
                plain = plain.with(scope);
                continue;
            };
            if collection.is_empty() || collection.len() > MAX_COLLECTION_NAME || collection.contains('@') {
                return Err(format!("'{scope}@' must name one collection (1 to {MAX_COLLECTION_NAME} bytes, no '@')"));
            }
            match scope {
                Scope::Read => read.insert(collection.to_owned()),
                Scope::Write => write.insert(collection.to_owned()),
                Scope::Admin => return Err("'admin' has no collections: write it alone".to_owned()),
            };
        }
        let limit = |scope: Scope, set: BTreeSet<String>| -> Result<Limit, String> {
            if set.is_empty() {
                return Ok(None);
            }
            if plain.contains(scope) {
                return Err(format!(
                    "'{scope}' already reaches every collection; '{scope}@...' beside it is ambiguous"
                ));
            }
            Ok(Some(Arc::new(set)))
        };
        let read = limit(Scope::Read, read)?;
        let write = limit(Scope::Write, write)?;
        Ok(Self { scopes, read, write })
    }
}

impl From<Scopes> for Grant {
    /// `scopes` on every collection.
    fn from(scopes: Scopes) -> Self {
        Self { scopes, read: None, write: None }
    }
}

impl fmt::Display for Grant {
    /// As a tokens file writes it (`read@fruit,write`); `none` for no scope.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<String> = Vec::new();
        for scope in Scope::ALL.into_iter().filter(|s| self.scopes.contains(*s)) {
            match self.collections(scope) {
                None => items.push(scope.as_str().to_owned()),
                Some(names) => items.extend(names.iter().map(|n| format!("{scope}@{n}"))),
            }
        }
        if items.is_empty() { f.write_str("none") } else { f.write_str(&items.join(",")) }
    }
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Grant({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(list: &str) -> Grant {
        Grant::parse(list).unwrap_or_else(|e| panic!("{list}: {e}"))
    }

    #[test]
    fn items_grant_scopes_on_their_collections() {
        let g = grant("read@fruit,read@veg,write@fruit");
        assert_eq!(g.scopes(), Scopes::NONE.with(Scope::Read).with(Scope::Write));
        assert!(g.reaches(Scope::Read, "fruit") && g.reaches(Scope::Read, "veg") && !g.reaches(Scope::Read, "meat"));
        assert!(g.reaches(Scope::Write, "fruit") && !g.reaches(Scope::Write, "veg"));
        assert!(!g.reaches(Scope::Admin, "fruit"));
        assert!(g.is_collection_limited());
        assert_eq!(g.to_string(), "read@fruit,read@veg,write@fruit");

        let mixed = grant("read,write@fruit");
        assert!(mixed.reaches(Scope::Read, "anything") && !mixed.reaches(Scope::Write, "veg"));
        assert_eq!(mixed.collections(Scope::Read), None);

        let plain = grant("read,write,admin");
        assert_eq!(plain, Grant::all());
        assert!(!plain.is_collection_limited());
        assert_eq!(plain.to_string(), "read,write,admin");
    }

    #[test]
    fn ambiguous_or_malformed_items_are_refused() {
        for bad in ["read,read@fruit", "admin@ops", "read@", "read@a@b", "root@fruit", "", "read,"] {
            assert!(Grant::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Grant::parse(&format!("read@{}", "x".repeat(MAX_COLLECTION_NAME + 1))).is_err());
        for secret in ["SECRET-1", "read,SECRET-2", "SECRET-3@fruit", "admin@SECRET-4"] {
            let why = Grant::parse(secret).expect_err(secret);
            assert!(!why.contains("SECRET"), "the reason repeats the text: {why}");
        }
    }

    #[test]
    fn a_grant_covers_what_reaches_no_further() {
        let all = Grant::all();
        let fruit = grant("read@fruit");
        let fruit_veg = grant("read@fruit,read@veg");
        assert!(all.covers(&fruit) && fruit_veg.covers(&fruit) && fruit.covers(&fruit));
        assert!(!fruit.covers(&fruit_veg) && !fruit.covers(&all) && !fruit.covers(&grant("read")));
        assert!(!grant("read@veg").covers(&fruit));
        assert!(!fruit.covers(&grant("write@fruit")));
        assert!(grant("read,write@fruit").covers(&grant("read@veg,write@fruit")));
    }
}
