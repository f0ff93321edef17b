//! [`Federation`]'s calls beyond `retrieve` (§16.4), each through the federation core
//! ([`exec`]), so a program using the client federates exactly as rcp-gateway does: the
//! capabilities united ([`capabilities::federate`]), routed calls to one engine (the one named
//! in `_meta.engine`, else by priority, failover only within one model), `graph` fanned out
//! and merged (memory in [`super::memory`]), `feedback` routed back to the origin of each hit.

use std::future::Future;
use std::future::ready;

use rcp_wire::Meta;
use rcp_wire::capabilities::Capabilities;
use rcp_wire::embed::{EmbedParams, SparseEmbedParams, SparseEmbedResult};
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::methods::Method;
use rcp_wire::request;
use rcp_wire::rerank::{RerankParams, RerankResult};
use rcp_wire::transform::{TransformParams, TransformResult};
use serde_json::json;

use super::Federation;
use super::capabilities::{Federated, federate};
use super::exec::{self, Engines, Merged, Served, call_routed};
use super::route::{META_ENGINE, Need, chosen_engine};
use crate::client::Client;
use crate::error::{ClientError, ConnectError};
use crate::registry::EngineSpec;

/// The federation's engines as connected for one call.
pub(super) struct Connected<'a> {
    specs: &'a [EngineSpec],
    clients: Vec<Option<Client>>,
    caps: Vec<Option<Capabilities>>,
}

impl Engines for Connected<'_> {
    fn count(&self) -> usize {
        self.specs.len()
    }

    fn spec(&self, index: usize) -> &EngineSpec {
        &self.specs[index]
    }

    fn capabilities(&self, index: usize) -> Option<&Capabilities> {
        self.caps.get(index).and_then(Option::as_ref)
    }

    fn client(&self, index: usize) -> impl Future<Output = Result<Client, ClientError>> + Send {
        let id = &self.specs[index].id;
        ready(
            self.clients.get(index).cloned().flatten().ok_or_else(|| {
                ClientError::Connect(ConnectError::Unavailable(format!("engine '{id}' is not connected")))
            }),
        )
    }
}

