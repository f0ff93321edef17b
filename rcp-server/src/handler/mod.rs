//! One trait per capability (§6, §7). Registering an implementation with
//! [`ServerBuilder`](crate::ServerBuilder) is the only way its capability key appears in
//! `initialize`, so a server cannot advertise a method it does not handle.
//!
//! Handlers receive params that the framework has already parsed and validated against the
//! advertised capabilities (gating, option values, filters, funnel, limits), and return
//! domain values that the framework turns into wire results (vector encodings, `order`,
//! `usage.notes`, truncation to `k`). With the params comes a [`RequestContext`]
//! ([`context`]): the request's cancellation, deadline, progress and log channels, and the CPU
//! executor, built by the dispatcher so that a handler never sees the transport.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rcp_wire::capabilities::{
    CatalogCapability, EmbedCapability, Flag, GraphCapability, IndexCapability, MemoryCapability,
    MultiVectorCapability, RerankCapability, SparseEmbedCapability, TransformCapability,
};
use rcp_wire::catalog::CatalogListResult;
use rcp_wire::content::{InputItem, QueryInput};
use rcp_wire::embed::SparseVector;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_wire::transform::{TransformParams, TransformResult};
use rcp_wire::{Meta, RcpError};

pub(crate) mod context;
mod retrieve;

pub use context::{RequestContext, SessionScope};

pub(crate) use retrieve::Passthrough;
pub use retrieve::{Honours, RecencyDecay, Retrieve, RetrieveRequest};

/// The result type of every handler.
pub type HandlerResult<T> = Result<T, RcpError>;

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A validated `embed` or `embed/multi` request (§7.3, §7.5).
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    /// Inputs (from `inputs` or the legacy `texts`), at most `batchLimit`.
    pub inputs: Vec<InputItem>,
    /// `query` or `document`.
    pub kind: Option<String>,
    /// The request's `_meta`.
    pub meta: Option<Meta>,
}

/// `embed`: one dense vector per input (§7.3). The framework applies the requested encoding
/// (§7.3.1) and checks dimension and finiteness.
pub trait Embed: Send + Sync + 'static {
    /// The `embed` capability metadata.
    fn capability(&self) -> EmbedCapability;

    /// Embeds every input, in order.
    fn embed(
        &self,
        request: EmbedRequest,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<Vec<Vec<f32>>>> + Send;
}

/// `embed/sparse`: learned-sparse vectors (§7.4).
pub trait SparseEmbed: Send + Sync + 'static {
    /// The `sparseEmbed` capability metadata.
    fn capability(&self) -> SparseEmbedCapability;

    /// Embeds every input, in order.
    fn embed_sparse(
        &self,
        request: EmbedRequest,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<Vec<SparseVector>>> + Send;
}

/// `embed/multi`: late-interaction matrices (§7.5).
pub trait MultiVector: Send + Sync + 'static {
    /// The `multiVector` capability metadata.
    fn capability(&self) -> MultiVectorCapability;

    /// One matrix (rows of `dimension` floats) per input, in order.
    fn embed_multi(
        &self,
        request: EmbedRequest,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<Vec<Vec<Vec<f32>>>>> + Send;
}

/// A validated `rerank` request (§7.6).
#[derive(Debug, Clone)]
pub struct RerankRequest {
    /// The query.
    pub query: QueryInput,
    /// Passages (from `passages` or the synonym `documents`).
    pub passages: Vec<InputItem>,
    /// The method that will run (an advertised one).
    pub method: String,
    /// A specific model.
    pub model: Option<String>,
    /// The request's `_meta`.
    pub meta: Option<Meta>,
}

/// `rerank`: score passages against a query (§7.6). The framework builds `order` and `results`.
pub trait Rerank: Send + Sync + 'static {
    /// The `rerank` capability metadata.
    fn capability(&self) -> RerankCapability;

    /// One score per passage, in passage order; higher is more relevant.
    fn rerank(
        &self,
        request: RerankRequest,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<Vec<f64>>> + Send;

    /// `hit.confidence` (§7.7.2) of a hit this reranker scored `score` with `method` in the
    /// inline rerank stage of `retrieve`: the probability that the hit is relevant, from a map
    /// fitted on judged pairs. `None` (the default) keeps the first stage's confidence, if any.
    fn confidence(&self, method: &str, score: f64) -> Option<f64> {
        let _ = (method, score);
        None
    }
}

/// `query/transform` (§7.8). `params.method` is one of the advertised methods.
pub trait Transform: Send + Sync + 'static {
    /// The `transform` capability metadata.
    fn capability(&self) -> TransformCapability;

    /// Transforms the query.
    fn transform(
        &self,
        params: TransformParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<TransformResult>> + Send;
}

