//! Search (§7.7): the ranking query built from analyzed terms, filters and recency decay,
//! one page collected from a snapshot, and hits materialised with cancellation checks and
//! partial-hit progress.

use rcp_wire::filter::{FieldType, Filter};
use rcp_wire::retrieve::{ChunkRef, Citation, Trust};
use rcp_wire::{Hit, Meta, Mode};
use serde_json::Value;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Term, Value as _};
use tantivy::{DocAddress, Searcher, TantivyDocument};

use super::cursor::Cursor;
use super::rank::Decay;
use super::rm3::{self, Rewrite};
use super::{Engine, MAX_OFFSET, TrustLevel};
use crate::analyzer;
use crate::error::EngineError;
use crate::filter;
use crate::schema::MetaField;
use rcp_corpus::chunking::Chunk;

/// How many hits are materialised between cancellation checks and partial-hit frames.
const CHUNK: usize = 32;

/// `recency` (§7.7): exponential decay on a date field.
#[derive(Debug, Clone, PartialEq)]
pub struct RecencySpec {
    /// The date field.
    pub field: String,
    /// Half-life in days.
    pub half_life_days: f64,
}

pub use rcp_corpus::chunking::Unit;

/// One search, in engine terms.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The user's query text (analyzed, never parsed as syntax).
    pub query: String,
    /// Page size.
    pub k: usize,
    /// Recall-stage depth (`candidateK`), reported in `usage.candidates`.
    pub candidate_k: usize,
    /// Validated metadata filter.
    pub filter: Option<Filter>,
    /// Drop hits scoring below this.
    pub min_score: Option<f64>,
    /// Recency decay: the score is multiplied by `0.5^(age / half-life)`, age measured from
    /// the snapshot's publication; a document without the date field scores 0.
    pub recency: Option<RecencySpec>,
    /// Whether hits carry their text.
    pub include_text: bool,
    /// A pinned snapshot token (`indexVersion`).
    pub index_version: Option<String>,
    /// A pagination cursor from a previous page.
    pub cursor: Option<String>,
    /// A query rewrite to apply before ranking (`retrieve.rewrite`).
    pub rewrite: Option<Rewrite>,
    /// What a hit is: a document or a chunk (`retrieve.unit`).
    pub unit: Unit,
}

impl SearchRequest {
    /// A plain query for the top `k`.
    pub fn new(query: impl Into<String>, k: usize) -> Self {
        Self {
            query: query.into(),
            k,
            candidate_k: k.max(100),
            filter: None,
            min_score: None,
            recency: None,
            include_text: true,
            index_version: None,
            cursor: None,
            rewrite: None,
            unit: Unit::Document,
        }
    }

    /// A stable fingerprint of what defines the ranking, carried in cursors so a cursor cannot
    /// be replayed against a different query.
    pub(super) fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for b in bytes.iter().chain([0xffu8].iter()) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        feed(self.query.as_bytes());
        feed(self.filter.as_ref().map(|f| f.to_value().to_string()).unwrap_or_default().as_bytes());
        feed(self.min_score.map(|m| m.to_string()).unwrap_or_default().as_bytes());
        feed(self.recency.as_ref().map(|r| format!("{}:{}", r.field, r.half_life_days)).unwrap_or_default().as_bytes());
        feed(self.rewrite.as_ref().map(|r| format!("{r:?}")).unwrap_or_default().as_bytes());
        feed(self.unit.as_str().as_bytes());
        h
    }
}

/// Callbacks a search makes while it runs.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Polled between phases; `true` stops the search with [`EngineError::Cancelled`].
    pub cancelled: Option<&'a (dyn Fn() -> bool + Sync)>,
    /// Receives progress in `[0,1]`, a message, and hits as they are materialised.
    pub progress: Option<&'a (dyn Fn(f64, String, Vec<Hit>) + Sync)>,
}

