//! Calls routed to one engine (§16.4): `embed`, `embed/sparse`, `embed/multi`, `rerank`,
//! `query/transform` and `memory/build` go to the engine named in `_meta.engine`, else to the
//! capable engine of highest registry priority ([`route_one`]). When that engine cannot be
//! reached or does not answer in time, the next engine serving the same model takes the call
//! (a note names both); an engine's own refusal is the answer. Every answer's notes name the
//! engine that served it.

use std::future::Future;

use rcp_client::federation::exec::{Engines, call_routed};
use rcp_client::federation::route::{Need, chosen_engine};
use rcp_client::{Client, ClientError, EngineSpec};
use rcp_server::{
    EmbedRequest, HandlerResult, MultiVector, RequestContext, Rerank, RerankRequest, SparseEmbed, Transform,
};
use rcp_wire::capabilities::{
    Capabilities, EmbedCapability, MultiVectorCapability, RerankCapability, SparseEmbedCapability, TransformCapability,
};
use rcp_wire::embed::{EmbedParams, SparseEmbedParams, SparseVector};
use rcp_wire::methods::Method;
use rcp_wire::request;
use rcp_wire::rerank::RerankParams;
use rcp_wire::transform::{TransformParams, TransformResult};
use rcp_wire::{Meta, RcpError};

use super::forward::unless_cancelled;
use super::startup::Gateway;

impl Engines for Gateway {
    fn count(&self) -> usize {
        self.pool.entries().len()
    }

    fn spec(&self, index: usize) -> &EngineSpec {
        &self.pool.entries()[index].spec
    }

    fn capabilities(&self, index: usize) -> Option<&Capabilities> {
        self.engine_caps.get(index).and_then(Option::as_ref)
    }

    /// A shard's ids are its collection's.
    fn namespace(&self, index: usize) -> Option<usize> {
        self.namespace_of(index)
    }

    fn client(&self, index: usize) -> impl Future<Output = Result<Client, ClientError>> + Send {
        self.pool.client(index)
    }
}

impl Gateway {
    /// Runs a routed call ([`call_routed`]) within the request: to `chosen` (a registry id)
    /// when given, else by the routing rules; `call` is given the engine's client and the
    /// `_meta` to send (hop, deadline). Cancelled with the request; the engine that served
    /// and any failover are noted. Returns the answer and the engine's registry index.
    pub(super) async fn routed<R, Fut>(
        &self,
        need: Need<'_>,
        chosen: Option<&str>,
        meta: Option<&Meta>,
        ctx: &RequestContext,
        call: impl Fn(Client, Meta) -> Fut,
    ) -> HandlerResult<(R, usize)>
    where
        Fut: Future<Output = Result<R, ClientError>>,
    {
        let (relay, forwarded, budget) = self.onward_engines(meta, ctx)?;
        let served = call_routed(&relay, need, chosen, budget, |client| call(client, forwarded.clone()));
        let served = unless_cancelled(ctx, "the engine's call", served).await??;
        for n in served.notes {
            ctx.note(n);
        }
        Ok((served.answer, served.index))
    }
}

impl rcp_server::Embed for Gateway {
    fn capability(&self) -> EmbedCapability {
        self.federated.capabilities.embed.clone().unwrap_or_default()
    }

    async fn embed(&self, req: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        let meta = req.meta.clone();
        let (vectors, _) = self
            .routed(Need::Method(Method::Embed), chosen_engine(meta.as_ref())?, meta.as_ref(), &ctx, |client, meta| {
                let params = EmbedParams {
                    inputs: Some(req.inputs.clone()),
                    kind: req.kind.clone(),
                    meta: Some(meta),
                    ..EmbedParams::default()
                };
                async move { client.embed(params).await }
            })
            .await?;
        Ok(vectors)
    }
}

impl SparseEmbed for Gateway {
    fn capability(&self) -> SparseEmbedCapability {
        self.federated.capabilities.sparse_embed.clone().unwrap_or_default()
    }

    async fn embed_sparse(&self, req: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<SparseVector>> {
        let meta = req.meta.clone();
        let (result, _) = self
            .routed(
                Need::Method(Method::EmbedSparse),
                chosen_engine(meta.as_ref())?,
                meta.as_ref(),
                &ctx,
                |client, meta| {
                    let params = SparseEmbedParams {
                        inputs: Some(req.inputs.clone()),
                        kind: req.kind.clone(),
                        meta: Some(meta),
                        ..SparseEmbedParams::default()
                    };
                    async move { client.request::<request::EmbedSparse>(&params).await }
                },
            )
            .await?;
        Ok(result.sparse)
    }
}

impl MultiVector for Gateway {
    fn capability(&self) -> MultiVectorCapability {
        self.federated.capabilities.multi_vector.clone().unwrap_or_default()
    }

    async fn embed_multi(&self, req: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<Vec<Vec<f32>>>> {
        let meta = req.meta.clone();
        let (matrices, _) = self
            .routed(
                Need::Method(Method::EmbedMulti),
                chosen_engine(meta.as_ref())?,
                meta.as_ref(),
                &ctx,
                |client, meta| {
                    let params = EmbedParams {
                        inputs: Some(req.inputs.clone()),
                        kind: req.kind.clone(),
                        meta: Some(meta),
                        ..EmbedParams::default()
                    };
                    async move { client.embed_multi(params).await }
                },
            )
            .await?;
        Ok(matrices)
    }
}

/// `rerank` on the gateway: routed by method to an engine offering it. The scores are the
/// engine's, so the order the framework builds from them is the engine's own.
impl Rerank for Gateway {
    fn capability(&self) -> RerankCapability {
        self.federated.capabilities.rerank.clone().unwrap_or_default()
    }

    async fn rerank(&self, req: RerankRequest, ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        let n = req.passages.len();
        let meta = req.meta.clone();
        let (result, index) = self
            .routed(
                Need::Rerank(Some(&req.method)),
                chosen_engine(meta.as_ref())?,
                meta.as_ref(),
                &ctx,
                |client, meta| {
                    let params = RerankParams {
                        query: req.query.clone(),
                        passages: req.passages.clone(),
                        method: Some(req.method.clone()),
                        model: req.model.clone(),
                        top_n: None,
                        strict: Some(true),
                        meta: Some(meta),
                    };
                    async move { client.rerank(params).await }
                },
            )
            .await?;
        if result.scores.len() != n {
            let id = &self.pool.entries()[index].spec.id;
            return Err(RcpError::backend_unavailable(format!(
                "engine '{id}' returned {} scores for {n} passages",
                result.scores.len()
            )));
        }
        Ok(result.scores)
    }
}

impl Transform for Gateway {
    fn capability(&self) -> TransformCapability {
        self.federated.capabilities.transform.clone().unwrap_or_default()
    }

    async fn transform(&self, params: TransformParams, ctx: RequestContext) -> HandlerResult<TransformResult> {
        let meta = params.meta.clone();
        let (mut result, _) = self
            .routed(
                Need::Transform(&params.method),
                chosen_engine(meta.as_ref())?,
                meta.as_ref(),
                &ctx,
                |client, meta| {
                    let params = TransformParams { meta: Some(meta), ..params.clone() };
                    async move { client.transform(params).await }
                },
            )
            .await?;
        // The engine's side-band data stays its own; the gateway's notes are added by the
        // framework.
        result.meta = None;
        Ok(result)
    }
}