/// `graph` (§7.9). `params.op` is one of the advertised ops.
pub trait Graph: Send + Sync + 'static {
    /// The `graph` capability metadata.
    fn capability(&self) -> GraphCapability;

    /// Runs the op.
    fn graph(
        &self,
        params: GraphParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<GraphResult>> + Send;
}

/// `index/add` and `index/delete` (§7.10, §7.11).
///
/// The framework rejects duplicate ids within one batch, checks that `ids` is positional,
/// and answers repeats of `_meta.idempotencyKey` from its cache without calling `add`.
pub trait Index: Send + Sync + 'static {
    /// The `index` capability metadata; `index/add` is gated on `writable: true`.
    fn capability(&self) -> IndexCapability;

    /// Upserts documents; durable when answered. Returns one id per document, in order.
    fn add(
        &self,
        params: IndexAddParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<IndexAddResult>> + Send;

    /// Deletes documents; absent ids are not an error. Returns how many were removed.
    fn delete(
        &self,
        params: IndexDeleteParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<IndexDeleteResult>> + Send;
}

/// `catalog/list`: the server is an aggregator (§7.13).
pub trait Catalog: Send + Sync + 'static {
    /// The `catalog` capability metadata.
    fn capability(&self) -> CatalogCapability;

    /// Lists the federated engines.
    fn list(&self, ctx: RequestContext) -> impl Future<Output = HandlerResult<CatalogListResult>> + Send;
}

/// `feedback`: client→server signals (§7.16). Must not alter concurrent retrieves.
pub trait Feedback: Send + Sync + 'static {
    /// The `feedback` capability metadata (usually `{}`).
    fn capability(&self) -> Flag {
        Flag::default()
    }

    /// Records the signals; returns how many were accepted.
    fn feedback(
        &self,
        params: FeedbackParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<FeedbackResult>> + Send;
}

/// `memory/build` and `memory/recall` (§7.17). `scope` is one of the advertised scopes.
pub trait Memory: Send + Sync + 'static {
    /// The `memory` capability metadata.
    fn capability(&self) -> MemoryCapability;

    /// Builds or updates a memory.
    fn build(
        &self,
        params: MemoryBuildParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<MemoryBuildResult>> + Send;

    /// Recalls clues from a memory.
    fn recall(
        &self,
        params: MemoryRecallParams,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<MemoryRecallResult>> + Send;
}

// ---- `Arc<T>` forwards every trait, so one engine can be registered for several capabilities ----

macro_rules! forward_arc {
    ($trait:ident, $cap:ty { $( fn $name:ident($req:ty) -> $out:ty; )* }) => {
        impl<T: $trait> $trait for Arc<T> {
            fn capability(&self) -> $cap {
                (**self).capability()
            }
            $( fn $name(&self, r: $req, c: RequestContext) -> impl Future<Output = HandlerResult<$out>> + Send {
                (**self).$name(r, c)
            } )*
        }
    };
}

forward_arc!(Embed, EmbedCapability { fn embed(EmbedRequest) -> Vec<Vec<f32>>; });
forward_arc!(SparseEmbed, SparseEmbedCapability { fn embed_sparse(EmbedRequest) -> Vec<SparseVector>; });
forward_arc!(MultiVector, MultiVectorCapability { fn embed_multi(EmbedRequest) -> Vec<Vec<Vec<f32>>>; });

impl<T: Rerank> Rerank for Arc<T> {
    fn capability(&self) -> RerankCapability {
        (**self).capability()
    }
    fn rerank(&self, r: RerankRequest, c: RequestContext) -> impl Future<Output = HandlerResult<Vec<f64>>> + Send {
        (**self).rerank(r, c)
    }
    fn confidence(&self, method: &str, score: f64) -> Option<f64> {
        (**self).confidence(method, score)
    }
}
forward_arc!(Transform, TransformCapability { fn transform(TransformParams) -> TransformResult; });
forward_arc!(Graph, GraphCapability { fn graph(GraphParams) -> GraphResult; });
forward_arc!(Index, IndexCapability {
    fn add(IndexAddParams) -> IndexAddResult;
    fn delete(IndexDeleteParams) -> IndexDeleteResult;
});
forward_arc!(Feedback, Flag { fn feedback(FeedbackParams) -> FeedbackResult; });
forward_arc!(Memory, MemoryCapability {
    fn build(MemoryBuildParams) -> MemoryBuildResult;
    fn recall(MemoryRecallParams) -> MemoryRecallResult;
});

impl<T: Catalog> Catalog for Arc<T> {
    fn capability(&self) -> CatalogCapability {
        (**self).capability()
    }
    fn list(&self, c: RequestContext) -> impl Future<Output = HandlerResult<CatalogListResult>> + Send {
        (**self).list(c)
    }
}
