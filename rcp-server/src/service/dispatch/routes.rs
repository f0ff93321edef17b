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
use crate::handler::BoxFuture;
use crate::handler::context::RequestContext;

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

/// Every method a server serves, each present exactly when its capability was registered: one
/// slot per [`Method`], filled by [`ServerBuilder`](crate::ServerBuilder).
pub(crate) struct Routes([Option<Route>; Method::ALL.len()]);

impl Default for Routes {
    fn default() -> Self {
        Self(std::array::from_fn(|_| None))
    }
}

impl Routes {
    /// Serves `m` with `route` (a gated method; the lifecycle methods are the framework's).
    pub(crate) fn insert(&mut self, m: Method, route: Route) {
        debug_assert!(m.capability().is_some(), "{m} is answered by the framework");
        self.0[m.index()] = Some(route);
    }

    /// The route of `m`; `None` for the lifecycle methods (the framework answers them) and for
    /// a method whose capability nobody registered.
    pub(crate) fn get(&self, m: Method) -> Option<&Route> {
        self.0[m.index()].as_ref()
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
