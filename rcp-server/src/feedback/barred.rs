//! The rule quarantined hits obey: left out of every result that started after the quarantine.

use std::collections::HashSet;

use rcp_wire::retrieve::Hit;

/// Drops the hits of `hits` that `barred` quarantines (by id or by chunk `docId`).
pub(crate) fn drop_barred(hits: &mut Vec<Hit>, barred: &HashSet<String>) {
    hits.retain(|h| {
        !barred.contains(&h.key())
            && !h.chunk.as_ref().and_then(|c| c.doc_id.as_ref()).is_some_and(|d| barred.contains(d))
    });
}