impl std::fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("cancelled", &self.cancelled.is_some())
            .field("progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

impl Hooks<'_> {
    fn check(&self) -> Result<(), EngineError> {
        match self.cancelled {
            Some(c) if c() => Err(EngineError::Cancelled),
            _ => Ok(()),
        }
    }
}

/// One page of results.
#[derive(Debug, Clone)]
pub struct SearchPage {
    /// Ranked hits, best first.
    pub hits: Vec<Hit>,
    /// The snapshot served (`indexVersion`).
    pub index_version: String,
    /// Cursor for the next page, when there is one.
    pub next_cursor: Option<String>,
    /// Documents that matched the query and filter.
    pub matched: u64,
    /// Effective recall-stage depth.
    pub candidates: u64,
    /// Analyzed query terms.
    pub terms: usize,
    /// What was done differently from what was asked.
    pub notes: Vec<String>,
    /// The rewritten query (`rewrittenQuery`), when the request asked for a rewrite.
    pub rewritten: Option<String>,
}

impl Engine {
    /// The ranking query for analyzed terms: each distinct term weighted by its count in the
    /// query ([`Engine::weighted_query`]).
    pub(super) fn text_query(&self, terms: &[String]) -> Box<dyn Query> {
        let weights: Vec<(String, f32)> =
            rm3::query_model(terms).into_iter().map(|(t, p)| (t, (p * terms.len() as f64).round() as f32)).collect();
        self.weighted_query(&weights)
    }

