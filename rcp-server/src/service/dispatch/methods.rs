//! The server side of each method, in one file: which methods each handler serves (the
//! `bind_*` functions the builder calls as handlers are registered), and one family function
//! per method that validates the params against the session's capabilities (with
//! `crate::service::validate`), calls the engine's handler, and finishes its result (with
//! [`super::finish`]). Each is generic over the engine's handler type, so the call into the
//! engine is plain code; [`super::routes`] holds the bound families. Gating has already
//! happened (see [`super::rules::gate`]).

use std::sync::{Arc, Mutex, OnceLock};

use rcp_wire::capabilities::default_modalities;
use rcp_wire::embed::{EmbedResult, MultiVectorResult, SparseEmbedParams, SparseEmbedResult, SparseVector};
use rcp_wire::feedback::FeedbackParams;
use rcp_wire::graph::GraphParams;
use rcp_wire::index::{IndexAddParams, IndexDeleteParams};
use rcp_wire::memory::{MemoryBuildParams, MemoryRecallParams};
use rcp_wire::methods::Method;
use rcp_wire::transform::TransformParams;
use rcp_wire::{RcpError, RetrieveParams};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::finish::{
    check_count, dedup_truncate, encode_vectors, finish_rerank, finish_retrieve, notes_meta, retrieve_size,
};
use super::idempotency::IdempotencyCache;
use super::routes::{Call, Route, Routes};
use super::rules::frame::{body, body_sized};
use crate::handler::context::RequestContext;
use crate::handler::{
    Catalog, Embed, EmbedRequest, Feedback, Graph, Index, Memory, MultiVector, Rerank, Retrieve, SparseEmbed, Transform,
};
use crate::retrieval::budget::{Counter, Packing};
use crate::retrieval::feedback::quarantine::Quarantine;
use crate::retrieval::feedback::quarantine::drop_quarantined;
use crate::retrieval::rerank::stage::{self, Reranker};
use crate::retrieval::session_dedup::{self, Step, Trajectories};
use crate::service::validate;

// ---- binding: the methods each handler serves ----

/// `retrieve` served by `route`.
pub(crate) fn bind_retrieve<T: Retrieve>(routes: &mut Routes, route: RetrieveRoute<T>) {
    routes.insert(Method::Retrieve, Route::new(route, retrieve));
}

/// `embed` served by `handler`.
pub(crate) fn bind_embed<T: Embed>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::Embed, Route::new(handler, embed));
}

/// `embed/sparse` served by `handler`.
pub(crate) fn bind_sparse_embed<T: SparseEmbed>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::EmbedSparse, Route::new(handler, embed_sparse));
}

/// `embed/multi` served by `handler`.
pub(crate) fn bind_multi_vector<T: MultiVector>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::EmbedMulti, Route::new(handler, embed_multi));
}

/// `rerank` served by `handler`.
pub(crate) fn bind_rerank<T: Rerank>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::Rerank, Route::new(handler, rerank));
}

/// `query/transform` served by `handler`.
pub(crate) fn bind_transform<T: Transform>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::QueryTransform, Route::new(handler, transform));
}

/// `graph` served by `handler`, its hits counted in the server's trajectories.
pub(crate) fn bind_graph<T: Graph>(routes: &mut Routes, handler: Arc<T>, trajectories: Arc<OnceLock<Trajectories>>) {
    routes.insert(Method::Graph, Route::new((handler, trajectories), graph));
}

/// `index/add` and `index/delete` served by `handler`, writes replayed from `idempotency`.
pub(crate) fn bind_index<T: Index>(routes: &mut Routes, handler: Arc<T>, idempotency: Arc<Mutex<IdempotencyCache>>) {
    routes.insert(Method::IndexDelete, Route::new(Arc::clone(&handler), index_delete));
    routes.insert(Method::IndexAdd, Route::new((handler, idempotency), index_add));
}

/// `catalog/list` served by `handler`.
pub(crate) fn bind_catalog<T: Catalog>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::CatalogList, Route::new(handler, catalog_list));
}

