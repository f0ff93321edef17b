//! Where a hit came from, so that a call about it reaches the engine that produced it
//! (`feedback`, `graph` seeds, `index/delete`), and only that engine.
//!
//! Two mechanisms, one per kind of registry ([`Corpora`]):
//! - [`Namespaces`]: when the engines hold different corpora, every id a federation returns is
//!   `<engine>:<id>`, and an id in that form is routed to that engine with the prefix removed.
//! - [`OriginLedger`]: which engines returned each id, recorded by the federation itself from
//!   the answers it relayed. A client names a hit by its id only (`feedback.signals[].hitId`),
//!   so the ledger, not anything the client sends, decides where a signal goes: a client
//!   cannot forge a hit of one engine into another's. The ledger is bounded (least recently
//!   served ids are forgotten first); a signal about an id it does not know is not routed.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use crate::registry::Corpora;

/// The separator of a namespaced id, `<engine>:<id>`.
pub const NAMESPACE_SEPARATOR: char = ':';

/// How a federation names ids: shared across engines, or namespaced per engine.
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    /// The engines' names (registry ids, or gateway collections), when ids are namespaced.
    names: Option<Vec<String>>,
}

impl Namespaces {
    /// Namespaces for engines named `names`, as the registry's `corpora` says.
    pub fn new(corpora: Corpora, names: impl IntoIterator<Item = String>) -> Self {
        match corpora {
            Corpora::Shared => Self { names: None },
            Corpora::Distinct => Self { names: Some(names.into_iter().collect()) },
        }
    }

    /// Whether ids are namespaced.
    pub fn enabled(&self) -> bool {
        self.names.is_some()
    }

    /// The id a client sees for `id` of engine `owner`: `<name>:<id>` when namespaced.
    pub fn qualify(&self, owner: usize, id: &str) -> String {
        match self.names.as_ref().and_then(|n| n.get(owner)) {
            Some(name) => format!("{name}{NAMESPACE_SEPARATOR}{id}"),
            None => id.to_owned(),
        }
    }

    /// The engine a namespaced id belongs to and the engine's own id; `None` when ids are not
    /// namespaced or the prefix names no engine.
    pub fn split<'a>(&self, id: &'a str) -> Option<(usize, &'a str)> {
        let names = self.names.as_ref()?;
        let (prefix, rest) = id.split_once(NAMESPACE_SEPARATOR)?;
        names.iter().position(|n| n == prefix).map(|owner| (owner, rest))
    }

    /// The engine's own id for a client's id addressed to `owner`: the namespace removed when
    /// it is `owner`'s; `Err` when the id is namespaced for another engine or not namespaced
    /// at all although ids are.
    pub fn local<'a>(&self, owner: usize, id: &'a str) -> Result<&'a str, String> {
        let Some(names) = self.names.as_ref() else { return Ok(id) };
        match self.split(id) {
            Some((o, rest)) if o == owner => Ok(rest),
            Some((o, _)) => Err(format!("id '{id}' belongs to '{}', not '{}'", names[o], names[owner])),
            None => Err(format!(
                "id '{id}' is not namespaced; this federation's ids are '<engine>:<id>' with an engine among: {}",
                names.join(", ")
            )),
        }
    }
}

/// How many ids an [`OriginLedger`] remembers by default.
pub const DEFAULT_LEDGER_IDS: usize = 100_000;

/// Which engines returned each id, most recently served first to be kept.
#[derive(Debug)]
pub struct OriginLedger {
    ids: Mutex<LruCache<String, Vec<usize>>>,
}

impl Default for OriginLedger {
    fn default() -> Self {
        Self::new(DEFAULT_LEDGER_IDS)
    }
}

impl OriginLedger {
    /// A ledger remembering at most `capacity` ids (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self { ids: Mutex::new(LruCache::new(capacity)) }
    }

    /// Records that engine `engine` returned `id` (the id as the client sees it).
    pub fn record(&self, id: &str, engine: usize) {
        let mut ids = self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match ids.get_mut(id) {
            Some(engines) if engines.contains(&engine) => {}
            Some(engines) => engines.push(engine),
            None => {
                ids.put(id.to_owned(), vec![engine]);
            }
        }
    }

    /// The engines that returned `id`, in the order first seen; empty when unknown.
    pub fn origins(&self, id: &str) -> Vec<usize> {
        let mut ids = self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.get(id).cloned().unwrap_or_default()
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_ids_round_trip_and_refuse_other_engines() {
        let ns = Namespaces::new(Corpora::Distinct, ["one".to_owned(), "two".to_owned()]);
        assert_eq!(ns.qualify(1, "rust-3"), "two:rust-3");
        assert_eq!(ns.split("two:rust-3"), Some((1, "rust-3")));
        assert_eq!(ns.split("one:a:b"), Some((0, "a:b")), "the engine's own id may hold ':'");
        assert_eq!(ns.split("three:x"), None);
        assert_eq!(ns.local(1, "two:rust-3"), Ok("rust-3"));
        assert!(ns.local(0, "two:rust-3").unwrap_err().contains("belongs to 'two'"));
        assert!(ns.local(0, "rust-3").unwrap_err().contains("not namespaced"));
        let shared = Namespaces::new(Corpora::Shared, ["one".to_owned()]);
        assert_eq!(
            (shared.qualify(0, "x"), shared.split("one:x"), shared.local(0, "one:x")),
            ("x".into(), None, Ok("one:x"))
        );
    }

    #[test]
    fn the_ledger_remembers_every_origin_within_its_bound() {
        let ledger = OriginLedger::new(2);
        ledger.record("a", 0);
        ledger.record("a", 2);
        ledger.record("a", 0);
        assert_eq!(ledger.origins("a"), [0, 2]);
        ledger.record("b", 1);
        ledger.record("c", 1);
        assert_eq!(ledger.len(), 2);
        assert!(ledger.origins("a").is_empty(), "the least recently served id is forgotten");
        assert_eq!(ledger.origins("c"), [1]);
        assert!(ledger.origins("nope").is_empty());
    }
}