    /// The ranking query for weighted index terms: one BM25 term query per term on the body
    /// (and on the title when `title_boost > 0`), boosted by its weight, OR-ed together.
    pub(super) fn weighted_query(&self, terms: &[(String, f32)]) -> Box<dyn Query> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let weighted = |q: TermQuery, w: f32| -> Box<dyn Query> {
            if w == 1.0 { Box::new(q) } else { Box::new(BoostQuery::new(Box::new(q), w)) }
        };
        for (t, w) in terms {
            let body = TermQuery::new(Term::from_field_text(self.fields.text, t), IndexRecordOption::WithFreqs);
            clauses.push((Occur::Should, weighted(body, *w)));
            if self.options.title_boost > 0.0 {
                let title = TermQuery::new(Term::from_field_text(self.fields.title, t), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, weighted(title, *w * self.options.title_boost)));
            }
        }
        Box::new(BooleanQuery::new(clauses))
    }

    /// The query's index terms, refused past `max_query_terms` (§15.5).
    pub(super) fn analyze_query(&self, query: &str) -> Result<Vec<String>, EngineError> {
        let mut analyzer = self.analyzer.clone();
        let terms = analyzer::terms(&mut analyzer, query);
        if terms.len() > self.options.max_query_terms {
            return Err(EngineError::invalid(
                "query",
                format!(
                    "query has {} terms after analysis; at most {} are allowed",
                    terms.len(),
                    self.options.max_query_terms
                ),
            ));
        }
        Ok(terms)
    }

    /// Runs one search: resolves the snapshot (pinned, from the cursor, or current), analyzes
    /// the query, collects one page plus one look-ahead hit, and materialises the hits.
    pub fn search(&self, req: &SearchRequest, hooks: &Hooks<'_>) -> Result<SearchPage, EngineError> {
        let fp = req.fingerprint();
        let mut notes = Vec::new();
        // Snapshot, offset and the recency clock: from the cursor, else fresh.
        let (snap, offset, now_ms) = match &req.cursor {
            Some(c) => {
                let cur = Cursor::decode(c)?;
                if cur.offset > MAX_OFFSET {
                    return Err(EngineError::invalid(
                        "cursor",
                        format!("pages may start at rank {MAX_OFFSET} at most; narrow the query or filter"),
                    ));
                }
                if cur.fingerprint != fp {
                    return Err(EngineError::invalid(
                        "cursor",
                        "this cursor belongs to a different query (query, filter, minScore and recency must not change between pages)",
                    ));
                }
                if let Some(v) = &req.index_version
                    && *v != cur.version
                {
                    return Err(EngineError::invalid(
                        "cursor",
                        format!("cursor is for indexVersion '{}', but '{v}' was pinned", cur.version),
                    ));
                }
                let snap = self.pinned(&cur.version).map_err(|_| {
                    EngineError::CursorExpired(format!(
                        "cursor expired: snapshot '{}' is no longer held; restart pagination",
                        cur.version
                    ))
                })?;
                (snap, cur.offset, cur.now_ms)
            }
            None => {
                let snap = match &req.index_version {
                    Some(v) => self.pinned(v)?,
                    None => self.current(),
                };
                let now = snap.published_ms;
                (snap, 0, now)
            }
        };
        let version = self.token(snap.opstamp);
        let searcher = &snap.searcher;

        let terms = self.analyze_query(&req.query)?;
        let empty = |notes: Vec<String>| SearchPage {
            hits: Vec::new(),
            index_version: version.clone(),
            next_cursor: None,
            matched: 0,
            candidates: 0,
            terms: terms.len(),
            notes,
            rewritten: None,
        };
        // The learned-sparse scorer weighs the raw query text, stopwords included.
        if terms.is_empty() && self.fields.impacts.is_none() {
            notes.push("query has no searchable terms after analysis (only stopwords or punctuation)".into());
            return Ok(empty(notes));
        }
        let compiled = match &req.filter {
            None => None,
            Some(f) => Some(filter::compile(f, &self.fields, searcher, &self.analyzer)?),
        };
        let plan = self.plan(searcher, &req.query, &terms, req.rewrite.as_ref(), compiled.as_deref())?;
        notes.extend(plan.notes);
        hooks.check()?;

        let k = req.k.max(1);
        let recency = match &req.recency {
            None => None,
            Some(r) => Some(Decay {
                column: self.date_field(&r.field)?.column.clone(),
                decay: rcp_corpus::recency::Decay::new(now_ms, r.half_life_days),
            }),
        };
        let (ranked, matched) = if req.unit == Unit::Document && self.has_chunks(searcher) {
            self.rank_documents(searcher, &plan.queries, offset, k + 1, recency.as_ref())?
        } else {
            self.rank_all(searcher, &plan.queries, offset, k + 1, recency.as_ref())?
        };
        if let Some(p) = hooks.progress {
            p(0.5, format!("recall matched {matched} documents"), Vec::new());
        }

        // Page, cut at minScore (the list is sorted, so the first miss ends it).
        let passes = |s: f32| req.min_score.is_none_or(|m| f64::from(s) >= m);
        let more = ranked.len() > k && passes(ranked[k].0);
        let page: Vec<(f32, f32, DocAddress)> = ranked.into_iter().take(k).take_while(|(s, _, _)| passes(*s)).collect();
        let mut hits = Vec::with_capacity(page.len());
        let total = page.len().max(1);
        for chunk in page.chunks(CHUNK) {
            hooks.check()?;
            // Fetched in address order, so hits that share a compressed doc-store block are read
            // one after another and the block is decompressed once (the reader caches only a
            // few blocks: `DOC_STORE_CACHE_BLOCKS`); then put back in rank order.
            let mut by_address: Vec<usize> = (0..chunk.len()).collect();
            by_address.sort_unstable_by_key(|&i| chunk[i].2);
            let mut fetched: Vec<Option<Hit>> = vec![None; chunk.len()];
            for i in by_address {
                let (score, raw, addr) = chunk[i];
                fetched[i] = Some(self.hit(searcher, addr, score, raw, req.include_text, req.unit)?);
            }
            let part: Vec<Hit> = fetched.into_iter().flatten().collect();
            if let Some(p) = hooks.progress {
                let done = hits.len() + part.len();
                p(0.5 + 0.5 * done as f64 / total as f64, format!("{done} hits"), part.clone());
            }
            hits.extend(part);
        }
        let next_cursor = more.then(|| {
            Cursor { version: version.clone(), offset: offset + hits.len(), fingerprint: fp, now_ms }.encode()
        });
        let candidates = matched.min(req.candidate_k.max(offset + k) as u64);
        Ok(SearchPage {
            hits,
            index_version: version,
            next_cursor,
            matched,
            candidates,
            terms: terms.len(),
            notes,
            rewritten: plan.rewritten,
        })
    }

    fn date_field(&self, name: &str) -> Result<&MetaField, EngineError> {
        match self.fields.filterable.get(name) {
            Some(m) if m.spec.ty == FieldType::Date => Ok(m),
            Some(m) => Err(EngineError::invalid("recency.field", format!("field '{name}' is {}, not date", m.spec.ty))),
            None => Err(EngineError::invalid("recency.field", format!("field '{name}' is not a declared date field"))),
        }
    }

    fn hit(
        &self,
        searcher: &Searcher,
        addr: DocAddress,
        score: f32,
        raw: f32,
        include_text: bool,
        unit: Unit,
    ) -> Result<Hit, EngineError> {
        let f = &self.fields;
        let stored: TantivyDocument = searcher.doc(addr)?;
        let chunk = self.chunk_of(&stored);
        // A chunk returned as its document: the document is its parent record.
        let doc = match (&chunk, unit) {
            (Some((doc_id, _)), Unit::Document) => self.parent(searcher, doc_id)?.unwrap_or(stored),
            _ => stored,
        };
        let text_of = |field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
        let id = match (&chunk, unit) {
            (Some((doc_id, _)), Unit::Document) => doc_id.clone(),
            _ => text_of(f.id).unwrap_or_default(),
        };
        let mut hit = Hit::new(id.as_str(), f64::from(score));
        hit.unit = Some(unit.as_str().into());
        hit.scores = Some([(Mode::Sparse.to_string(), f64::from(raw))].into_iter().collect());
        let text = text_of(f.text_raw);
        let (mut start, mut end) = (None, None);
        if unit == Unit::Chunk {
            // A document added whole is its own single chunk.
            let (doc_id, chunk) = chunk.unwrap_or_else(|| (id.clone(), Chunk { index: 0, start: 0, end: 0 }));
            let end_of = if chunk.end > 0 { chunk.end } else { text.as_ref().map_or(0, String::len) };
            (start, end) = (Some(chunk.start as i64), Some(end_of as i64));
            hit.chunk = Some(ChunkRef { doc_id: Some(doc_id), index: Some(chunk.index as i64), context: None });
        }
        if include_text {
            hit.text = text;
        }
        if let Some(Ok(Value::Object(meta))) = text_of(f.meta).map(|m| serde_json::from_str::<Value>(&m)) {
            hit.meta = (!meta.is_empty()).then_some(meta as Meta);
        }
        hit.citation =
            Some(Citation { source: text_of(f.source), title: text_of(f.title_raw), start, end, ..Default::default() });
        hit.trust = Some(Trust {
            level: text_of(f.trust).unwrap_or_else(|| TrustLevel::Untrusted.as_str().to_owned()),
            score: None,
            injection_suspected: None,
            sanitized: None,
        });
        Ok(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_follows_what_defines_the_ranking() {
        let base = SearchRequest::new("inverted index", 10);
        let same_ranking = SearchRequest { k: 3, include_text: false, ..base.clone() };
        assert_eq!(base.fingerprint(), same_ranking.fingerprint());
        let other_query = SearchRequest::new("inverted indexes", 10);
        assert_ne!(base.fingerprint(), other_query.fingerprint());
        let with_floor = SearchRequest { min_score: Some(1.0), ..base.clone() };
        assert_ne!(base.fingerprint(), with_floor.fingerprint());
    }
}
