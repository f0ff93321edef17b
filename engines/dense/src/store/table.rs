//! The in-memory table: documents and vectors by slot, the id map, the tombstones and the ANN
//! graph over the slots.

use std::collections::BTreeMap;

use rcp_wire::filter::FieldType;

use crate::ann::{self, AnnIndex, Backend, HnswParams};
use crate::wal::{Op, StoredDoc};

use super::error::StoreError;
use super::ids::Ids;
use super::postings::MetaIndex;
use super::vectors::Vectors;

/// The in-memory table: documents and vectors by slot, the id map and the graph.
#[derive(Debug)]
pub struct Table {
    pub(super) dim: usize,
    pub(super) docs: Vec<Option<StoredDoc>>,
    pub(super) vectors: Vectors,
    pub(super) by_id: Ids,
    pub(super) ann: Box<dyn AnnIndex>,
    pub(super) tombstones: usize,
    /// Postings of the declared filter fields over the live slots.
    pub(super) meta: MetaIndex,
}

impl Table {
    /// An empty table of `dim`-dimensional vectors with an empty graph, indexing the metadata
    /// of the declared `fields`.
    pub(super) fn new(dim: usize, params: HnswParams, backend: Backend, fields: &BTreeMap<String, FieldType>) -> Self {
        Self {
            dim,
            docs: Vec::new(),
            vectors: Vectors::new(dim),
            by_id: Ids::default(),
            ann: ann::new_index(backend, params, dim, 0),
            tombstones: 0,
            meta: MetaIndex::new(fields),
        }
    }

    /// The metadata index (postings of the declared filter fields).
    pub fn meta_index(&self) -> &MetaIndex {
        &self.meta
    }

    /// Indexes the metadata of the declared `fields` afresh (after new declarations).
    pub(super) fn reindex(&mut self, fields: &BTreeMap<String, FieldType>) {
        let mut meta = MetaIndex::new(fields);
        for (slot, doc) in self.docs.iter().enumerate() {
            if let Some(doc) = doc {
                meta.insert(slot, &doc.meta);
            }
        }
        self.meta = meta;
    }

    /// Live documents.
    pub fn live(&self) -> usize {
        self.by_id.len()
    }

    /// Deleted or replaced slots still in the graph.
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// The document with this id.
    pub fn get(&self, id: &str) -> Option<&StoredDoc> {
        self.by_id.get(id, &self.docs).and_then(|s| self.docs[s].as_ref())
    }

    /// The slot of the live document with this id.
    pub fn slot(&self, id: &str) -> Option<usize> {
        self.by_id.get(id, &self.docs).filter(|&s| self.docs.get(s).is_some_and(Option::is_some))
    }

    /// The live documents, in slot order.
    pub fn documents(&self) -> impl Iterator<Item = &StoredDoc> {
        self.docs.iter().flatten()
    }

    /// The document in a slot (`None` for a tombstone).
    pub fn doc(&self, slot: usize) -> Option<&StoredDoc> {
        self.docs.get(slot).and_then(Option::as_ref)
    }

    /// The vector in a slot.
    pub fn vector(&self, slot: usize) -> &[f32] {
        self.vectors.row(slot)
    }

    /// Every slot's vector (tombstones included).
    pub fn vectors(&self) -> &Vectors {
        &self.vectors
    }

    /// The HNSW parameters.
    pub fn params(&self) -> HnswParams {
        self.ann.params()
    }

    /// The ANN backend.
    pub fn backend(&self) -> Backend {
        self.ann.backend()
    }

    /// The ANN index.
    pub fn ann(&self) -> &dyn AnnIndex {
        self.ann.as_ref()
    }

    /// Applies an operation to the documents only (the graph is built or extended separately).
    pub(super) fn apply(&mut self, op: Op) -> usize {
        match op {
            Op::Upsert(doc, vector) => {
                self.vectors.push(&vector);
                self.place(doc, true);
                1
            }
            Op::Delete(ids) => {
                let mut removed = 0;
                for id in ids {
                    if let Some(slot) = self.by_id.remove(&id, &self.docs) {
                        self.retire(slot);
                        removed += 1;
                    }
                }
                removed
            }
        }
    }

    /// Puts `doc` in the next slot, whose vector the table already holds (pushed by
    /// [`Table::apply`], or mapped from a snapshot), retiring a previous version; with
    /// `index`, records its metadata in the postings (a snapshot's saved postings hold it).
    pub(super) fn place(&mut self, doc: StoredDoc, index: bool) {
        let slot = self.docs.len();
        if let Some(old) = self.by_id.insert(&doc.id, slot, &self.docs) {
            self.retire(old);
        }
        if index {
            self.meta.insert(slot, &doc.meta);
        }
        self.docs.push(Some(doc));
    }

    /// Turns a live slot into a tombstone.
    fn retire(&mut self, slot: usize) {
        if let Some(old) = self.docs.get_mut(slot).and_then(Option::take) {
            self.meta.remove(slot, &old.meta);
            self.tombstones += 1;
        }
    }

    /// A new table holding only the live documents (renumbered), with a fresh graph unless
    /// `defer_graph`.
    pub(super) fn compacted(
        &self,
        params: HnswParams,
        backend: Backend,
        defer_graph: bool,
    ) -> Result<Self, StoreError> {
        let mut t = Table::new(self.dim, params, backend, self.meta.declared());
        for (slot, doc) in self.docs.iter().enumerate() {
            if let Some(doc) = doc {
                t.vectors.push(self.vector(slot));
                t.place(doc.clone(), true);
            }
        }
        if !defer_graph {
            t.rebuild_graph(params, backend)?;
        }
        Ok(t)
    }

    pub(super) fn rebuild_graph(&mut self, params: HnswParams, backend: Backend) -> Result<(), StoreError> {
        let index = ann::new_index(backend, params, self.dim, self.docs.len());
        index.insert_many(&self.live_rows(0))?;
        self.ann = index;
        Ok(())
    }

    /// Inserts the live slots from `first` on into the graph (the log tail replayed on open).
    pub(super) fn index_tail(&self, first: usize) -> Result<(), StoreError> {
        self.ann.insert_many(&self.live_rows(first))?;
        Ok(())
    }

    /// The live slots from `first` on with their vectors.
    fn live_rows(&self, first: usize) -> Vec<(&[f32], usize)> {
        (first..self.docs.len()).filter(|&s| self.docs[s].is_some()).map(|s| (self.vector(s), s)).collect()
    }
}
