//! The id index: which slot holds the live document with a given id. An entry is just the
//! slot; its key is read from the document in that slot, so each id is stored once (in its
//! document) and placing a document costs one hash and no copy of its id. Ids are hashed
//! with the standard library's randomly keyed hasher, so a peer cannot choose ids that
//! collide.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use crate::wal::StoredDoc;

/// Slots of the live documents, keyed by their ids.
#[derive(Default)]
pub(super) struct Ids {
    slots: HashTable<usize>,
    hasher: RandomState,
}

impl std::fmt::Debug for Ids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ids").field("len", &self.slots.len()).finish()
    }
}

/// The id of the document in `slot` (empty for a tombstone, which the index never holds).
fn id_at(docs: &[Option<StoredDoc>], slot: usize) -> &str {
    docs.get(slot).and_then(Option::as_ref).map_or("", |d| d.id.as_str())
}

impl Ids {
    /// Live ids.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Room for `more` ids without rehashing.
    pub(super) fn reserve(&mut self, more: usize, docs: &[Option<StoredDoc>]) {
        let h = &self.hasher;
        self.slots.reserve(more, |&s| h.hash_one(id_at(docs, s)));
    }

    /// The slot of `id`.
    pub(super) fn get(&self, id: &str, docs: &[Option<StoredDoc>]) -> Option<usize> {
        self.slots.find(self.hasher.hash_one(id), |&s| id_at(docs, s) == id).copied()
    }

    /// Records that `id` now lives in `slot` (whose document the caller pushes next); returns
    /// the slot it lived in before, if any.
    pub(super) fn insert(&mut self, id: &str, slot: usize, docs: &[Option<StoredDoc>]) -> Option<usize> {
        let h = &self.hasher;
        match self.slots.entry(h.hash_one(id), |&s| id_at(docs, s) == id, |&s| h.hash_one(id_at(docs, s))) {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), slot)),
            Entry::Vacant(e) => {
                e.insert(slot);
                None
            }
        }
    }

    /// Forgets `id`; returns the slot it lived in.
    pub(super) fn remove(&mut self, id: &str, docs: &[Option<StoredDoc>]) -> Option<usize> {
        let found = self.slots.find_entry(self.hasher.hash_one(id), |&s| id_at(docs, s) == id).ok()?;
        Some(found.remove().0)
    }

    /// Every live id.
    #[cfg(test)]
    pub(super) fn ids<'a>(&'a self, docs: &'a [Option<StoredDoc>]) -> impl Iterator<Item = &'a str> + 'a {
        self.slots.iter().map(move |&s| id_at(docs, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::Origin;

    fn doc(id: &str) -> Option<StoredDoc> {
        Some(StoredDoc { id: id.to_owned(), text: String::new(), meta: Default::default(), origin: Origin::Corpus })
    }

    #[test]
    fn finds_replaces_and_forgets_ids_across_growth() {
        let (mut ids, mut docs) = (Ids::default(), Vec::new());
        // Enough ids to make the table grow several times (rehashing through the documents).
        for n in 0..5_000 {
            let id = format!("d{n}");
            assert_eq!(ids.insert(&id, docs.len(), &docs), None);
            docs.push(doc(&id));
        }
        assert_eq!(ids.len(), 5_000);
        assert_eq!(ids.get("d4321", &docs), Some(4321));
        assert_eq!(ids.get("d5000", &docs), None);
        // A new version of d7 in the next slot: the old slot is returned, the id moves.
        assert_eq!(ids.insert("d7", docs.len(), &docs), Some(7));
        docs[7] = None;
        docs.push(doc("d7"));
        assert_eq!((ids.get("d7", &docs), ids.len()), (Some(5_000), 5_000));
        assert_eq!(ids.remove("d7", &docs), Some(5_000));
        assert_eq!((ids.get("d7", &docs), ids.remove("d7", &docs), ids.len()), (None, None, 4_999));
        let mut all: Vec<&str> = ids.ids(&docs).collect();
        all.sort_unstable();
        assert_eq!(all.len(), 4_999);
        assert!(!all.contains(&"d7") && all.contains(&"d0"));
    }
}
