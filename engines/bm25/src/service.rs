//! The engine on the framework: `retrieve` (§7.7, with `unit` `document` or `chunk`, §7.7.2)
//! and `index/add` (with `chunk:true`, [`rcp_corpus::chunking`])/`index/delete` (§7.10, §7.11); `query/transform` is in [`crate::transform`]. Handlers only translate between the protocol and [`Engine`]; blocking tantivy
//! work runs on the framework's CPU executor (`ctx.run_cpu`: reads in the read lane,
//! document preparation in the write lane), reads never take the writer lock, and writes are validated
//! here and then queued for group commit ([`GroupCommit`]): each is answered once the commit
//! holding it is durable.

use std::collections::HashSet;
use std::sync::Arc;

use rcp_corpus::CorpusDoc;
use rcp_server::{HandlerResult, Honours, Index, Lane, RequestContext, Retrieve, RetrieveRequest, Transform};
use rcp_wire::capabilities::{IndexCapability, RetrieveCapability, TransformCapability};
use rcp_wire::filter::FilterCapability;
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::notifications::LogLevel;
use rcp_wire::retrieve::Usage;
use rcp_wire::transform::{TransformParams, TransformResult};
use rcp_wire::{ErrorCode, Hit, Mode, RcpError, RetrieveResult};
use tantivy::TantivyDocument;

use crate::engine::{
    Engine, GroupCommit, Hooks, RecencySpec, Rm3, SearchRequest, TrustLevel, Unit, WriteOp, WriteOutcome,
};
use crate::error::EngineError;
use rcp_corpus::chunking::ChunkPolicy;

/// How the engine is exposed over RCP.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// `retrieve.maxK`.
    pub max_k: u64,
    /// Trust level given to documents written through `index/add` (never `trusted`).
    pub added_trust: TrustLevel,
    /// Citation source label of documents written through `index/add`.
    pub added_source: String,
    /// The RM3 parameters of `query/transform` and `retrieve.rewrite` (§7.8).
    pub rm3: Rm3,
    /// The chunk sizes of `index/add` `chunk:true` (§7.10).
    pub chunking: ChunkPolicy,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            max_k: 1000,
            added_trust: TrustLevel::Community,
            added_source: "index/add".into(),
            rm3: Rm3::default(),
            chunking: ChunkPolicy::default(),
        }
    }
}

/// The RCP face of an [`Engine`]; register one `Arc<Bm25>` for both `retrieve` and `index`.
#[derive(Debug)]
pub struct Bm25 {
    engine: Arc<Engine>,
    writes: GroupCommit,
    options: ServiceOptions,
}

impl Bm25 {
    /// Wraps an engine. `index/add` documents are never `trusted`: a `trusted` setting is
    /// lowered to `community`.
    pub fn new(engine: Arc<Engine>, mut options: ServiceOptions) -> Self {
        options.added_trust = options.added_trust.for_added();
        let writes = GroupCommit::start(Arc::clone(&engine));
        Self { engine, writes, options }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The options in force.
    pub fn options(&self) -> &ServiceOptions {
        &self.options
    }
}

pub(crate) fn to_rcp(e: EngineError) -> RcpError {
    match e {
        EngineError::SnapshotGone(msg) => RcpError::new(ErrorCode::BACKEND_UNAVAILABLE, msg).with_retryable(false),
        other => other.into(),
    }
}

impl Retrieve for Bm25 {
    fn capability(&self) -> RetrieveCapability {
        let mut cap = RetrieveCapability {
            max_k: Some(self.options.max_k),
            modes: Some(vec![Mode::Sparse]),
            default_mode: Some(Mode::Sparse),
            units: Some(if self.engine.chunking() {
                vec!["document".into(), "chunk".into()]
            } else {
                vec!["document".into()]
            }),
            deterministic: Some(true),
            snapshots: Some(true),
            score_scale: Some("bm25".into()),
            score_floor: Some(0.0),
            ..Default::default()
        };
        // Learned-sparse scores are dot products of non-negative weights: floor 0, not BM25.
        if let Some(model) = self.engine.learned_sparse() {
            cap.score_scale = Some("dot".into());
            cap.extra.insert(crate::splade::IDENTITY_KEY.into(), model.into());
        }
        cap
    }