impl Federation {
    /// Every engine, connected (or not) now.
    pub(super) async fn connected_engines(&self) -> Connected<'_> {
        let outcomes = self.connect().await;
        let clients: Vec<Option<Client>> = self
            .registry
            .engines
            .iter()
            .map(|e| outcomes.iter().find(|(id, _)| *id == e.id).and_then(|(_, c)| c.as_ref().ok().cloned()))
            .collect();
        let caps = clients.iter().map(|c| c.as_ref().map(Client::capabilities)).collect();
        Connected { specs: &self.registry.engines, clients, caps }
    }

    /// The `_meta` an engine receives: the caller's, less `_meta.engine`, with the hop budget.
    pub(super) fn forwarded(&self, meta: Option<&Meta>) -> Meta {
        let mut out: Meta = meta.cloned().unwrap_or_default();
        out.remove(META_ENGINE);
        out.insert("federation".into(), json!({"depth": self.options.depth, "path": []}));
        out
    }

    /// What the federation can do now (§16.4): the union of the connected engines'
    /// capabilities, each descriptor merged by the rules of [`super::capabilities`], with the
    /// engines each key comes from.
    pub async fn capabilities(&self) -> Federated {
        let engines = self.connected_engines().await;
        let (_, views) = exec::views(&engines);
        federate(&views)
    }

    async fn routed<R, Fut>(
        &self,
        need: Need<'_>,
        chosen: Option<&str>,
        meta: Option<&Meta>,
        call: impl Fn(Client, Meta) -> Fut,
    ) -> Result<Served<R>, ClientError>
    where
        Fut: Future<Output = Result<R, ClientError>>,
    {
        let engines = self.connected_engines().await;
        let forwarded = self.forwarded(meta);
        call_routed(&engines, need, chosen, self.options.engine_timeout, |client| call(client, forwarded.clone()))
            .await
            .map_err(ClientError::Rpc)
    }

    /// `embed` (§7.3) by one engine: `_meta.engine`'s, else the embedder of highest priority.
    pub async fn embed(&self, params: EmbedParams) -> Result<Served<Vec<Vec<f32>>>, ClientError> {
        let chosen = chosen_engine(params.meta.as_ref()).map_err(ClientError::Rpc)?.map(str::to_owned);
        self.routed(Need::Method(Method::Embed), chosen.as_deref(), params.meta.as_ref(), |client, meta| {
            let p = EmbedParams { meta: Some(meta), ..params.clone() };
            async move { client.embed(p).await }
        })
        .await
    }

    /// `embed/sparse` (§7.4) by one engine, as [`Self::embed`].
    pub async fn embed_sparse(&self, params: SparseEmbedParams) -> Result<Served<SparseEmbedResult>, ClientError> {
        let chosen = chosen_engine(params.meta.as_ref()).map_err(ClientError::Rpc)?.map(str::to_owned);
        self.routed(Need::Method(Method::EmbedSparse), chosen.as_deref(), params.meta.as_ref(), |client, meta| {
            let p = SparseEmbedParams { meta: Some(meta), ..params.clone() };
            async move { client.request::<request::EmbedSparse>(&p).await }
        })
        .await
    }

    /// `embed/multi` (§7.5) by one engine, as [`Self::embed`].
    pub async fn embed_multi(&self, params: EmbedParams) -> Result<Served<Vec<Vec<Vec<f32>>>>, ClientError> {
        let chosen = chosen_engine(params.meta.as_ref()).map_err(ClientError::Rpc)?.map(str::to_owned);
        self.routed(Need::Method(Method::EmbedMulti), chosen.as_deref(), params.meta.as_ref(), |client, meta| {
            let p = EmbedParams { meta: Some(meta), ..params.clone() };
            async move { client.embed_multi(p).await }
        })
        .await
    }

    /// `rerank` (§7.6) by one engine offering the method (`None`: any).
    pub async fn rerank(&self, params: RerankParams) -> Result<Served<RerankResult>, ClientError> {
        let chosen = chosen_engine(params.meta.as_ref()).map_err(ClientError::Rpc)?.map(str::to_owned);
        self.routed(Need::Rerank(params.method.as_deref()), chosen.as_deref(), params.meta.as_ref(), |client, meta| {
            let p = RerankParams { meta: Some(meta), ..params.clone() };
            async move { client.rerank(p).await }
        })
        .await
    }

    /// `query/transform` (§7.8) by one engine offering the method.
    pub async fn transform(&self, params: TransformParams) -> Result<Served<TransformResult>, ClientError> {
        let chosen = chosen_engine(params.meta.as_ref()).map_err(ClientError::Rpc)?.map(str::to_owned);
        self.routed(Need::Transform(&params.method), chosen.as_deref(), params.meta.as_ref(), |client, meta| {
            let p = TransformParams { meta: Some(meta), ..params.clone() };
            async move { client.transform(p).await }
        })
        .await
    }

    /// A federated `graph` op (§16.4): asked of every engine advertising it, merged.
    pub async fn graph(&self, params: GraphParams) -> Result<Merged<GraphResult>, ClientError> {
        let engines = self.connected_engines().await;
        let meta = self.forwarded(params.meta.as_ref());
        exec::graph(&engines, &self.namespaces, &self.ledger, &params, meta, self.options.engine_timeout)
            .await
            .map_err(ClientError::Rpc)
    }

    /// `feedback` (§7.16) routed back to the engines that returned each hit to this
    /// federation (its `retrieve`, `graph` and `memory/recall` answers).
    pub async fn feedback(&self, params: FeedbackParams) -> Result<Merged<FeedbackResult>, ClientError> {
        let engines = self.connected_engines().await;
        let meta = self.forwarded(params.meta.as_ref());
        exec::feedback(&engines, &self.namespaces, &self.ledger, &params, meta, self.options.engine_timeout)
            .await
            .map_err(ClientError::Rpc)
    }
}
