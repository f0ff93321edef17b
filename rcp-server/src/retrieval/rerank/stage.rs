//! The inline rerank stage the framework runs around an engine's `retrieve` handler once the
//! engine registers a reranker with
//! [`ServerBuilder::rerank_builtin`](crate::ServerBuilder::rerank_builtin): recall asks the
//! handler for `candidateK` hits (texts included, `minScore` held back for the reranker's
//! scale), the registered [`Rerank`] handler scores the top `topN` (or, when the request's
//! deadline cannot fit them at the method's measured cost, the best that fit: see
//! [`super::deadline`]), and [`Funnel::apply`] returns the best `k`. A rescored hit's
//! `confidence` becomes the reranker's calibrated probability ([`Rerank::confidence`]) when the
//! reranker has a map for its method; otherwise the first stage's stays.

use std::sync::Arc;

use rcp_wire::retrieve::RerankOption;
use rcp_wire::{InputItem, RcpError, RetrieveResult};

use super::Funnel;
use super::deadline::{self, RerankCosts};
use crate::handler::context::RequestContext;
use crate::handler::{BoxFuture, HandlerResult, Rerank, RerankRequest, Retrieve, RetrieveRequest};

/// A reranker's `rerank` call, its handler's type erased.
type RerankCall = Arc<dyn Fn(RerankRequest, RequestContext) -> BoxFuture<HandlerResult<Vec<f64>>> + Send + Sync>;

/// A reranker's confidence map ([`Rerank::confidence`]), its handler's type erased.
type ConfidenceMap = Arc<dyn Fn(&str, f64) -> Option<f64> + Send + Sync>;

/// A registered reranker, its type erased so that the `retrieve` route does not depend on it,
/// with what its methods have cost per passage in this server (one estimator per registration,
/// so per server; clones share it).
#[derive(Clone)]
pub(crate) struct Reranker {
    call: RerankCall,
    confidence: ConfidenceMap,
    costs: Arc<RerankCosts>,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker").field("costs", &self.costs).finish_non_exhaustive()
    }
}

/// `handler` behind the erased [`Reranker`] type, with no cost measured yet.
pub(crate) fn erase<T: Rerank>(handler: Arc<T>) -> Reranker {
    let mapped = Arc::clone(&handler);
    Reranker {
        call: Arc::new(move |req, ctx| {
            let h = Arc::clone(&handler);
            Box::pin(async move { h.rerank(req, ctx).await })
        }),
        confidence: Arc::new(move |method, score| T::confidence(&mapped, method, score)),
        costs: Arc::default(),
    }
}

/// The funnel of `req` for the session's `rerank` capability, or `None` (no stage: `rerank:
/// false`, a `cursor`, or a query without text, noted in `notes`).
pub(crate) fn plan(req: &RetrieveRequest, ctx: &RequestContext, notes: &mut Vec<String>) -> Option<Funnel> {
    let rc = ctx.capabilities().rerank.clone().unwrap_or_default();
    let funnel = Funnel::plan_request(req, rcp_wire::gating::default_rerank_method(&rc), rc.max_candidates)?;
    if req.query.modality() != "text" || req.query.text().trim().is_empty() {
        notes.push("not reranked: the reranker scores text queries only".into());
        return None;
    }
    Some(funnel)
}

/// Runs recall through `handler`, then the rerank stage of `funnel` through `reranker`.
pub(crate) async fn run<T: Retrieve>(
    handler: &T,
    reranker: &Reranker,
    mut req: RetrieveRequest,
    mut funnel: Funnel,
    ctx: &RequestContext,
) -> HandlerResult<RetrieveResult> {
    let query = req.query.clone();
    let min_score = req.min_score.take();
    let include_text = req.include_text;
    let include_vectors = req.include_vectors;
    // MMR diversifies the reranked hits (rerank, then diversify: §3), with the hits' vectors.
    if let Some(m) = req.mmr.take() {
        funnel.diversify = Some(m.lambda);
        req.include_vectors = true;
    }
    // The handler recalls; the framework reranks (a forwarded request says `rerank: false`).
    req.passthrough.rerank = Some(RerankOption::Enabled(false));
    req.include_text = true;
    req.k = funnel.candidates;
    req.candidate_k = req.candidate_k.max(funnel.candidates);
    let mut res = handler.retrieve(req, ctx.clone()).await?;
    funnel.title_field = handler.title_field().to_owned();
    let (mut passages, _) = funnel.passages(&res.hits);
    let planned = passages.len();
    let cost = reranker.costs.estimate(&funnel.method);
    let left = ctx.remaining();
    let n = deadline::affordable(planned, left, cost);
    passages.truncate(n);
    if let Some(cost) = cost.filter(|_| n < planned) {
        if n == 0 {
            reranker.costs.ease(&funnel.method);
        }
        let ms = cost.as_secs_f64() * 1e3;
        res.note(if n == 0 {
            format!(
                "not reranked, to meet the deadline: {planned} candidates at ~{ms:.0} ms per passage do not fit \
                 the {} ms left; first-stage order kept",
                left.as_millis()
            )
        } else {
            format!(
                "reranked {n} of {planned} candidates to meet the deadline (~{ms:.0} ms per passage); the rest \
                 follow in first-stage order"
            )
        });
    }
    let missing = passages.iter().filter(|p| matches!(p, InputItem::Text(t) if t.is_empty())).count();
    if missing > 0 {
        res.note(format!("{missing} reranked hit(s) carry no text or title and were scored as empty passages"));
    }
    let scores = if n == 0 {
        Vec::new()
    } else {
        let call =
            RerankRequest { query, passages, method: funnel.method.clone(), model: funnel.model.clone(), meta: None };
        let timing = reranker.costs.time(&funnel.method, n);
        let span = tracing::info_span!("rerank", method = %funnel.method, passages = n);
        match tracing::Instrument::instrument((reranker.call)(call, ctx.clone()), span).await {
            Ok(scores) => {
                timing.finish();
                scores
            }
            Err(e) => {
                timing.abandon();
                return Err(e);
            }
        }
    };
    if scores.len() != n {
        return Err(RcpError::internal(format!("reranker returned {} scores for {n} passages", scores.len())));
    }
    if res.next_cursor.take().is_some() {
        res.note("reranked results are not paginated: nextCursor withheld");
    }
    funnel.apply(&mut res, scores, min_score);
    for h in &mut res.hits {
        // A rescored hit's confidence is its reranker's calibrated reading, when it has one.
        let rescored = h.scores.as_ref().and_then(|s| s.get("rerank")).copied();
        if let Some(c) = rescored.and_then(|s| (reranker.confidence)(&funnel.method, s)).filter(|c| c.is_finite()) {
            h.confidence = Some(c.clamp(0.0, 1.0));
        }
        if !include_text {
            h.text = None;
        }
        if !include_vectors {
            h.vector = None;
        }
    }
    Ok(res)
}