    fn filter(&self) -> Option<FilterCapability> {
        if self.engine.field_specs().is_empty() {
            return None;
        }
        Some(
            FilterCapability::typed(self.engine.field_specs().iter().map(|f| (f.name.clone(), f.ty.clone())))
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
        Honours::NONE.with_recency()
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let search = SearchRequest {
            query: req.query.text(),
            k: req.k,
            candidate_k: req.candidate_k,
            filter: req.filter,
            min_score: req.min_score,
            recency: req.recency.map(|r| RecencySpec { field: r.field, half_life_days: r.half_life_days }),
            include_text: req.include_text,
            index_version: req.index_version,
            cursor: req.cursor,
            rewrite: crate::transform::inline(req.rewrite.as_deref(), &self.options.rm3)?,
            unit: Unit::of(req.unit.map(|u| u.as_str())),
        };
        let engine = Arc::clone(&self.engine);
        let task_ctx = ctx.clone();
        let page = ctx
            .run_cpu(Lane::Read, move || {
                let cancelled = || task_ctx.is_cancelled();
                let streaming = task_ctx.wants_progress();
                let progress = |p: f64, message: String, hits: Vec<Hit>| {
                    if hits.is_empty() {
                        task_ctx.progress(p, "recall", message);
                    } else {
                        task_ctx.progress_partial(p, "recall", hits);
                    }
                };
                let hooks =
                    Hooks { cancelled: Some(&cancelled), progress: if streaming { Some(&progress) } else { None } };
                engine.search(&search, &hooks)
            })
            .await?
            .map_err(to_rcp)?;
        if ctx.log_enabled(LogLevel::Debug) {
            ctx.log(
                LogLevel::Debug,
                format!(
                    "{} query terms; {} documents matched; {} hits on snapshot {}",
                    page.terms,
                    page.matched,
                    page.hits.len(),
                    page.index_version
                ),
            );
        }
        Ok(RetrieveResult {
            hits: page.hits,
            next_cursor: page.next_cursor,
            index_version: Some(page.index_version),
            usage: Some(Usage { candidates: Some(page.candidates), notes: page.notes, ..Default::default() }),
            rewritten_query: page.rewritten,
            ..Default::default()
        })
    }
}

/// Records ready for the writer, each with its document id.
type PreparedBatch = Vec<(String, TantivyDocument)>;

/// Validates and converts `params.documents` into the engine's records, minting missing ids and
/// chunking under `chunking` when the request asks (`chunk:true`); returns the ids, the records
/// and how many chunks were made.
fn prepare_batch(
    engine: &Engine,
    params: &IndexAddParams,
    trust: TrustLevel,
    source: &str,
    chunking: ChunkPolicy,
) -> Result<(Vec<String>, PreparedBatch, u64), RcpError> {
    let mut taken: HashSet<String> = params.documents.iter().filter_map(|d| d.id.clone()).collect();
    let mut ids = Vec::with_capacity(params.documents.len());
    let mut batch = Vec::with_capacity(params.documents.len());
    let mut chunks = 0u64;
    for (i, d) in params.documents.iter().enumerate() {
        let id = match &d.id {
            Some(id) => id.clone(),
            None => {
                let minted = engine.mint_id(&taken).map_err(to_rcp)?;
                taken.insert(minted.clone());
                minted
            }
        };
        let doc = CorpusDoc::from_document(d);
        let records = if params.chunk == Some(true) {
            engine.prepare_chunked(&doc, &id, trust, source, chunking)
        } else {
            engine.prepare(&doc, &id, trust, source).map(|r| vec![r])
        };
        let records = records.map_err(|e| match e {
            EngineError::InvalidParams { field, detail } => {
                RcpError::invalid_params(format!("documents[{i}].{field}"), detail)
            }
            other => to_rcp(other),
        })?;
        if params.chunk == Some(true) {
            // The parent record is not a chunk.
            chunks += records.len().saturating_sub(1) as u64;
        }
        ids.push(id.clone());
        batch.extend(records.into_iter().map(|r| (id.clone(), r)));
    }
    Ok((ids, batch, chunks))
}

/// `query/transform` (§7.8): the RM3 expansions of [`crate::transform`].
impl Transform for Bm25 {
    fn capability(&self) -> TransformCapability {
        crate::transform::capability()
    }

    async fn transform(&self, params: TransformParams, ctx: RequestContext) -> HandlerResult<TransformResult> {
        let rm3 = self.options().rm3;
        let n = crate::transform::variants_for(&params.method, params.n, &rm3)?;
        let engine = Arc::clone(self.engine());
        let query = params.query;
        let expansions = ctx.run_cpu(Lane::Read, move || engine.variants(&query, &rm3, n)).await?.map_err(to_rcp)?;
        Ok(TransformResult { queries: expansions.into_iter().map(|e| e.text).collect(), ..Default::default() })
    }
}

impl Index for Bm25 {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, chunking: self.engine.chunking().then_some(true), ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        // Validate and convert every document before touching the index: a bad one rejects
        // the whole batch and nothing is written. Minted ids are random (UUID v4) and checked
        // against the live index and the batch. The conversion is CPU work: the write lane.
        let engine = Arc::clone(&self.engine);
        let (trust, source) = (self.options.added_trust, self.options.added_source.clone());
        let chunking = self.options.chunking;
        let chunked = params.chunk == Some(true);
        let (ids, batch, chunks) =
            ctx.run_cpu(Lane::Write, move || prepare_batch(&engine, &params, trust, &source, chunking)).await??;
        let task_ctx = ctx.clone();
        let version = match self.writes.submit(WriteOp::Add(batch), Box::new(move || task_ctx.is_cancelled())).await {
            Ok(WriteOutcome::Added { index_version }) => index_version,
            Ok(other) => return Err(RcpError::internal(format!("unexpected write outcome {other:?}"))),
            Err(e) => return Err(to_rcp(e)),
        };
        ctx.log(LogLevel::Info, format!("indexed {} documents; snapshot {version}", ids.len()));
        Ok(IndexAddResult { ids, chunks: chunked.then_some(chunks), ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        if ctx.is_cancelled() {
            return Err(RcpError::cancelled(Some("stopped before deleting")));
        }
        let task_ctx = ctx.clone();
        let deleted =
            match self.writes.submit(WriteOp::Delete(params.ids), Box::new(move || task_ctx.is_cancelled())).await {
                Ok(WriteOutcome::Deleted { count }) => count,
                Ok(other) => return Err(RcpError::internal(format!("unexpected delete outcome {other:?}"))),
                Err(e) => return Err(to_rcp(e)),
            };
        ctx.log(LogLevel::Info, format!("deleted {deleted} documents"));
        Ok(IndexDeleteResult { deleted, ..Default::default() })
    }
}
