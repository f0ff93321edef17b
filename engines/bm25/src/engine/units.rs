//! Retrieval units over chunked documents (§7.7.2): reading a record's chunk, finding a
//! chunk's parent, and ranking documents by their best chunk.
//!
//! `unit:"document"` over an index holding chunks ranks chunks and keeps each document's best
//! one (MaxP: a document scores as its best passage, Dai & Callan 2019), returning the
//! document whole; `unit:"chunk"` ranks the records directly.

use std::collections::HashSet;

use tantivy::collector::TopDocs;
use tantivy::columnar::Column;
use tantivy::query::{Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Term, Value as _};
use tantivy::{DocAddress, Searcher, TantivyDocument};

use super::rank::{Decay, Ranked};
use super::writes::PARENT;
use super::{Engine, MAX_OFFSET};
use crate::error::EngineError;
use rcp_corpus::chunking::Chunk;

/// How many chunks per wanted document the first ranking pass reads; each later pass reads
/// this many times more, until enough distinct documents are found or the ranking ends.
const WIDEN: usize = 4;

impl Engine {
    /// Whether the snapshot may hold chunked documents (a parent record was ever written; a
    /// deleted one counts until its segment is merged, which only costs the grouping pass).
    pub(super) fn has_chunks(&self, searcher: &Searcher) -> bool {
        let Some(c) = &self.fields.chunks else { return false };
        searcher.doc_freq(&Term::from_field_text(c.role, PARENT)).is_ok_and(|n| n > 0)
    }

    /// The document id and chunk of a chunk record; `None` for a document added whole.
    pub(super) fn chunk_of(&self, stored: &TantivyDocument) -> Option<(String, Chunk)> {
        let c = self.fields.chunks.as_ref()?;
        let num = |field| stored.get_first(field).and_then(|v| v.as_u64()).and_then(|n| usize::try_from(n).ok());
        let chunk = Chunk { index: num(c.index)?, start: num(c.start)?, end: num(c.end)? };
        let doc_id = stored.get_first(c.doc).and_then(|v| v.as_str())?.to_owned();
        Some((doc_id, chunk))
    }

    /// The parent record of chunked document `doc_id` in this snapshot.
    pub(super) fn parent(&self, searcher: &Searcher, doc_id: &str) -> Result<Option<TantivyDocument>, EngineError> {
        let q = TermQuery::new(Term::from_field_text(self.fields.id, doc_id), IndexRecordOption::Basic);
        let top = searcher.search(&q, &TopDocs::with_limit(1).order_by_score())?;
        match top.first() {
            Some((_, addr)) => Ok(Some(searcher.doc(*addr)?)),
            None => Ok(None),
        }
    }

    /// Documents ranked by their best record: at most `limit` from document rank `offset` on,
    /// each as its best record, and how many records matched.
    pub(super) fn rank_documents(
        &self,
        searcher: &Searcher,
        queries: &[Box<dyn Query>],
        offset: usize,
        limit: usize,
        decay: Option<&Decay>,
    ) -> Result<(Vec<Ranked>, u64), EngineError> {
        if self.fields.chunks.is_none() {
            return self.rank_all(searcher, queries, offset, limit, decay);
        }
        let keys: Vec<Option<Column<u64>>> =
            searcher.segment_readers().iter().map(|r| r.fast_fields().u64("doc_key").ok()).collect();
        let want = offset + limit;
        let mut depth = want.saturating_mul(WIDEN).max(64);
        loop {
            let (ranked, matched) = self.rank_all(searcher, queries, 0, depth, decay)?;
            let exhausted = ranked.len() < depth;
            // A record without a key (none should lack one) stands for itself.
            let mut seen: HashSet<(Option<u64>, Option<DocAddress>)> = HashSet::new();
            let mut best = Vec::new();
            for r in ranked {
                let addr = r.2;
                let key =
                    keys.get(addr.segment_ord as usize).and_then(Option::as_ref).and_then(|c| c.first(addr.doc_id));
                if seen.insert((key, key.is_none().then_some(addr))) {
                    best.push(r);
                    if best.len() == want {
                        break;
                    }
                }
            }
            if best.len() == want || exhausted || depth >= MAX_OFFSET * WIDEN {
                return Ok((best.into_iter().skip(offset).take(limit).collect(), matched));
            }
            depth = depth.saturating_mul(WIDEN);
        }
    }
}
