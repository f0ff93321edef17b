//! The write paths (§7.10, §7.11): preparing a corpus document, upserts and deletes on the
//! shared writer, and bulk loads. Every write commits durably and publishes a snapshot.

use std::collections::HashSet;

use rcp_corpus::CorpusDoc;
use rcp_corpus::policy::NotIndexed;
use rcp_corpus::validate::{TypedValue, field_values};
use serde_json::Value;
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Term};
use tantivy::{IndexWriter, TantivyDocument};

use super::group::{CancelFlag, WriteOp, WriteOutcome};
use super::{Engine, TrustLevel};
use crate::error::EngineError;
use crate::schema::{self, MetaField};
use rcp_corpus::chunking::{self, Chunk, ChunkPolicy};

/// The `role` of a chunked document's parent record.
pub(crate) const PARENT: &str = "parent";

/// What one record of the index is (§7.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A document added whole: searched, returned as itself.
    Whole,
    /// The parent of a chunked document: its whole text and metadata, stored, never searched.
    Parent,
    /// One chunk of a document, searched and returned as a chunk.
    Chunk(Chunk),
}

/// Outcome of loading a corpus file.
#[derive(Debug, Clone, Default)]
pub struct LoadStats {
    /// Documents written.
    pub indexed: u64,
    /// Lines skipped as unusable.
    pub skipped: u64,
    /// Documents in the index after the commit.
    pub total: u64,
    /// The snapshot token after the commit.
    pub index_version: String,
}

impl Engine {
    /// Converts a corpus document to a tantivy document, added whole. Errors name the
    /// offending metadata key (`meta.year`) and say what the field's type expects.
    pub fn prepare(
        &self,
        doc: &CorpusDoc,
        id: &str,
        trust: TrustLevel,
        source: &str,
    ) -> Result<TantivyDocument, EngineError> {
        self.prepare_record(doc, id, trust, source, Record::Whole)
    }

    /// Converts a corpus document to the records of a chunked document (§7.10): the parent
    /// (the whole text, not searched) and one record per chunk of `policy`, whose text is the
    /// byte-exact slice of the document's text. Needs an index of format 2.
    pub fn prepare_chunked(
        &self,
        doc: &CorpusDoc,
        id: &str,
        trust: TrustLevel,
        source: &str,
        policy: ChunkPolicy,
    ) -> Result<Vec<TantivyDocument>, EngineError> {
        if self.fields.chunks.is_none() {
            return Err(EngineError::invalid(
                "chunk",
                "this index was created before chunking (format 1); index into a new data directory to chunk",
            ));
        }
        let mut out = vec![self.prepare_record(doc, id, trust, source, Record::Parent)?];
        for c in chunking::chunk(&doc.text, policy) {
            let part = CorpusDoc { text: doc.text[c.start..c.end].to_owned(), ..doc.clone() };
            out.push(self.prepare_record(&part, id, trust, source, Record::Chunk(c))?);
        }
        Ok(out)
    }

    /// Converts one record of document `id`; `doc.text` is the record's own text (a chunk's
    /// slice for [`Record::Chunk`]).
    pub fn prepare_record(
        &self,
        doc: &CorpusDoc,
        id: &str,
        trust: TrustLevel,
        source: &str,
        record: Record,
    ) -> Result<TantivyDocument, EngineError> {
        let f = &self.fields;
        let mut d = TantivyDocument::new();
        let searched = record != Record::Parent;
        match record {
            Record::Chunk(c) => d.add_text(f.id, format!("{id}#{}", c.index)),
            Record::Whole | Record::Parent => d.add_text(f.id, id),
        }
        if let Some(title) = &doc.title {
            if searched {
                d.add_text(f.title, title);
            }
            d.add_text(f.title_raw, title);
        }
        if searched {
            d.add_text(f.text, &doc.text);
        }
        d.add_text(f.text_raw, &doc.text);
        if let Some(c) = &f.chunks {
            d.add_text(c.doc, id);
            d.add_u64(c.doc_key, schema::doc_key(id));
            match record {
                Record::Whole => {}
                Record::Parent => d.add_text(c.role, PARENT),
                Record::Chunk(ch) => {
                    d.add_u64(c.index, ch.index as u64);
                    d.add_u64(c.start, ch.start as u64);
                    d.add_u64(c.end, ch.end as u64);
                }
            }
        }
        if let Some(field) = f.impacts {
            let encoder = self.options.learned_sparse.as_deref().ok_or_else(|| {
                EngineError::Internal("the index stores learned-sparse impacts but no encoder is loaded".into())
            })?;
            d.add_pre_tokenized_text(field, crate::splade::impacts(encoder, doc.title.as_deref(), &doc.text)?);
        }
        d.add_text(f.meta, Value::Object(doc.meta.clone()).to_string());
        d.add_text(f.trust, trust.as_str());
        d.add_text(f.source, source);
        for (name, m) in &f.filterable {
            let Some(v) = doc.meta.get(name).filter(|v| !v.is_null()) else { continue };
            let values = field_values(&doc.meta, name, &m.spec.ty)
                .map_err(|e| EngineError::invalid(e.field.clone(), e.reason()))?;
            // Present even as an empty array (`exists`).
            d.add_text(f.present, name);
            if v.is_array() {
                d.add_text(f.arrays, name);
            }
            for v in values {
                add_value(&mut d, m, v);
            }
        }
        Ok(d)
    }

