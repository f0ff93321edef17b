//! One function per method family: validate the params against the session's capabilities
//! (with `crate::validate`), then return the handler call, whose result is finished and
//! serialised by [`super::finish`]. Gating has already happened in [`super::request`].

use std::sync::{Arc, Mutex};

use rcp_protocol::capabilities::{Capability, default_modalities};
use rcp_protocol::embed::{EmbedResult, MultiVectorResult, SparseEmbedParams, SparseEmbedResult};
use rcp_protocol::feedback::FeedbackParams;
use rcp_protocol::graph::GraphParams;
use rcp_protocol::index::{IndexAddParams, IndexDeleteParams};
use rcp_protocol::memory::{MemoryBuildParams, MemoryRecallParams};
use rcp_protocol::methods::Method;
use rcp_protocol::transform::TransformParams;
use rcp_protocol::{RcpError, RetrieveParams};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::finish::{
    Body, body, body_sized, check_count, encode_vectors, finish_rerank, finish_retrieve, notes_meta, retrieve_size,
};
use crate::context::RequestContext;
use crate::handler::{
    BoxFuture, DynCatalog, DynEmbed, DynFeedback, DynGraph, DynIndex, DynMemory, DynMultiVector, DynRerank,
    DynRetrieve, DynSparseEmbed, DynTransform, EmbedRequest,
};
use crate::server::{IdempotencyCache, Shared};
use crate::validate;

/// A handler call in flight; it yields the finished result, which the dispatcher serialises
/// into the response frame.
pub(super) type Call = BoxFuture<Result<Body, RcpError>>;

/// Routes a gated method to its family: the handler registered for it, validated params.
pub(super) fn call(
    shared: &Shared,
    m: Method,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let h = &shared.handlers;
    match m {
        Method::Retrieve => retrieve(registered(&h.retrieve, m)?, params, ctx),
        Method::Embed => embed(registered(&h.embed, m)?, params, ctx),
        Method::EmbedMulti => embed_multi(registered(&h.multi_vector, m)?, params, ctx),
        Method::EmbedSparse => embed_sparse(registered(&h.sparse_embed, m)?, params, ctx),
        Method::Rerank => rerank(registered(&h.rerank, m)?, params, ctx),
        Method::QueryTransform => transform(registered(&h.transform, m)?, params, ctx),
        Method::Graph => graph(registered(&h.graph, m)?, params, ctx),
        Method::IndexAdd => index_add(registered(&h.index, m)?, &shared.idempotency, params, ctx),
        Method::IndexDelete => index_delete(registered(&h.index, m)?, params, ctx),
        Method::CatalogList => catalog_list(registered(&h.catalog, m)?, ctx),
        Method::Feedback => feedback(registered(&h.feedback, m)?, params, ctx),
        Method::MemoryBuild => memory_build(registered(&h.memory, m)?, params, ctx),
        Method::MemoryRecall => memory_recall(registered(&h.memory, m)?, params, ctx),
        Method::Initialize | Method::Info | Method::Ping | Method::Shutdown => {
            Err(RcpError::internal("lifecycle method routed to a handler"))
        }
    }
}

/// The handler registered for `m`; absent only if a profile advertised what nobody registered.
fn registered<T: ?Sized>(handler: &Option<Arc<T>>, m: Method) -> Result<Arc<T>, RcpError> {
    handler.clone().ok_or_else(|| RcpError::capability_missing(m.name(), m.capability().map_or("?", Capability::key)))
}

/// `retrieve` (§7.7): funnel, options and filter validated; hits finished.
fn retrieve(handler: Arc<dyn DynRetrieve>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let p: RetrieveParams = validate::parse(params)?;
    let req = validate::retrieve(p, ctx.capabilities(), &mut notes)?;
    let k = req.k;
    Ok(Box::pin(async move {
        let started = Instant::now();
        let mut res = handler.retrieve(req, ctx.clone()).await?;
        notes.extend(ctx.take_notes());
        finish_retrieve(&mut res, k, notes, started);
        let size = retrieve_size(&res);
        Ok(body_sized(res, size))
    }))
}

/// `embed` (§7.3): batch limit, modalities and encoding validated; vectors checked and encoded.
fn embed(handler: Arc<dyn DynEmbed>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let cap = ctx.capabilities().embed.clone().unwrap_or_default();
    let (req, encoding) =
        validate::embed(validate::parse(params)?, cap.batch_limit, cap.modalities(), cap.encodings(), &mut notes)?;
    let n = req.inputs.len();
    Ok(Box::pin(async move {
        let vectors = if n == 0 { Vec::new() } else { handler.embed(req, ctx.clone()).await? };
        notes.extend(ctx.take_notes());
        let (vectors, encoding) = encode_vectors(vectors, n, cap.dimension as usize, &encoding, "vectors")?;
        let size = n * cap.dimension as usize * 12 + 256;
        Ok(body_sized(EmbedResult { vectors, encoding, dimension: Some(cap.dimension), meta: notes_meta(notes) }, size))
    }))
}

