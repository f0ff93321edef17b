//! The engine: `embed` (§7.3), `retrieve` in `dense` mode (§7.7) and `index/add` /
//! `index/delete` (§7.10, §7.11) over one [`Store`] and one [`Embedder`].
//!
//! All model and index work runs on the framework's bounded CPU executor (`ctx.run_cpu`:
//! reads in the read lane, `index/add` and `index/delete` in the write lane), so the async
//! runtime keeps answering `ping` and other requests while a large `index/add` embeds; long
//! batches report progress (§9) and stop between encoder batches when cancelled (§7.14).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use rcp_server::{
    Embed, EmbedRequest, HandlerResult, Honours, Index, Lane, RequestContext, Retrieve, RetrieveRequest, TokenCounter,
};
use rcp_wire::capabilities::{EmbedCapability, IndexCapability, RetrieveCapability};
use rcp_wire::filter::FilterCapability;
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::mmr::mmr;
use rcp_wire::retrieve::{Citation, Trust, Usage, WireVector};
use rcp_wire::{Hit, Mode, RcpError, RetrieveResult};

use crate::ann::{Scored, by_score};
use crate::cursor::{Cursor, fingerprint};
use crate::graph::GraphIndex;
use crate::store::{Store, StoreError, stored};
use crate::wal::{Origin, StoredDoc};
use rcp_corpus::recency::{self, Decay};
use rcp_embedder::Embedder;
pub use rcp_embedder::calibration::confidence;
use rcp_embedder::serve::embed_on_executor;
use rcp_server::cursor::CursorState as _;

/// The deepest offset a cursor may hold: pages reach at most this far into a ranking (a cursor
/// is the client's to send, so its position is bounded before anything is sized by it).
const MAX_CURSOR_OFFSET: usize = 100_000;

/// Tunables of the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOptions {
    /// `embed.batchLimit`: most inputs per `embed` call.
    pub batch_limit: u32,
    /// `retrieve.maxK`.
    pub max_k: u64,
    /// Texts per encoder call; cancellation and progress are checked between calls.
    pub encoder_batch: usize,
    /// Default HNSW beam width at query time (raised to `candidateK`).
    pub ef_search: usize,
    /// `citation.source` of every hit.
    pub source: String,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self { batch_limit: 256, max_k: 1000, encoder_batch: 16, ef_search: 64, source: "rcp-dense".to_owned() }
    }
}

/// The dense engine. Register one `Arc<DenseEngine>` for `retrieve`, `embed` and `index`.
#[derive(Debug)]
pub struct DenseEngine {
    store: Arc<Store>,
    embedder: Arc<Embedder>,
    options: EngineOptions,
    /// The document graph kept in step with writes (the `graph` capability), if served.
    graph: Option<Arc<GraphIndex>>,
}

/// `tokenBudget` (§7.7.2) counts with the encoder's own WordPiece tokenizer: the tokens a
/// MiniLM-family reader would see.
impl TokenCounter for DenseEngine {
    fn name(&self) -> String {
        self.embedder.tokenizer_name().to_owned()
    }

    fn count(&self, text: &str) -> usize {
        self.embedder.count_tokens(text)
    }
}

fn store_error(e: StoreError) -> RcpError {
    RcpError::internal(e.to_string())
}

/// The document is stored, but the graph file could not be saved: the next open rebuilds
/// the missing links from the store.
fn graph_error(e: std::io::Error) -> RcpError {
    RcpError::internal(format!("document graph not saved: {e}"))
}

impl DenseEngine {
    /// An engine over a store and an encoder.
    pub fn new(store: Arc<Store>, embedder: Arc<Embedder>, options: EngineOptions) -> Self {
        Self { store, embedder, options, graph: None }
    }

    /// The engine with a document graph that `index/add` and `index/delete` keep up to date.
    pub fn with_graph(mut self, graph: Arc<GraphIndex>) -> Self {
        self.graph = Some(graph);
        self
    }

    /// `retrieve.maxK`.
    pub fn max_k(&self) -> usize {
        usize::try_from(self.options.max_k).unwrap_or(usize::MAX)
    }

    /// The default HNSW beam width.
    pub fn ef_search(&self) -> usize {
        self.options.ef_search
    }

    /// `citation.source` of every hit.
    pub fn source(&self) -> &str {
        &self.options.source
    }

    /// The unit vector of a query, embedded on the executor's read lane.
    pub(crate) async fn embed_query(&self, query: &str, ctx: &RequestContext) -> HandlerResult<Vec<f32>> {
        let mut q = self.embed_texts(vec![query.to_owned()], ctx, "embed", Lane::Read).await?;
        q.pop().ok_or_else(|| RcpError::internal("no query vector"))
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Embeds texts on the server's CPU executor (in `lane`), in encoder batches, reporting progress under `stage`
    /// and stopping between batches once the request is cancelled.
    pub(crate) async fn embed_texts(
        &self,
        texts: Vec<String>,
        ctx: &RequestContext,
        stage: &'static str,
        lane: Lane,
    ) -> HandlerResult<Vec<Vec<f32>>> {
        embed_on_executor(Arc::clone(&self.embedder), self.options.encoder_batch, texts, ctx, stage, lane).await
    }
}

impl Retrieve for DenseEngine {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability {
            max_k: Some(self.options.max_k),
            modes: Some(vec![Mode::Dense]),
            mmr: Some(true),
            deterministic: Some(true),
            confidence: Some(true),
            score_scale: Some("cosine".into()),
            score_floor: Some(-1.0),
            default_mode: Some(Mode::Dense),
            ..Default::default()
        }
    }

