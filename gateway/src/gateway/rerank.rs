//! The gateway's rerank stage (§7.7 funnel `candidateK >= rerank.topN >= k`): the registry's
//! reranking entry (its `rerank` key) rescores the top `topN` of the fused list, which is
//! then cut to `k`. Each reranked hit keeps its fused score in `scores.fusion` beside
//! `scores.rerank`, and `score` becomes the reranker's; `usage.reranked` says how many were
//! rescored. The gateway also serves `rerank` itself by forwarding it to that engine.

use std::time::Duration;

use rcp_protocol::capabilities::RerankCapability;
use rcp_protocol::rerank::RerankParams;
use rcp_protocol::retrieve::RerankOption;
use rcp_protocol::{Hit, InputItem, RcpError, RetrieveParams, RetrieveResult};
use rcp_server::{HandlerResult, RequestContext, Rerank, RerankRequest};
use serde_json::json;

use super::startup::Gateway;

/// How one `retrieve` is reranked: how many fused candidates the recall stage keeps, and
/// which of them the reranker rescores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Funnel {
    /// Fused candidates kept (`candidateK`).
    pub(super) candidates: usize,
    /// Candidates rescored (`rerank.topN`, at most the reranker's `maxCandidates`).
    pub(super) top_n: usize,
    /// The method asked of the reranker.
    pub(super) method: String,
    /// The model asked of the reranker, if the request names one.
    pub(super) model: Option<String>,
}

impl Gateway {
    /// The funnel of a request (the framework has checked `candidateK >= topN >= k`), or
    /// `None` when the gateway has no reranker or the request says `rerank: false`.
    pub(super) fn funnel(&self, params: &RetrieveParams, k: usize, candidate_k: usize) -> Option<Funnel> {
        let reranker = self.reranker.as_ref()?;
        let stage = match &params.rerank {
            Some(RerankOption::Enabled(false)) => return None,
            Some(RerankOption::Stage(s)) => s.clone(),
            Some(RerankOption::Enabled(true)) | None => Default::default(),
        };
        let top_n = stage.top_n.map_or(candidate_k, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let top_n = top_n.min(reranker.ceiling()).max(k);
        Some(Funnel {
            candidates: candidate_k.max(top_n),
            top_n,
            method: stage.method.unwrap_or_else(|| reranker.method.clone()),
            model: stage.model,
        })
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
        let n = funnel.top_n.min(fused.hits.len());
        let usage = fused.usage.get_or_insert_with(Default::default);
        let missing = fused.hits[..n].iter().filter(|h| h.text.is_none()).count();
        if missing > 0 {
            usage.notes.push(format!("{missing} reranked hit(s) carry no text and were scored as empty passages"));
        }
        let passages: Vec<InputItem> =
            fused.hits[..n].iter().map(|h| InputItem::Text(h.text.clone().unwrap_or_default())).collect();
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
                let mut head: Vec<Hit> = fused.hits.drain(..n).zip(scores).map(|(h, s)| rescored(h, s)).collect();
                // Stable: equal rerank scores keep their fused order.
                head.sort_by(|a, b| b.score.total_cmp(&a.score));
                fused.hits = head;
                usage.reranked = Some(n as u64);
                usage.notes.push(format!("reranked {n} by '{}' ({})", spec.id, funnel.method));
            }
            Err(e) if spec.required => {
                let mut err = e;
                err.message = format!("required reranker '{}' failed: {}", spec.id, err.message);
                return Err(err);
            }
            Err(e) => {
                usage.notes.push(format!("reranker '{}' failed: {}; fused order kept", spec.id, e.message));
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
        let client = self.pool.client(index).await.map_err(|e| e.to_rcp())?;
        let budget = self.options.engine_timeout.min(ctx.remaining()).max(Duration::from_millis(1));
        let cancelled = ctx.cancellation().clone();
        let result = tokio::select! {
            () = cancelled.cancelled() => return Err(RcpError::cancelled(Some("cancelled by the client; rerank cancelled"))),
            r = tokio::time::timeout(budget, client.rerank(call)) => r,
        };
        let result = result
            .map_err(|_| RcpError::backend_unavailable(format!("no rerank answer within {} ms", budget.as_millis())))?
            .map_err(|e| e.to_rcp())?;
        if result.scores.len() != n {
            return Err(RcpError::backend_unavailable(format!("{} scores for {n} passages", result.scores.len())));
        }
        Ok(result.scores)
    }
}

/// `hit` with the reranker's `score`, its fused score kept in `scores.fusion`.
fn rescored(mut hit: Hit, score: f64) -> Hit {
    let scores = hit.scores.get_or_insert_with(Default::default);
    scores.insert("fusion".into(), hit.score);
    scores.insert("rerank".into(), score);
    hit.score = score;
    hit
}

/// `rerank` on the gateway: forwarded to the reranking entry.
impl Rerank for Gateway {
    fn capability(&self) -> RerankCapability {
        self.reranker.as_ref().map(|r| r.capability.clone()).unwrap_or_default()
    }

    async fn rerank(&self, req: RerankRequest, ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        let Some(reranker) = &self.reranker else {
            return Err(RcpError::backend_unavailable("the gateway has no reranker"));
        };
        let call = RerankParams {
            query: req.query,
            passages: req.passages,
            method: Some(req.method),
            model: req.model,
            top_n: None,
            strict: Some(true),
            meta: None,
        };
        self.call_reranker(reranker.index, call, &ctx).await
    }
}
