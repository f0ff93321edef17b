//! The route table: for each method a server serves, its method family bound to the handler
//! registered for it (§6, §7).
//!
//! [`ServerBuilder`](crate::ServerBuilder) fills the table as handlers are registered, each
//! entry a family function of [`super::methods`] bound to the engine's own handler type, so the
//! call into the engine (`handler.retrieve(request, ctx)`) is plain, statically dispatched code;
//! the table is the only dynamic hop between the dispatcher and an engine.

use std::fmt;

use rcp_wire::RcpError;
use rcp_wire::methods::Method;
use serde_json::value::RawValue;

use super::rules::frame::Body;
use crate::context::RequestContext;
use crate::handler::BoxFuture;

/// A handler call in flight; it yields the finished result, which the dispatcher frames.
pub(crate) type Call = BoxFuture<Result<Body, RcpError>>;

/// A method family's entry point, generic over what it is bound to (a handler, or a handler and
/// its idempotency cache): validates the params against the session's capabilities, then
/// returns the handler call.
pub(crate) type Family<S> = fn(&S, Option<&RawValue>, RequestContext) -> Result<Call, RcpError>;

/// A family bound to what serves it: params and context in, the handler call out.
type Bound = Box<dyn Fn(Option<&RawValue>, RequestContext) -> Result<Call, RcpError> + Send + Sync>;

/// One method family bound to what serves it.
pub(crate) struct Route(Bound);

impl Route {
    /// `family`, serving with `state` (the registered handler).
    pub(crate) fn new<S: Send + Sync + 'static>(state: S, family: Family<S>) -> Self {
        Self(Box::new(move |params, ctx| family(&state, params, ctx)))
    }

    /// Validates `params` and starts the handler.
    pub(crate) fn start(&self, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
        (self.0)(params, ctx)
    }
}

/// Every method a server serves, each present exactly when its capability was registered.
#[derive(Default)]
pub(crate) struct Routes {
    pub retrieve: Option<Route>,
    pub embed: Option<Route>,
    pub embed_sparse: Option<Route>,
    pub embed_multi: Option<Route>,
    pub rerank: Option<Route>,
    pub query_transform: Option<Route>,
    pub graph: Option<Route>,
    pub index_add: Option<Route>,
    pub index_delete: Option<Route>,
    pub catalog_list: Option<Route>,
    pub feedback: Option<Route>,
    pub memory_build: Option<Route>,
    pub memory_recall: Option<Route>,
}

impl Routes {
    /// The route of `m`; `None` for the lifecycle methods (the framework answers them) and for
    /// a method whose capability nobody registered.
    pub(crate) fn get(&self, m: Method) -> Option<&Route> {
        match m {
            Method::Retrieve => self.retrieve.as_ref(),
            Method::Embed => self.embed.as_ref(),
            Method::EmbedSparse => self.embed_sparse.as_ref(),
            Method::EmbedMulti => self.embed_multi.as_ref(),
            Method::Rerank => self.rerank.as_ref(),
            Method::QueryTransform => self.query_transform.as_ref(),
            Method::Graph => self.graph.as_ref(),
            Method::IndexAdd => self.index_add.as_ref(),
            Method::IndexDelete => self.index_delete.as_ref(),
            Method::CatalogList => self.catalog_list.as_ref(),
            Method::Feedback => self.feedback.as_ref(),
            Method::MemoryBuild => self.memory_build.as_ref(),
            Method::MemoryRecall => self.memory_recall.as_ref(),
            Method::Initialize | Method::Info | Method::Ping | Method::Shutdown => None,
        }
    }

    /// Validates `params` for the gated method `m` and starts its handler.
    pub(crate) fn start(&self, m: Method, params: Option<&RawValue>, ctx: RequestContext) -> Result<Call, RcpError> {
        match self.get(m) {
            Some(route) => route.start(params, ctx),
            // Gating passed, so a profile advertised what nobody registered.
            None => Err(RcpError::capability_missing(m.name(), m.capability().map_or("?", |c| c.key()))),
        }
    }
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let served: Vec<&str> = Method::ALL.into_iter().filter(|m| self.get(*m).is_some()).map(Method::name).collect();
        f.debug_struct("Routes").field("served", &served).finish()
    }
}