    fn filter(&self) -> Option<FilterCapability> {
        let fields = self.store.fields();
        (!fields.is_empty()).then(|| FilterCapability::typed(fields))
    }

    fn citations(&self) -> bool {
        true
    }

    fn pagination(&self) -> bool {
        true
    }

    fn honours(&self) -> Honours {
        Honours::NONE.with_recency().with_vectors()
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let started = Instant::now();
        let print = fingerprint(&req);
        let cursor = req.cursor.as_deref().map(|c| Cursor::decode(c, &print)).transpose()?;
        let query = req.query.text();
        let mut q = self.embed_texts(vec![query], &ctx, "recall", Lane::Read).await?;
        let q = q.pop().ok_or_else(|| RcpError::internal("no query vector"))?;
        let store = self.store.clone();
        let offset = cursor.as_ref().map_or(0, |c| c.offset);
        // One clock for every page of a ranking: `recency` decays by the first page's time, so
        // a later page's scores are comparable with the cursor's key.
        let clock_ms = cursor.as_ref().map(|c| c.clock_ms).filter(|&t| t > 0).unwrap_or_else(recency::now_ms);
        // Every page searches the first page's depth (the cursor's), so all pages are cut from
        // one candidate set. A page past it, or one that comes up short because documents
        // written since rank above the cursor's key, searches deeper: as many again of slack.
        // The cursor is the client's to send: its depth is used only within those bounds.
        if offset > MAX_CURSOR_OFFSET {
            return Err(RcpError::invalid_params("cursor", "not a position this server mints"));
        }
        let needed = offset + req.k + 1;
        let deeper = req.candidate_k.max(needed) + offset;
        let first = cursor.as_ref().map(|c| c.depth).filter(|&d| d >= needed && d <= deeper);
        let ef_search = self.options.ef_search;
        let planner = store.options().planner;
        let engine_hits = {
            let req = req.clone();
            let options = self.options.clone();
            ctx.run_cpu(Lane::Read, move || {
                let table = store.read();
                let mut depth = first.unwrap_or(deeper);
                loop {
                    let ef = ef_search.max(depth);
                    let (mut found, route) = table.search(&q, depth, ef, req.filter.as_ref(), &planner);
                    let candidates = found.len();
                    let cosine: HashMap<usize, f32> = found.iter().map(|s| (s.slot, s.score)).collect();
                    if let Some(r) = &req.recency {
                        let decay = Decay::new(clock_ms, r.half_life_days);
                        apply_decay(&mut found, &table, &r.field, &decay);
                    }
                    if let Some(min) = req.min_score {
                        found.retain(|s| f64::from(s.score) >= min);
                    }
                    let id = |s: &Scored| table.doc(s.slot).map_or("", |d| d.id.as_str());
                    // The keyset order: score descending, then id ascending.
                    found.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| id(a).cmp(id(b))));
                    let mut order: Vec<usize> = match req.mmr {
                        Some(m) => {
                            let relevance: Vec<f64> = found.iter().map(|s| f64::from(s.score)).collect();
                            let vectors: Vec<&[f32]> = found.iter().map(|s| table.vector(s.slot)).collect();
                            mmr(&relevance, &vectors, m.lambda, offset + req.k + 1).into_iter().skip(offset).collect()
                        }
                        None => (0..found.len())
                            .filter(|&i| cursor.as_ref().is_none_or(|c| c.precedes(found[i].score, id(&found[i]))))
                            .take(req.k + 1)
                            .collect(),
                    };
                    if order.len() <= req.k && candidates >= depth && depth < deeper {
                        depth = deeper;
                        continue;
                    }
                    let more = order.len() > req.k;
                    order.truncate(req.k);
                    let next_cursor = order.last().filter(|_| more).map(|&i| {
                        let s = &found[i];
                        Cursor {
                            offset: offset + order.len(),
                            score: s.score,
                            id: id(s).to_owned(),
                            clock_ms,
                            fingerprint: print,
                            depth,
                        }
                        .encode()
                    });
                    let hits: Vec<Hit> = order
                        .into_iter()
                        .filter_map(|i| {
                            let s = &found[i];
                            let cos = cosine.get(&s.slot).copied().unwrap_or(s.score);
                            table.doc(s.slot).map(|d| build_hit(&options, s, cos, d, table.vector(s.slot), &req))
                        })
                        .collect();
                    break (hits, next_cursor, candidates, route);
                }
            })
            .await?
        };
        let (hits, next_cursor, candidates, route) = engine_hits;
        let mut usage = Usage {
            candidates: Some(candidates as u64),
            latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
            ..Default::default()
        };
        usage.notes.extend(route.note());
        Ok(RetrieveResult { hits, next_cursor, usage: Some(usage), ..Default::default() })
    }
}