/// `feedback` served by `handler`, its signalled hits counted in the server's trajectories.
pub(crate) fn bind_feedback<T: Feedback>(
    routes: &mut Routes,
    handler: Arc<T>,
    trajectories: Arc<OnceLock<Trajectories>>,
) {
    routes.insert(Method::Feedback, Route::new((handler, trajectories), feedback));
}

/// `memory/build` and `memory/recall` served by `handler`.
pub(crate) fn bind_memory<T: Memory>(routes: &mut Routes, handler: Arc<T>) {
    routes.insert(Method::MemoryRecall, Route::new(Arc::clone(&handler), memory_recall));
    routes.insert(Method::MemoryBuild, Route::new(handler, memory_build));
}

// ---- the families ----

/// An `index/add` handler and the results of its idempotent writes (§7.10).
pub(crate) type IdempotentIndex<T> = (Arc<T>, Arc<Mutex<IdempotencyCache>>);

/// A `retrieve` handler with the state its rules read: the server's trajectories (present
/// when `session` is enabled), the feedback quarantine and the engine's token counter.
pub(crate) struct RetrieveRoute<T> {
    /// The engine's handler.
    pub(crate) handler: Arc<T>,
    /// Hits already returned per session (§7.7.3), once `session` is switched on.
    pub(crate) trajectories: Arc<OnceLock<Trajectories>>,
    /// Hits quarantined by feedback (§7.16).
    pub(crate) quarantine: Arc<Quarantine>,
    /// The engine's tokenizer, once one is supplied: `tokenBudget` packing (§7.7.2).
    pub(crate) counter: Arc<OnceLock<Counter>>,
    /// The reranker of the inline rerank stage (§7.7), once one is registered.
    pub(crate) reranker: Arc<OnceLock<Reranker>>,
}

/// `retrieve` (§7.7): funnel, options and filter validated; with a registered reranker, the
/// inline rerank stage around the handler (§3.3); hits quarantined when the request started
/// left out (feedback never alters a running retrieve, §7.16); in a session with dedup, hits
/// already returned left out (§7.7.3); packed to `tokenBudget` (§7.7.2); hits finished.
pub(crate) fn retrieve<T: Retrieve>(
    route: &RetrieveRoute<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let p: RetrieveParams = validate::parse(params)?;
    let mut req = validate::retrieve(p, ctx.capabilities(), &mut notes)?;
    let k = req.k;
    // Honoured for every engine (§7.7): what the handler leaves in is cut here.
    let (min_score, include_text) = (req.min_score, req.include_text);
    let handler = Arc::clone(&route.handler);
    let trajectories = Arc::clone(&route.trajectories);
    let reranker = route.reranker.get().cloned();
    let packing = match (req.token_budget, route.counter.get()) {
        (Some(budget), Some(counter)) => {
            let packing = Packing::new(counter.clone(), budget, req.include_text);
            req.include_text = true;
            Some(packing)
        }
        _ => None,
    };
    let quarantined = route.quarantine.snapshot();
    if let Some(b) = &quarantined {
        ctx.leave_out_quarantined(Arc::clone(b));
    }
    Ok(Box::pin(async move {
        let started = Instant::now();
        let step = session_dedup::step(&trajectories, req.session_id.as_deref(), Some(k), ctx.capabilities());
        if let Some(ask) = step.as_ref().and_then(Step::ask) {
            req.k = ask;
            req.candidate_k = req.candidate_k.max(ask);
        }
        let funnel = reranker.as_ref().and_then(|_| stage::plan(&req, &ctx, &mut notes));
        let mut res = match (&reranker, funnel) {
            (Some(reranker), Some(funnel)) => stage::run(&*handler, reranker, req, funnel, &ctx).await?,
            _ => {
                let mut res = handler.retrieve(req, ctx.clone()).await?;
                if let Some(floor) = min_score {
                    below_min_score(&mut res, floor, &mut notes);
                }
                res
            }
        };
        if let Some(quarantined) = quarantined {
            drop_quarantined(&mut res.hits, &quarantined);
        }
        notes.extend(ctx.take_notes());
        if let Some(step) = &step {
            step.exclude(&mut res.hits, &mut res.next_cursor, &mut notes);
        }
        if let Some(packing) = packing {
            dedup_truncate(&mut res.hits, k);
            packing.pack(&mut res, k, &mut notes);
        }
        if let Some(step) = step {
            step.record(&res.hits);
        }
        if !include_text {
            res.hits.iter_mut().for_each(|h| h.text = None);
        }
        finish_retrieve(&mut res, k, notes, started);
        let size = retrieve_size(&res);
        Ok(body_sized(res, size))
    }))
}

