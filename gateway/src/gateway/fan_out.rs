//! A federated `retrieve` (§16.2): loop detection and the hop budget, which collections are
//! asked, what each engine is sent (its plan), and the fan-out itself — rcp-client's
//! [`FanOut`], under the request's deadline and cancellation, relaying progress.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rcp_client::Client;
use rcp_client::federation::{
    FanOut, Gathered, ProgressSink, Reply, RequiredFailed, Snapshot, Target, diversify_fused, mmr_pool,
};
use rcp_server::access::Scope;
use rcp_server::{HandlerResult, Honours, RequestContext, Retrieve, RetrieveRequest};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::filter::FilterCapability;
use rcp_wire::retrieve::RerankOption;
use rcp_wire::{RcpError, RetrieveParams, RetrieveResult};

use super::forward::{Onward, unless_cancelled};
use super::fusion::empty_result;
use super::limits;
use super::pages;
use super::startup::{Gateway, META_COLLECTIONS};
use crate::hop::Hop;

impl Gateway {
    /// Serves one federated `retrieve` (§16.2): loop detection, fan-out with per-engine
    /// deadlines, shard merge, fusion of collections.
    pub(super) async fn federated_retrieve(
        &self,
        req: RetrieveRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<RetrieveResult> {
        let started = Instant::now();
        let params = req.to_params();
        let k = req.k.max(1);
        // The page: from the cursor's offset, with one hit more than the page to tell whether
        // another page follows.
        let offset = pages::offset(&params)?;
        let want = offset + k + 1;
        // With a rerank stage, recall and fusion keep `candidateK` hits for the reranker; with
        // `mmr` (and no rerank stage, which diversifies its own output), the pool MMR picks from.
        let funnel = self.funnel(&params, k, req.candidate_k.max(k));
        let pool = if params.mmr.is_some() { mmr_pool(&params) } else { want };
        let recall = funnel.as_ref().map_or(pool, |f| f.candidates);
        limits::check(&params)?;
        let wanted = limits::collections(&params)?;
        let mut notes: Vec<String> = Vec::new();
        let next = match self.onward(params.meta.as_ref())? {
            Onward::Next(next) => next,
            Onward::Stop(why) => {
                notes.push(why);
                return Ok(empty_result(notes, &[], started));
            }
        };
        // A caller limited to some collections is never told which others exist: a name it may
        // not read, known or not, is one with no hits (§15.6).
        let grant = ctx.grant();
        if let Some(w) = &wanted
            && grant.collections(Scope::Read).is_none()
            && let Some(unknown) = w.iter().find(|n| !self.collections.iter().any(|c| c.name == **n))
        {
            return Err(RcpError::invalid_params(
                format!("_meta.{META_COLLECTIONS}"),
                format!("unknown collection '{unknown}'; the gateway has: {}", self.collections().join(", ")),
            ));
        }
        let budget = self.engine_budget(ctx);

        let targets: Vec<usize> = self
            .granted_collections(grant, Scope::Read)
            .filter(|c| wanted.as_ref().is_none_or(|w| w.contains(&c.name.as_str())))
            .flat_map(|c| c.shards.iter().copied())
            .collect();
        // Connect concurrently first: a dead engine costs one connect timeout, not one each.
        let relay = self.relay(ctx);
        let clients = futures::future::join_all(targets.iter().map(|i| self.pool.client(*i))).await;
        let targets = targets
            .into_iter()
            .zip(clients)
            .map(|(index, client)| {
                let spec = &self.pool.entries()[index].spec;
                Target {
                    key: index,
                    id: spec.id.clone(),
                    required: spec.required,
                    client: client.map(|c| relay.wrap(c)),
                }
            })
            .collect();
        let progress = ctx.wants_progress().then(|| {
            let ctx = ctx.clone();
            Arc::new(move |fraction: f64, stage: &str, message: String| ctx.progress(fraction, stage, message))
                as ProgressSink
        });
        let fan_out = FanOut { timeout: budget, progress };
        // A pinned `indexVersion` names each engine's own snapshot (§7.7.1).
        let pin = params.index_version.as_deref().map(Snapshot::parse).transpose()?;
        let gathered = fan_out.run(targets, |index, client| match self.skip_reason(client, &params, &next) {
            Some(reason) => Err(reason),
            None => {
                let mut p = self.engine_params(client, &params, recall as u64, (&next, budget, ctx), funnel.is_some());
                if let Some(pin) = &pin {
                    pin.pin(&self.pool.entries()[*index].spec.id, &mut p);
                }
                Ok(p)
            }
        });
        // Dropping the pending calls (cancellation, or this future being dropped by the
        // framework) drops their client futures, which cancels them downstream (§7.14).
        let gathered: Gathered<usize> = unless_cancelled(ctx, "downstream calls", gathered).await?.map_err(
            |RequiredFailed { id, error, .. }| {
                let mut err = error.to_rcp();
                // A transport failure has no error object of its own: its cause goes in
                // `error.data.detail`, as an engine's own error carries it.
                if err.data.as_ref().is_none_or(|d| d.detail.is_none()) {
                    err = err.with_detail(error.to_string());
                }
                err.message = format!("required engine '{id}' failed: {}", err.message);
                err
            },
        )?;
        let Some(funnel) = funnel else {
            notes.extend(unreranked(&params, &gathered));
            let mut fused = self.fuse(gathered, notes, started, &params, pin.as_ref(), pool)?;
            // Pages of a diversified ranking end with its pool (`mmr_pool`).
            let (hits, mmr_note) = diversify_fused(std::mem::take(&mut fused.hits), &params, want.min(pool));
            fused.hits = hits;
            if let Some(n) = mmr_note {
                fused.note(n);
            }
            return Ok(pages::page(fused, &params, offset, k));
        };
        // `minScore` is on the reranker's scale then: applied after the rerank.
        let unfloored = RetrieveParams { min_score: None, ..params.clone() };
        let fused = self.fuse(gathered, notes, started, &unfloored, pin.as_ref(), recall)?;
        let mut result = self.rerank_fused(fused, &params, &funnel, k, ctx).await?;
        if params.include_vectors != Some(true) {
            // Asked of the engines for the stage's MMR only.
            result.hits.iter_mut().for_each(|h| h.vector = None);
        }
        if let Some(u) = result.usage.as_mut() {
            u.latency_ms = Some(started.elapsed().as_millis() as u64);
        }
        Ok(result)
    }

    /// Why `client` is not asked: the federation's rule (`unsuited`: no `retrieve`, `filter` or
    /// `unit`), it lacks the requested mode, or it is an aggregator already on the federation
    /// path.
    fn skip_reason(&self, client: &Client, params: &RetrieveParams, next: &Hop) -> Option<String> {
        let caps = client.capabilities();
        let name = client.server_info().map(|i| i.server.name.clone()).unwrap_or_default();
        if next.visited(&name) {
            return Some(format!("'{name}' is already on the federation path (cycle)"));
        }
        if let Some(why) = rcp_client::federation::unsuited(&caps, params) {
            return Some(why);
        }
        let rc = caps.retrieve.as_ref()?;
        if let Some(mode) = &params.mode
            && !offers_mode(rc, mode)
            && !self.is_default_mode(mode)
        {
            return Some(format!("does not offer mode '{mode}'"));
        }
        None
    }

    /// Whether `mode` is the gateway's default mode. The framework fills an absent `mode` with
    /// it before the handler runs, so a request carrying it may not have asked for any mode:
    /// engines without it run their own default instead of being skipped.
    fn is_default_mode(&self, mode: &rcp_wire::Mode) -> bool {
        let rc = self.retrieval.as_ref().map(|f| &f.retrieve);
        let default = rc.and_then(|r| r.default_mode());
        default == Some(mode)
    }

    /// The params one engine receives: `k` raised for fusion headroom (within its `maxK`), the
    /// forwarded hop budget, a strictly smaller deadline, the caller's log level and trace id (`onward`),
    /// and only the options it advertises; no `rerank` when the gateway reranks the fused list
    /// itself.
    fn engine_params(
        &self,
        client: &Client,
        params: &RetrieveParams,
        k: u64,
        onward: (&Hop, Duration, &RequestContext),
        reranked_here: bool,
    ) -> RetrieveParams {
        let (next, budget, ctx) = onward;
        let rc = client.capabilities().retrieve.clone().unwrap_or_default();
        let mut p = rcp_client::federation::engine_params(params, &rc, k, self.options.k_multiplier);
        if reranked_here {
            p.rerank = None;
        }
        // `minScore` is on the gateway's (fused) scale, applied after fusion.
        p.min_score = None;
        p.meta = Some(self.forwarded_meta(params.meta.as_ref(), next, budget, ctx));
        p
    }
}

/// With no rerank stage of the gateway's own, an inline `rerank` is run by the engines with a
/// built-in one, each over its own candidates: a note names the engines asked whose hits are
/// fused as they retrieved them.
fn unreranked(params: &RetrieveParams, gathered: &Gathered<usize>) -> Option<String> {
    if matches!(params.rerank, None | Some(RerankOption::Enabled(false))) {
        return None;
    }
    let answered = |key: &usize| gathered.replies.iter().any(|(k, r)| k == key && matches!(r, Reply::Answered { .. }));
    let plain: Vec<&str> = gathered
        .clients
        .iter()
        .filter(|(key, c)| answered(key) && c.capabilities().retrieve.is_none_or(|r| r.rerank_builtin != Some(true)))
        .map(|(_, c)| c.label())
        .collect();
    (!plain.is_empty()).then(|| {
        format!(
            "rerank: engine(s) {} have no built-in rerank; their hits are fused unreranked",
            plain.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(", ")
        )
    })
}

fn offers_mode(rc: &RetrieveCapability, mode: &rcp_wire::Mode) -> bool {
    rc.modes().contains(mode)
}

impl Retrieve for Gateway {
    fn capability(&self) -> RetrieveCapability {
        self.retrieval.as_ref().map(|f| f.retrieve.clone()).unwrap_or_default()
    }

    fn filter(&self) -> Option<FilterCapability> {
        self.retrieval.as_ref().and_then(|f| f.filter.clone())
    }

    fn citations(&self) -> bool {
        self.retrieval.as_ref().is_some_and(|f| f.citations)
    }

    /// The gateway's own cursor over its fused list (`g1.<offset>.<fingerprint>`).
    fn pagination(&self) -> bool {
        true
    }

    /// What every engine honours (`recency`, `includeVectors`) is forwarded to each and kept
    /// through fusion; the rule is the federation's (`federate_retrieve`).
    fn honours(&self) -> Honours {
        Honours::from_names(self.retrieval.as_ref().map(|f| f.retrieve.honours()).unwrap_or_default())
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        self.federated_retrieve(req, &ctx).await
    }
}