/// `recency` (§7.7) over the candidates: each cosine decayed by its document's date
/// ([`Decay::apply`], the formula every bundled engine applies), then reordered.
fn apply_decay(found: &mut [Scored], table: &crate::store::Table, field: &str, decay: &Decay) {
    for s in found.iter_mut() {
        s.score = table.doc(s.slot).map_or(0.0, |d| decay.apply(f64::from(s.score), &d.meta, field)) as f32;
    }
    found.sort_by(by_score);
}

/// One hit: its score (the cosine, decayed under `recency`), the cosine's confidence and
/// `scores.dense`, text, meta, vector, citation and trust.
fn build_hit(
    options: &EngineOptions,
    s: &Scored,
    cosine: f32,
    doc: &StoredDoc,
    vector: &[f32],
    req: &RetrieveRequest,
) -> Hit {
    let mut hit = stored_hit(doc, f64::from(cosine), &options.source);
    hit.score = f64::from(s.score);
    if !req.include_text {
        hit.text = None;
    }
    if req.include_vectors {
        hit.vector = Some(WireVector::Json(vector.to_vec()));
    }
    hit
}

/// A stored document as a hit with its cosine `score`: confidence, text, meta,
/// `scores.dense`, a citation from `source` and the trust of its origin.
pub(crate) fn stored_hit(doc: &StoredDoc, score: f64, source: &str) -> Hit {
    let mut hit = Hit::new(doc.id.as_str(), score);
    hit.confidence = Some(confidence(score));
    hit.text = Some(doc.text.clone());
    if !doc.meta.is_empty() {
        hit.meta = Some(doc.meta.clone());
    }
    hit.scores = Some(BTreeMap::from([(Mode::Dense.to_string(), score)]));
    let title = doc.meta.get("title").and_then(|t| t.as_str()).map(str::to_owned);
    hit.citation = Some(Citation { source: Some(source.to_owned()), title, ..Default::default() });
    hit.trust = Some(Trust {
        level: doc.origin.trust_level().to_owned(),
        score: None,
        injection_suspected: None,
        sanitized: None,
    });
    hit
}

impl Embed for DenseEngine {
    fn capability(&self) -> EmbedCapability {
        rcp_embedder::serve::capability(self.options.batch_limit)
    }

    async fn embed(&self, req: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        // The model is symmetric: `kind` (query/document) selects nothing.
        let texts = req.inputs.iter().map(|i| i.text().to_owned()).collect();
        self.embed_texts(texts, &ctx, "embed", Lane::Read).await
    }
}

impl Index for DenseEngine {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        // Declared field types were checked by the framework before this handler ran.
        let ids: Vec<String> =
            params.documents.iter().map(|d| d.id.clone().unwrap_or_else(|| self.store.mint_id())).collect();
        // An identical {id, text, meta} already stored is left alone: a retried write costs
        // nothing and stays observationally identical (§7.10).
        let todo: Vec<usize> = {
            let table = self.store.read();
            (0..ids.len())
                .filter(|&i| {
                    let d = &params.documents[i];
                    !table.get(&ids[i]).is_some_and(|old| {
                        old.origin == Origin::Client
                            && old.text == d.text
                            && old.meta == d.meta.clone().unwrap_or_default()
                    })
                })
                .collect()
        };
        let texts: Vec<String> = todo.iter().map(|&i| params.documents[i].text.clone()).collect();
        let vectors = self.embed_texts(texts, &ctx, "embed", Lane::Write).await?;
        if ctx.is_cancelled() {
            return Err(RcpError::cancelled(Some("cancelled before the write")));
        }
        let docs: Vec<_> = todo
            .iter()
            .zip(vectors)
            .map(|(&i, v)| {
                let d = &params.documents[i];
                (stored(ids[i].clone(), d.text.clone(), d.meta.clone().unwrap_or_default(), Origin::Client), v)
            })
            .collect();
        let n = docs.len();
        let written: Vec<String> = todo.iter().map(|&i| ids[i].clone()).collect();
        let store = self.store.clone();
        let graph = self.graph.clone();
        ctx.run_cpu(Lane::Write, move || {
            store.upsert(docs).map_err(store_error)?;
            match graph {
                Some(g) if !written.is_empty() => g.upserted(&written).map_err(graph_error),
                _ => Ok(()),
            }
        })
        .await??;
        if n > 0 {
            ctx.progress(1.0, "index", format!("indexed {n} documents"));
        }
        Ok(IndexAddResult { ids, ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let store = self.store.clone();
        let graph = self.graph.clone();
        let deleted = ctx
            .run_cpu(Lane::Write, move || {
                let deleted = store.delete(params.ids.clone()).map_err(store_error)?;
                match graph {
                    Some(g) if deleted > 0 => g.deleted(&params.ids).map_err(graph_error)?,
                    _ => {}
                }
                Ok::<_, RcpError>(deleted)
            })
            .await??;
        Ok(IndexDeleteResult { deleted, ..Default::default() })
    }
}