/// `embed` (§7.3): batch limit, modalities and encoding validated; vectors checked and encoded.
pub(crate) fn embed<T: Embed>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let cap = ctx.capabilities().embed.clone().unwrap_or_default();
    let (req, encoding) =
        validate::embed(validate::parse(params)?, cap.batch_limit, cap.modalities(), cap.encodings(), &mut notes)?;
    let n = req.inputs.len();
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move {
        let vectors = if n == 0 { Vec::new() } else { handler.embed(req, ctx.clone()).await? };
        notes.extend(ctx.take_notes());
        let (vectors, encoding) = encode_vectors(vectors, n, cap.dimension as usize, &encoding, "vectors")?;
        let size = n * cap.dimension as usize * 12 + 256;
        Ok(body_sized(EmbedResult { vectors, encoding, dimension: Some(cap.dimension), meta: notes_meta(notes) }, size))
    }))
}

/// `embed/multi` (§7.5): like `embed`, one matrix per input.
pub(crate) fn embed_multi<T: MultiVector>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let cap = ctx.capabilities().multi_vector.clone().unwrap_or_default();
    let (req, encoding) =
        validate::embed(validate::parse(params)?, None, cap.modalities(), cap.encodings(), &mut notes)?;
    let n = req.inputs.len();
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move {
        let matrices = if n == 0 { Vec::new() } else { handler.embed_multi(req, ctx.clone()).await? };
        notes.extend(ctx.take_notes());
        check_count(matrices.len(), n, "matrices", "inputs")?;
        let mut out = Vec::with_capacity(n);
        let mut used = None;
        for m in matrices {
            let rows = m.len();
            let (rows, enc) = encode_vectors(m, rows, cap.dimension as usize, &encoding, "matrices")?;
            used = enc;
            out.push(rows);
        }
        let size = out.iter().map(Vec::len).sum::<usize>() * cap.dimension as usize * 12 + 256;
        let result = MultiVectorResult {
            matrices: out,
            dimension: Some(cap.dimension),
            encoding: used,
            meta: notes_meta(notes),
        };
        Ok(body_sized(result, size))
    }))
}

/// `embed/sparse` (§7.4): text inputs only, `kind` checked; every sparse vector well formed
/// and inside the advertised `vocabulary`.
pub(crate) fn embed_sparse<T: SparseEmbed>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: SparseEmbedParams = validate::parse(params)?;
    if p.texts.is_none() && p.inputs.is_none() {
        return Err(RcpError::invalid_params("texts", "missing field `texts`"));
    }
    let mut inputs = p.items().to_vec();
    validate::inputs(&mut inputs, "texts", None, default_modalities())?;
    validate::check_kind(&p.kind)?;
    let vocabulary = ctx.capabilities().sparse_embed.as_ref().and_then(|c| c.vocabulary);
    let req = EmbedRequest { inputs, kind: p.kind, meta: p.meta };
    let n = req.inputs.len();
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move {
        let sparse = if n == 0 { Vec::new() } else { handler.embed_sparse(req, ctx.clone()).await? };
        check_count(sparse.len(), n, "sparse vectors", "inputs")?;
        let outside = |s: &SparseVector| vocabulary.is_some_and(|v| s.indices.iter().any(|&i| u64::from(i) >= v));
        if let Some(bad) = sparse
            .iter()
            .position(|s| s.indices.len() != s.values.len() || s.values.iter().any(|v| !v.is_finite()) || outside(s))
        {
            return Err(RcpError::internal(format!(
                "sparse vector {bad} is malformed (length mismatch, non-finite weight or index outside the vocabulary)"
            )));
        }
        Ok(body(SparseEmbedResult { sparse, meta: notes_meta(ctx.take_notes()) }))
    }))
}

