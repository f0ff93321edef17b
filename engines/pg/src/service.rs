//! The RCP face of the store: `retrieve` in `sparse`, `dense` and `hybrid` modes (§7.7, fusion
//! of §16.3 inside one engine) and in `unit` `document` or `chunk` (§7.7.2), `embed` (§7.3) and
//! `index/add` (with `chunk: true`)/`index/delete` (§7.10, §7.11).
//! Handlers translate between the protocol and [`Store`]; the encoder runs on the framework's
//! CPU executor, SQL runs on the async runtime.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use rcp_corpus::CorpusDoc;
use rcp_corpus::chunking::{Chunk, ChunkPolicy};
use rcp_corpus::recency::Decay;
use rcp_corpus::trust::TrustLevel;
use rcp_embedder::Embedder;
use rcp_embedder::calibration::confidence;
use rcp_embedder::serve::embed_on_executor;
use rcp_server::{
    Embed, EmbedRequest, HandlerResult, Honours, Index, Lane, RequestContext, Retrieve, RetrieveRequest, TokenCounter,
};
use rcp_wire::capabilities::{EmbedCapability, IndexCapability, RetrieveCapability};
use rcp_wire::filter::FilterCapability;
use rcp_wire::fusion::{EngineList, FusionMethod, fuse};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::retrieve::{ChunkRef, Citation, Trust, Usage, WireVector};
use rcp_wire::{Hit, Mode, RcpError, RequestId, RetrieveResult};
use serde_json::{Value, json};

use crate::cursor::{Cursor, fingerprint};
use crate::db::DbError;
use crate::feedback::PgFeedback;
use crate::input::{refuse_nul, refuse_nul_in_filter, refuse_nul_in_object};
use crate::query::{Found, Lists, Ranked, Search, Unit};
use crate::store::{NewDoc, Store};
use rcp_server::cursor::CursorState as _;

/// The modes this engine serves (§7.7).
pub const MODES: [Mode; 3] = [Mode::Hybrid, Mode::Sparse, Mode::Dense];
/// The fusion methods served in `hybrid` mode (§16.3).
pub const FUSION_METHODS: [&str; 3] = ["rrf", "weighted", "convex"];

/// How the engine is exposed over RCP.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `retrieve.maxK`.
    pub max_k: u64,
    /// `embed.batchLimit`.
    pub batch_limit: u32,
    /// Inputs per encoder run.
    pub encoder_batch: usize,
    /// Default HNSW beam width (`hnsw.ef_search`), raised to `candidateK`.
    pub ef_search: usize,
    /// `citation.source` of every hit.
    pub source: String,
    /// `retrieve.defaultMode`: the mode of a request that names none (one of [`MODES`]).
    pub default_mode: Mode,
    /// The chunk sizes of `index/add` `chunk: true` (§7.10).
    pub chunking: ChunkPolicy,
    /// The trust level of documents written with `index/add` (`--added-trust`); never
    /// `trusted` ([`TrustLevel::for_added`]).
    pub added_trust: TrustLevel,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_k: 1000,
            batch_limit: 256,
            encoder_batch: 16,
            ef_search: 64,
            source: "rcp-pg".to_owned(),
            default_mode: Mode::Hybrid,
            chunking: ChunkPolicy::default(),
            added_trust: TrustLevel::Community,
        }
    }
}

/// The engine; register one `Arc<PgEngine>` for `retrieve`, `embed` and `index`.
#[derive(Debug)]
pub struct PgEngine {
    store: Store,
    embedder: Arc<Embedder>,
    options: PgOptions,
    /// Feedback in the database: its quarantined hits are left out of every result.
    feedback: Option<PgFeedback>,
}

impl PgEngine {
    /// An engine over a store and an encoder.
    pub fn new(store: Store, embedder: Arc<Embedder>, options: PgOptions) -> Self {
        Self { store, embedder, options, feedback: None }
    }

    /// The engine leaving out of its results the hits `feedback` quarantines (§7.16).
    pub fn with_feedback(mut self, feedback: PgFeedback) -> Self {
        self.feedback = Some(feedback);
        self
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    async fn embed_texts(&self, texts: Vec<String>, ctx: &RequestContext, lane: Lane) -> HandlerResult<Vec<Vec<f32>>> {
        embed_on_executor(Arc::clone(&self.embedder), self.options.encoder_batch, texts, ctx, "embed", lane).await
    }
}

/// `tokenBudget` (§7.7.2) counts with the encoder's own WordPiece tokenizer, as rcp-dense does.
impl TokenCounter for PgEngine {
    fn name(&self) -> String {
        self.embedder.tokenizer_name().to_owned()
    }

