//! The gateway's rerank stage (§7.7 funnel `candidateK >= rerank.topN >= k`): the registry's
//! reranking entry (its `rerank` key) rescores the top `topN` of the fused list, which is
//! then cut to `k`. Each reranked hit keeps its fused score in `scores.fusion` beside
//! `scores.rerank`, and `score` becomes the two merged (`rerank.fusion`: by default a convex
//! combination of both, min-max normalised; `"none"` keeps the reranker's); `usage.reranked`
//! says how many were rescored. The gateway also serves `rerank` itself by forwarding it to
//! that engine.
//!
//! The funnel's rules (planning, rescoring, the cut, `usage`) are the framework's
//! [`Funnel`], the same an engine gets from `ServerBuilder::rerank_builtin`. The gateway runs
//! the stage itself rather than through `rerank_builtin` for one reason: its reranker is a
//! remote engine that may be optional, and an optional reranker's failure keeps the fused
//! order (a note, the entry in `_meta.degraded`) instead of failing the request.

use std::time::Duration;

use rcp_server::{Funnel, HandlerResult, RequestContext};
use rcp_wire::rerank::RerankParams;
use rcp_wire::{RcpError, RetrieveParams, RetrieveResult};
use serde_json::json;

use super::forward::{trace_meta, unless_cancelled};
use super::startup::Gateway;

impl Gateway {
    /// The funnel of a request (the framework has checked `candidateK >= topN >= k`), or
    /// `None` when the gateway has no reranker or the request says `rerank: false`: the
    /// framework's [`Funnel`], with the registry's method as the default and the fused score
    /// kept as `scores.fusion`.
    pub(super) fn funnel(&self, params: &RetrieveParams, k: usize, candidate_k: usize) -> Option<Funnel> {
        let reranker = self.reranker.as_ref()?;
        let mut funnel = Funnel::plan(params, k, candidate_k, &reranker.method, reranker.capability.max_candidates)?;
        // Rerank, then diversify (§3): the stage runs MMR over the reranked hits.
        funnel.diversify = params.mmr.map(|m| m.lambda);
        Some(funnel.with_first_stage("fusion"))
    }

    /// Reranks the top `funnel.top_n` hits of `fused` and cuts the list to `k`. When the
    /// reranker fails, a required one fails the request; otherwise the fused order is kept,
    /// with a note and the reranker in `_meta.degraded`.
    pub(super) async fn rerank_fused(
        &self,
        mut fused: RetrieveResult,
        params: &RetrieveParams,
        funnel: &Funnel,
        k: usize,
        ctx: &RequestContext,
    ) -> HandlerResult<RetrieveResult> {
        let Some(reranker) = &self.reranker else { return Ok(fused) };
        let spec = &self.pool.entries()[reranker.index].spec;
        let (passages, missing) = funnel.passages(&fused.hits);
        let n = passages.len();
        if missing > 0 {
            fused.note(format!("{missing} reranked hit(s) carry no text or title and were scored as empty passages"));
        }
        let call = RerankParams {
            query: params.query.clone(),
            passages,
            method: Some(funnel.method.clone()),
            model: funnel.model.clone(),
            top_n: None,
            strict: Some(true),
            meta: None,
        };
        match self.call_reranker(reranker.index, call, ctx).await {
            Ok(scores) => {
                fused.note(format!("reranked {n} by '{}' ({})", spec.id, funnel.method));
                funnel.apply(&mut fused, scores, params.min_score);
                return Ok(fused);
            }
            Err(e) if spec.required => {
                let mut err = e;
                err.message = format!("required reranker '{}' failed: {}", spec.id, err.message);
                return Err(err);
            }
            Err(e) => {
                fused.note(format!("reranker '{}' failed: {}; fused order kept", spec.id, e.message));
                let meta = fused.meta.get_or_insert_with(Default::default);
                match meta.get_mut("degraded").and_then(|d| d.as_array_mut()) {
                    Some(list) => list.push(json!(spec.id)),
                    None => {
                        meta.insert("degraded".into(), json!([spec.id]));
                    }
                }
            }
        }
        if let Some(min) = params.min_score {
            fused.hits.retain(|h| h.score >= min);
        }
        fused.hits.truncate(k);
        Ok(fused)
    }

    /// One `rerank` call to the reranking engine, within the request's deadline and
    /// cancelled with it; the scores, one per passage.
    async fn call_reranker(
        &self,
        index: usize,
        call: RerankParams,
        ctx: &RequestContext,
    ) -> Result<Vec<f64>, RcpError> {
        let n = call.passages.len();
        let client = self.relay(ctx).wrap(self.pool.client(index).await.map_err(|e| e.to_rcp())?);
        let budget = self.options.engine_timeout.min(ctx.remaining()).max(Duration::from_millis(1));
        let span = tracing::info_span!("rerank", engine = %self.pool.entries()[index].spec.id, passages = n);
        // The reranker joins the request's trace under this stage's span.
        let call = RerankParams { meta: Some(span.in_scope(|| trace_meta(ctx))), ..call };
        let reply = tracing::Instrument::instrument(tokio::time::timeout(budget, client.rerank(call)), span);
        let result = unless_cancelled(ctx, "rerank", reply).await?;
        let result = result
            .map_err(|_| RcpError::backend_unavailable(format!("no rerank answer within {} ms", budget.as_millis())))?
            .map_err(|e| e.to_rcp())?;
        if result.scores.len() != n {
            return Err(RcpError::backend_unavailable(format!("{} scores for {n} passages", result.scores.len())));
        }
        Ok(result.scores)
    }
}