/// `rerank` (§7.6): one score per passage, ordered and cut to `topN` by the framework.
pub(crate) fn rerank<T: Rerank>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let (req, top_n) = validate::rerank(validate::parse(params)?, ctx.capabilities(), &mut notes)?;
    let n = req.passages.len();
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move {
        let started = Instant::now();
        let scores = if n == 0 { Vec::new() } else { handler.rerank(req, ctx.clone()).await? };
        notes.extend(ctx.take_notes());
        check_count(scores.len(), n, "scores", "passages")?;
        Ok(body(finish_rerank(scores, top_n, notes, started)))
    }))
}

/// `query/transform` (§7.8): an advertised method, `n >= 1`.
pub(crate) fn transform<T: Transform>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: TransformParams = validate::parse(params)?;
    let methods = ctx.capabilities().transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or_default();
    validate::one_of("method", &p.method, methods)?;
    validate::at_least_one("n", p.n)?;
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move { Ok(body(handler.transform(p, ctx).await?)) }))
}

/// A `graph` or `feedback` handler with the server's trajectories (present when `session` is
/// enabled, §7.7.3).
pub(crate) type SessionRoute<T> = (Arc<T>, Arc<OnceLock<Trajectories>>);

/// `graph` (§7.9): an advertised op, `k >= 1`, `hops >= 1`; in a session with dedup, hits
/// already returned in the trajectory left out, as `retrieve` does (§7.7.3).
pub(crate) fn graph<T: Graph>(
    (handler, trajectories): &SessionRoute<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut p: GraphParams = validate::parse(params)?;
    let ops = ctx.capabilities().graph.as_ref().map(|g| g.ops.as_slice()).unwrap_or_default();
    validate::one_of("op", &p.op, ops)?;
    validate::at_least_one("k", p.k)?;
    validate::at_least_one("hops", p.hops)?;
    let handler = Arc::clone(handler);
    let trajectories = Arc::clone(trajectories);
    Ok(Box::pin(async move {
        let k = p.k.map(|k| usize::try_from(k).unwrap_or(usize::MAX));
        let step = session_dedup::step(&trajectories, p.session_id.as_deref(), k, ctx.capabilities());
        if let Some(ask) = step.as_ref().and_then(Step::ask) {
            p.k = Some(ask as u64);
        }
        let mut res = handler.graph(p, ctx).await?;
        if let (Some(step), Some(hits)) = (step, res.hits.as_mut()) {
            let mut notes = Vec::new();
            step.exclude(hits, &mut res.next_cursor, &mut notes);
            step.record(hits);
            if !notes.is_empty() {
                res.usage.get_or_insert_with(Default::default).notes.extend(notes);
            }
        }
        Ok(body(res))
    }))
}