    fn count(&self, text: &str) -> usize {
        self.embedder.count_tokens(text)
    }
}

fn db_error(e: DbError) -> RcpError {
    if !e.is_outage() && !e.is_client_input() {
        tracing::error!(error = %e, "database statement failed");
    }
    e.into()
}

impl Retrieve for PgEngine {
    fn capability(&self) -> RetrieveCapability {
        let mut cap = RetrieveCapability {
            max_k: Some(self.options.max_k),
            modes: Some(MODES.to_vec()),
            default_mode: Some(self.options.default_mode.clone()),
            fusion: Some(FUSION_METHODS.iter().map(|m| (*m).to_owned()).collect()),
            units: Some(vec![Unit::Document.as_str().into(), Unit::Chunk.as_str().into()]),
            deterministic: Some(true),
            confidence: Some(true),
            // The scale depends on the mode (x-scoreScales); the floor holds for all of them:
            // BM25, RRF and convex scores are >= 0, cosine >= -1.
            score_scale: Some("unbounded".into()),
            score_floor: Some(-1.0),
            ..Default::default()
        };
        cap.extra.insert(
            "x-scoreScales".into(),
            json!({"sparse": "bm25", "dense": "cosine", "hybrid": "fusion score of the requested method (rrf: sum of 1/(rrfK+rank); weighted, convex: [0,1] per list)"}),
        );
        cap
    }

    fn filter(&self) -> Option<FilterCapability> {
        if self.store.fields().is_empty() {
            return None;
        }
        Some(
            FilterCapability::typed(self.store.fields().iter().map(|(k, t)| (k.clone(), t.clone())))
                .with_all_operators(),
        )
    }

    fn pagination(&self) -> bool {
        true
    }

    fn citations(&self) -> bool {
        true
    }