    /// Whether a document with this id is live in the current snapshot.
    pub fn contains_id(&self, id: &str) -> Result<bool, EngineError> {
        let q = TermQuery::new(self.key_term(id), IndexRecordOption::Basic);
        Ok(self.current().searcher.search(&q, &Count)? > 0)
    }

    /// The term every record of document `id` carries: the upsert and delete key (`doc` in an
    /// index of format 2, `id` before).
    pub(crate) fn key_term(&self, id: &str) -> Term {
        match &self.fields.chunks {
            Some(c) => Term::from_field_text(c.doc, id),
            None => Term::from_field_text(self.fields.id, id),
        }
    }

    /// A fresh id that no live document and none of `taken` uses.
    pub fn mint_id(&self, taken: &HashSet<String>) -> Result<String, EngineError> {
        loop {
            let id = format!("doc-{}", uuid::Uuid::new_v4().simple());
            if !taken.contains(&id) && !self.contains_id(&id)? {
                return Ok(id);
            }
        }
    }

    /// Upserts prepared documents and commits: each id's previous version is deleted, then the
    /// new one added, so re-adding an id replaces it. Durable when this returns (tantivy
    /// commit: segments and `meta.json` are fsynced). A batch cancelled before it is applied
    /// writes nothing. One request under its own commit; the server groups concurrent ones
    /// ([`super::GroupCommit`]).
    pub fn write(
        &self,
        writer: &mut IndexWriter,
        docs: Vec<(String, TantivyDocument)>,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<String, EngineError> {
        if cancelled() {
            return Err(EngineError::Cancelled);
        }
        match self.commit_group(writer, vec![(WriteOp::Add(docs), Box::new(|| false) as CancelFlag)]).pop() {
            Some(Ok(WriteOutcome::Added { index_version })) => Ok(index_version),
            Some(Err(e)) => Err(e),
            other => Err(EngineError::Internal(format!("unexpected write outcome {other:?}"))),
        }
    }

    /// Deletes documents by id and commits; returns how many live documents were removed.
    /// Absent ids are not an error; when none is present nothing is committed.
    pub fn delete(&self, writer: &mut IndexWriter, ids: &[String]) -> Result<u64, EngineError> {
        match self.commit_group(writer, vec![(WriteOp::Delete(ids.to_vec()), Box::new(|| false) as CancelFlag)]).pop() {
            Some(Ok(WriteOutcome::Deleted { count })) => Ok(count),
            Some(Err(e)) => Err(e),
            other => Err(EngineError::Internal(format!("unexpected delete outcome {other:?}"))),
        }
    }

    /// Loads documents in bulk (the `index` command): upserts each, mints ids for id-less
    /// documents, commits once at the end. `on_doc` is called after each input item.
    pub fn load<E: std::fmt::Display>(
        &self,
        docs: impl Iterator<Item = Result<CorpusDoc, E>>,
        trust: TrustLevel,
        source: &str,
        strict: bool,
        mut on_item: impl FnMut(Option<String>),
    ) -> Result<LoadStats, EngineError> {
        let writer_lock = self.writer();
        let mut writer = writer_lock.blocking_lock();
        let had_docs = self.num_docs() > 0;
        let mut seen: HashSet<String> = HashSet::new();
        let mut stats = LoadStats::default();
        let result = (|| {
            for item in docs {
                let doc = match item {
                    Ok(d) => d,
                    Err(e) if strict => return Err(NotIndexed::Strict(e.to_string()).into()),
                    Err(e) => {
                        stats.skipped += 1;
                        on_item(Some(e.to_string()));
                        continue;
                    }
                };
                let id = match &doc.id {
                    Some(id) => id.clone(),
                    None => self.mint_id(&seen)?,
                };
                let prepared = match self.prepare(&doc, &id, trust, source) {
                    Ok(p) => p,
                    Err(e) if strict => return Err(NotIndexed::Strict(format!("document '{id}': {e}")).into()),
                    Err(e) => {
                        stats.skipped += 1;
                        on_item(Some(format!("document '{id}': {e}")));
                        continue;
                    }
                };
                if had_docs || seen.contains(&id) {
                    writer.delete_term(self.key_term(&id));
                }
                writer.add_document(prepared)?;
                seen.insert(id);
                stats.indexed += 1;
                on_item(None);
            }
            Ok(())
        })();
        if let Err(e) = result {
            writer.rollback()?;
            return Err(e);
        }
        let opstamp = writer.commit()?;
        self.publish(opstamp)?;
        stats.total = self.num_docs();
        stats.index_version = self.token(opstamp);
        Ok(stats)
    }
}

/// Adds one metadata value, already checked against its declared type
/// ([`rcp_corpus::validate`]), to its field.
fn add_value(d: &mut TantivyDocument, m: &MetaField, v: TypedValue<'_>) {
    match v {
        TypedValue::Int(n) | TypedValue::Date(n) => d.add_i64(m.field, n),
        TypedValue::Float(x) => d.add_f64(m.field, x),
        TypedValue::Bool(b) => d.add_bool(m.field, b),
        TypedValue::Str(s) => {
            d.add_text(m.field, s);
            if let Some(tokens) = m.tokens {
                d.add_text(tokens, s);
            }
        }
        // Only keyword, text, int, float, bool and date fields are declared (schema.rs).
        _ => {}
    }
}