/// `embed/multi` (§7.5): like `embed`, one matrix per input.
fn embed_multi(
    handler: Arc<dyn DynMultiVector>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let cap = ctx.capabilities().multi_vector.clone().unwrap_or_default();
    let (req, encoding) =
        validate::embed(validate::parse(params)?, None, cap.modalities(), cap.encodings(), &mut notes)?;
    let n = req.inputs.len();
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

/// `embed/sparse` (§7.4): text inputs only; every sparse vector well formed.
fn embed_sparse(
    handler: Arc<dyn DynSparseEmbed>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: SparseEmbedParams = validate::parse(params)?;
    if p.texts.is_none() && p.inputs.is_none() {
        return Err(RcpError::invalid_params("texts", "missing field `texts`"));
    }
    validate::inputs(p.items(), "texts", None, default_modalities())?;
    let req = EmbedRequest { inputs: p.items().to_vec(), kind: p.kind, meta: p.meta };
    let n = req.inputs.len();
    Ok(Box::pin(async move {
        let sparse = if n == 0 { Vec::new() } else { handler.embed_sparse(req, ctx.clone()).await? };
        check_count(sparse.len(), n, "sparse vectors", "inputs")?;
        if let Some(bad) =
            sparse.iter().position(|s| s.indices.len() != s.values.len() || s.values.iter().any(|v| !v.is_finite()))
        {
            return Err(RcpError::internal(format!(
                "sparse vector {bad} is malformed (length mismatch or non-finite weight)"
            )));
        }
        Ok(body(SparseEmbedResult { sparse, meta: notes_meta(ctx.take_notes()) }))
    }))
}

/// `rerank` (§7.6): one score per passage, ordered and cut to `topN` by the framework.
fn rerank(handler: Arc<dyn DynRerank>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let mut notes = Vec::new();
    let (req, top_n) = validate::rerank(validate::parse(params)?, ctx.capabilities(), &mut notes)?;
    let n = req.passages.len();
    Ok(Box::pin(async move {
        let started = Instant::now();
        let scores = if n == 0 { Vec::new() } else { handler.rerank(req, ctx.clone()).await? };
        notes.extend(ctx.take_notes());
        check_count(scores.len(), n, "scores", "passages")?;
        Ok(body(finish_rerank(scores, top_n, notes, started)))
    }))
}

/// `query/transform` (§7.8): an advertised method, `n >= 1`.
fn transform(handler: Arc<dyn DynTransform>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let p: TransformParams = validate::parse(params)?;
    let methods = ctx.capabilities().transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or_default();
    validate::one_of("method", &p.method, methods)?;
    validate::at_least_one("n", p.n)?;
    Ok(Box::pin(async move { Ok(body(handler.transform(p, ctx).await?)) }))
}

/// `graph` (§7.9): an advertised op, `k >= 1`, `hops >= 1`.
fn graph(handler: Arc<dyn DynGraph>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let p: GraphParams = validate::parse(params)?;
    let ops = ctx.capabilities().graph.as_ref().map(|g| g.ops.as_slice()).unwrap_or_default();
    validate::one_of("op", &p.op, ops)?;
    validate::at_least_one("k", p.k)?;
    validate::at_least_one("hops", p.hops)?;
    Ok(Box::pin(async move { Ok(body(handler.graph(p, ctx).await?)) }))
}

/// `index/add` (§7.10): advertised options, unique non-empty ids, one write per idempotency key.
fn index_add(
    handler: Arc<dyn DynIndex>,
    idempotency: &Mutex<IdempotencyCache>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: IndexAddParams = validate::parse(params)?;
    validate::index_add(&p, ctx.capabilities())?;
    let key = p.meta.as_ref().and_then(|m| m.get("idempotencyKey")).and_then(Value::as_str).map(str::to_owned);
    let expected: Vec<Option<String>> = p.documents.iter().map(|d| d.id.clone()).collect();
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
fn index_delete(handler: Arc<dyn DynIndex>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let p: IndexDeleteParams = validate::parse(params)?;
    Ok(Box::pin(async move { Ok(body(handler.delete(p, ctx).await?)) }))
}

/// `catalog/list` (§7.13): no params.
fn catalog_list(handler: Arc<dyn DynCatalog>, ctx: RequestContext) -> Result<Call, RcpError> {
    Ok(Box::pin(async move { Ok(body(handler.list(ctx).await?)) }))
}

/// `feedback` (§7.16): every reward in `[-1,1]`.
fn feedback(handler: Arc<dyn DynFeedback>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let p: FeedbackParams = validate::parse(params)?;
    validate::rewards(&p.signals)?;
    Ok(Box::pin(async move { Ok(body(handler.feedback(p, ctx).await?)) }))
}

/// `memory/build` (§7.17): an advertised scope.
fn memory_build(handler: Arc<dyn DynMemory>, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
    let p: MemoryBuildParams = validate::parse(params)?;
    if let Some(scope) = &p.scope {
        let scopes = ctx.capabilities().memory.as_ref().map(|m| m.scopes.as_slice()).unwrap_or_default();
        validate::one_of("scope", scope, scopes)?;
    }
    Ok(Box::pin(async move { Ok(body(handler.build(p, ctx).await?)) }))
}

/// `memory/recall` (§7.17): `n >= 1`.
fn memory_recall(
    handler: Arc<dyn DynMemory>,
    params: Option<&RawValue>,
    ctx: RequestContext,
) -> Result<Call, RcpError> {
    let p: MemoryRecallParams = validate::parse(params)?;
    validate::at_least_one("n", p.n)?;
    Ok(Box::pin(async move { Ok(body(handler.recall(p, ctx).await?)) }))
}
