//! The quarantine filter: the rule quarantined hits obey, left out of every `retrieve` result
//! that started after the quarantine ([`drop_quarantined`]), and the handle through which a
//! `retrieve` route reads the quarantine set of the store once one is registered
//! ([`Quarantine`]).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use rcp_wire::retrieve::Hit;

use super::FeedbackStore;

/// Drops the hits of `hits` in `quarantine_set` (by id or by chunk `docId`).
pub(crate) fn drop_quarantined(hits: &mut Vec<Hit>, quarantine_set: &HashSet<String>) {
    hits.retain(|h| {
        !quarantine_set.contains(&h.key())
            && !h.chunk.as_ref().and_then(|c| c.doc_id.as_ref()).is_some_and(|d| quarantine_set.contains(d))
    });
}

/// The retrieve-result rule: the store whose quarantine later retrieves honour, once one is
/// registered.
#[derive(Debug, Default)]
pub(crate) struct Quarantine(OnceLock<Arc<FeedbackStore>>);

impl Quarantine {
    /// Makes `store`'s quarantine the one retrieves honour.
    pub(crate) fn set(&self, store: Arc<FeedbackStore>) {
        let _ = self.0.set(store);
    }

    /// The set a retrieve starting now leaves out, if any.
    pub(crate) fn snapshot(&self) -> Option<Arc<HashSet<String>>> {
        self.0.get().map(|s| s.quarantine_set()).filter(|b| !b.is_empty())
    }
}