/// `index/add` (§7.10): advertised options, unique non-empty ids, one write per idempotency key.
pub(crate) fn index_add<T: Index>(
    (handler, idempotency): &IdempotentIndex<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: IndexAddParams = validate::parse(params)?;
    validate::index_add(&p, ctx.capabilities())?;
    let key = p.meta.as_ref().and_then(|m| m.get("idempotencyKey")).and_then(Value::as_str).map(str::to_owned);
    let expected: Vec<Option<String>> = p.documents.iter().map(|d| d.id.clone()).collect();
    let handler = Arc::clone(handler);
    let add = async move {
        let res = handler.add(p, ctx).await?;
        check_count(res.ids.len(), expected.len(), "ids", "documents")?;
        if let Some(i) = expected.iter().zip(&res.ids).position(|(e, got)| e.as_ref().is_some_and(|e| e != got)) {
            return Err(RcpError::internal(format!("engine returned id '{}' for documents[{i}]", res.ids[i])));
        }
        Ok(res)
    };
    Ok(match key {
        // One write per key: concurrent repeats wait for the first and share its result; a
        // failed write leaves the key free for a retry (§7.10).
        Some(k) => {
            let cell = idempotency.lock().map_err(|_| RcpError::internal("idempotency cache poisoned"))?.cell(k);
            Box::pin(async move { Ok(body(cell.get_or_try_init(|| add).await?.clone())) })
        }
        None => Box::pin(async move { Ok(body(add.await?)) }),
    })
}

/// `index/delete` (§7.11).
pub(crate) fn index_delete<T: Index>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: IndexDeleteParams = validate::parse(params)?;
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move { Ok(body(handler.delete(p, ctx).await?)) }))
}

/// `catalog/list` (§7.13): no params (any sent are ignored).
pub(crate) fn catalog_list<T: Catalog>(
    handler: &Arc<T>,
    _params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move { Ok(body(handler.list(ctx).await?)) }))
}

/// `feedback` (§7.16): every reward in `[-1,1]`; once accepted, a `sessionId` counts its hits
/// as returned in that trajectory (§7.7.3).
pub(crate) fn feedback<T: Feedback>(
    (handler, trajectories): &SessionRoute<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: FeedbackParams = validate::parse(params)?;
    validate::rewards(&p.signals)?;
    let handler = Arc::clone(handler);
    let signalled = session_dedup::feedback(trajectories, ctx.capabilities(), &p);
    let trajectories = Arc::clone(trajectories);
    Ok(Box::pin(async move {
        let res = handler.feedback(p, ctx).await?;
        if let Some(signalled) = signalled {
            signalled.record(&trajectories);
        }
        Ok(body(res))
    }))
}

/// `memory/build` (§7.17): an advertised scope.
pub(crate) fn memory_build<T: Memory>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: MemoryBuildParams = validate::parse(params)?;
    if let Some(scope) = &p.scope {
        let scopes = ctx.capabilities().memory.as_ref().map(|m| m.scopes.as_slice()).unwrap_or_default();
        validate::one_of("scope", scope, scopes)?;
    }
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move { Ok(body(handler.build(p, ctx).await?)) }))
}

/// `memory/recall` (§7.17): `n >= 1`.
pub(crate) fn memory_recall<T: Memory>(
    handler: &Arc<T>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: MemoryRecallParams = validate::parse(params)?;
    validate::at_least_one("n", p.n)?;
    let handler = Arc::clone(handler);
    Ok(Box::pin(async move { Ok(body(handler.recall(p, ctx).await?)) }))
}
/// The `minScore` backstop (§7.7): drops the hits an engine left in below `floor`. A ranking is
/// in descending order, so once a hit of this page falls below the floor nothing on a later
/// page can pass it: the page's `nextCursor` goes too, and no client is sent on to an empty
/// page.
fn below_min_score(res: &mut rcp_wire::RetrieveResult, floor: f64, notes: &mut Vec<String>) {
    let before = res.hits.len();
    res.hits.retain(|h| min_score_scale(h) >= floor);
    if res.hits.len() < before && res.next_cursor.take().is_some() {
        notes.push(format!("minScore {floor} ends the ranking on this page: nextCursor withheld"));
    }
}

/// The score `minScore` is compared with: the reranker's (`scores.rerank`) when a rerank
/// stage scored the hit (the funnel's rule, whoever ran the stage: the framework's inline stage
/// or a handler such as a gateway reranking its fused list), else the hit's `score`.
fn min_score_scale(hit: &rcp_wire::Hit) -> f64 {
    hit.scores.as_ref().and_then(|s| s.get("rerank")).copied().unwrap_or(hit.score)
}