    fn honours(&self) -> Honours {
        Honours::NONE.with_recency().with_vectors()
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let started = Instant::now();
        // The framework resolves an absent mode to the advertised default.
        let mode = req.mode.clone().ok_or_else(|| RcpError::internal("retrieve reached the engine without a mode"))?;
        let lists = match mode {
            Mode::Sparse => Lists::Sparse,
            Mode::Dense => Lists::Dense,
            _ => Lists::Both,
        };
        let unit = Unit::of(req.unit.map(|u| u.as_str()));
        let print = fingerprint(&req, &mode, unit);
        let cursor = req.cursor.as_deref().map(|c| Cursor::decode(c, &print)).transpose()?;
        let offset = cursor.as_ref().map_or(0, |c| c.offset);
        let text = req.query.text();
        refuse_nul(|| "query".to_owned(), &text)?;
        if let Some(filter) = &req.filter {
            refuse_nul_in_filter(filter)?;
        }
        let vector = match lists {
            Lists::Sparse => None,
            _ => self.embed_texts(vec![text.clone()], &ctx, Lane::Read).await?.pop(),
        };
        // One row more than the page tells whether another page exists; hybrid fuses full
        // candidate lists so the fused order does not depend on the page.
        let page_end = offset + req.k;
        // `recency` reorders the whole candidate list too, so it is fetched in full.
        let limit = match lists {
            Lists::Both => req.candidate_k.max(page_end + 1),
            _ if req.recency.is_some() => req.candidate_k.max(page_end + 1),
            _ => page_end + 1,
        };
        let search = Search {
            text: &text,
            vector: vector.as_deref(),
            lists,
            filter: req.filter.as_ref(),
            limit,
            ef_search: self.options.ef_search.max(req.candidate_k),
            with_vectors: req.include_vectors,
            unit,
        };
        let ranked = self.store.search(&search).await.map_err(db_error)?;
        if let Some(c) = &cursor {
            c.check_version(ranked.version)?;
        }
        let candidates = (ranked.sparse.len() + ranked.dense.len()) as u64;
        let mut notes = Vec::new();
        if ranked.exact {
            notes.push("dense list from an exact scan (filtered or deeper than the HNSW beam)".to_owned());
        }
        let mut ordered = match lists {
            Lists::Sparse => single(&ranked.sparse, |f| f.bm25),
            Lists::Dense => single(&ranked.dense, |f| f.cosine),
            Lists::Both => hybrid(&ranked, req.fusion.as_ref())?,
        };
        if let Some(r) = &req.recency {
            decay(&mut ordered, &r.field, r.half_life_days);
        }
        if let Some(f) = &self.feedback {
            let barred = f.quarantined().await.map_err(db_error)?;
            ordered.retain(|(found, _)| !quarantined(found, &barred));
        }
        if let Some(min) = req.min_score {
            ordered.retain(|(_, score)| *score >= min);
        }
        let more = ordered.len() > page_end;
        let hits: Vec<Hit> = ordered
            .into_iter()
            .skip(offset)
            .take(req.k)
            .map(|(found, score)| self.hit(found, score, &mode, unit, req.include_text))
            .collect();
        let next_cursor =
            more.then(|| Cursor { offset: page_end, version: ranked.version, fingerprint: print }.encode());
        Ok(RetrieveResult {
            hits,
            next_cursor,
            index_version: Some(ranked.version.to_string()),
            usage: Some(Usage {
                candidates: Some(candidates),
                latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
                notes,
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}

/// Whether the quarantine leaves `found` out: its hit id is quarantined, or its document's (a
/// chunk of a quarantined document goes with it), as the framework's rule for hits has it.
fn quarantined(found: &Found, barred: &std::collections::HashSet<String>) -> bool {
    barred.contains(&found.id) || (found.chunk.is_some() && barred.contains(&found.hit_id()))
}

/// `recency` (§7.7): each score multiplied by the decay of its document's date ([`Decay`], the
/// formula every bundled engine applies), then reordered (ties keep their order).
fn decay(ordered: &mut [(&Found, f64)], field: &str, half_life_days: f64) {
    let decay = Decay::from_now(half_life_days);
    for (found, score) in ordered.iter_mut() {
        *score = decay.apply(*score, &found.metadata, field);
    }
    ordered.sort_by(|a, b| b.1.total_cmp(&a.1));
}

/// One list in rank order with its scores.
fn single(list: &[Found], score: impl Fn(&Found) -> Option<f64>) -> Vec<(&Found, f64)> {
    list.iter().map(|f| (f, score(f).unwrap_or(0.0))).collect()
}

/// Fuses the two lists with the requested method (§16.3), weights keyed `dense`/`sparse`.
fn hybrid<'a>(
    ranked: &'a Ranked,
    fusion: Option<&rcp_wire::retrieve::FusionParams>,
) -> Result<Vec<(&'a Found, f64)>, RcpError> {
    let method_name = fusion.and_then(|f| f.method.as_deref()).unwrap_or("rrf");
    let method = match method_name {
        "rrf" => {
            FusionMethod::Rrf { rrf_k: fusion.and_then(|f| f.rrf_k).map_or(rcp_wire::fusion::DEFAULT_RRF_K, f64::from) }
        }
        "weighted" => FusionMethod::Weighted,
        "convex" => FusionMethod::convex(fusion.and_then(|f| f.alpha).unwrap_or(rcp_wire::fusion::DEFAULT_ALPHA)),
        other => return Err(RcpError::option_unsupported("fusion.method", other, &FUSION_METHODS)),
    };
    let weight = |name: &str| fusion.and_then(|f| f.weights.as_ref()).and_then(|w| w.get(name).copied()).unwrap_or(1.0);
    let as_hits = |list: &[Found], score: fn(&Found) -> Option<f64>| -> Vec<Hit> {
        list.iter().map(|f| Hit::new(f.key().as_str(), score(f).unwrap_or(0.0))).collect()
    };
    let lists = [
        EngineList::new(Mode::Sparse.as_str(), as_hits(&ranked.sparse, |f| f.bm25))
            .with_weight(weight(Mode::Sparse.as_str()))
            .with_score_floor(0.0),
        EngineList::new(Mode::Dense.as_str(), as_hits(&ranked.dense, |f| f.cosine))
            .with_weight(weight(Mode::Dense.as_str()))
            .with_score_floor(-1.0),
    ];
    let total = ranked.sparse.len() + ranked.dense.len();
    let fused = fuse(&lists, &method, total)?;
    // The fused order, mapped back to the rows (the richer row: the sparse one also carries
    // the cosine, the dense one lacks BM25 only when the row was not a sparse candidate).
    let mut rows: HashMap<String, &Found> = ranked.dense.iter().map(|f| (f.key(), f)).collect();
    for f in &ranked.sparse {
        rows.insert(f.key(), f);
    }
    Ok(fused
        .iter()
        .filter_map(|h| match &h.id {
            RequestId::String(id) => rows.get(id.as_str()).map(|f| (*f, h.score)),
            RequestId::Number(_) => None,
        })
        .collect())
}

impl PgEngine {
    /// The hit of a row, in `unit` (§7.7.2): a chunk hit (`{docId}#{index}`, or the document id
    /// for a document added whole, its own chunk 0) names its document and position in
    /// `hit.chunk` and its byte range in `hit.citation`; a document hit is the whole text.
    fn hit(&self, found: &Found, score: f64, mode: &Mode, unit: Unit, include_text: bool) -> Hit {
        let mut hit = Hit::new(found.hit_id().as_str(), score);
        if let Some(cos) = found.cosine {
            hit.confidence = Some(confidence(cos));
        }
        if include_text {
            hit.text = Some(found.body.clone());
        }
        let mut meta = found.metadata.clone();
        if let Some(t) = &found.title {
            meta.insert("title".into(), Value::String(t.clone()));
        }
        if !meta.is_empty() {
            hit.meta = Some(meta);
        }
        if let Some(v) = &found.vector {
            hit.vector = Some(WireVector::Json(v.clone()));
        }
        let mut scores = BTreeMap::new();
        if let Some(s) = found.bm25 {
            scores.insert(Mode::Sparse.to_string(), s);
        }
        if let Some(c) = found.cosine {
            scores.insert(Mode::Dense.to_string(), c);
        }
        if *mode == Mode::Hybrid {
            scores.insert("fused".to_owned(), score);
        }
        hit.scores = Some(scores);
        hit.unit = Some(unit.as_str().into());
        let mut citation =
            Citation { source: Some(self.options.source.clone()), title: found.title.clone(), ..Default::default() };
        if unit == Unit::Chunk {
            let chunk = found.chunk.unwrap_or(Chunk { index: 0, start: 0, end: found.body.len() });
            citation.start = i64::try_from(chunk.start).ok();
            citation.end = i64::try_from(chunk.end).ok();
            hit.chunk = Some(ChunkRef {
                doc_id: Some(found.id.clone()),
                index: i64::try_from(chunk.index).ok(),
                context: None,
            });
        }
        hit.citation = Some(citation);
        hit.trust = Some(Trust {
            level: found.trust.as_str().to_owned(),
            score: None,
            injection_suspected: None,
            sanitized: None,
        });
        hit
    }
}

impl Embed for PgEngine {
    fn capability(&self) -> EmbedCapability {
        rcp_embedder::serve::capability(self.options.batch_limit)
    }

    async fn embed(&self, req: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        let texts = req.inputs.iter().map(|i| i.text().to_owned()).collect();
        self.embed_texts(texts, &ctx, Lane::Read).await
    }
}

impl Index for PgEngine {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, chunking: Some(true), ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        refuse_nul_in_documents(&params)?;
        let chunked = params.chunk == Some(true);
        // Declared field types were checked by the framework (rcp_corpus::validate) before
        // this handler ran.
        let docs: Vec<CorpusDoc> = params.documents.iter().map(CorpusDoc::from_document).collect();
        let ids: Vec<String> = docs
            .iter()
            .map(|d| d.id.clone().unwrap_or_else(|| format!("doc-{}", uuid::Uuid::new_v4().simple())))
            .collect();
        let new: Vec<NewDoc> = docs
            .into_iter()
            .zip(&ids)
            .map(|(d, id)| {
                let doc = NewDoc::new(id.clone(), d.title, d.text, Value::Object(d.meta))
                    .with_trust(self.options.added_trust.for_added());
                if chunked { doc.chunked(self.options.chunking) } else { doc }
            })
            .collect();
        let chunks = new.iter().map(|d| d.chunks.as_ref().map_or(0, Vec::len) as u64).sum::<u64>();
        let (embedder, batch) = (Arc::clone(&self.embedder), self.options.encoder_batch);
        let embed = |texts: Vec<String>| {
            let (embedder, ctx) = (Arc::clone(&embedder), ctx.clone());
            async move {
                let vectors = embed_on_executor(embedder, batch, texts, &ctx, "embed", Lane::Write).await?;
                if ctx.is_cancelled() {
                    return Err(RcpError::cancelled(Some("cancelled before the write")));
                }
                Ok(vectors)
            }
        };
        let version = self.store.put(new, embed).await?;
        if ids.len() > self.options.encoder_batch {
            ctx.progress(1.0, "index", format!("indexed {} documents; version {version}", ids.len()));
        }
        Ok(IndexAddResult { ids, chunks: chunked.then_some(chunks), ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        for (i, id) in params.ids.iter().enumerate() {
            refuse_nul(|| format!("ids[{i}]"), id)?;
        }
        let (deleted, _) = self.store.delete(&params.ids).await.map_err(db_error)?;
        Ok(IndexDeleteResult { deleted, ..Default::default() })
    }
}

/// Refuses (`-32602`, naming the field) a document whose id, text or metadata holds U+0000:
/// PostgreSQL cannot store it, and storing the rest would alter what was acknowledged.
fn refuse_nul_in_documents(params: &IndexAddParams) -> Result<(), RcpError> {
    for (i, doc) in params.documents.iter().enumerate() {
        if let Some(id) = &doc.id {
            refuse_nul(|| format!("documents[{i}].id"), id)?;
        }
        refuse_nul(|| format!("documents[{i}].text"), &doc.text)?;
        if let Some(meta) = &doc.meta {
            refuse_nul_in_object(&format!("documents[{i}].meta"), meta)?;
        }
    }
    Ok(())
}
