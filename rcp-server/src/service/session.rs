//! Per-connection session state: the handshake outcome and the requests in flight (§13).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rcp_wire::RequestId;
use rcp_wire::capabilities::Capabilities;
use rcp_wire::notifications::LogLevel;
use tokio_util::sync::CancellationToken;

use crate::handler::context::SessionScope;
use crate::server::exec::Executor;
use crate::service::access::{Grant, Scopes};
use crate::service::profile::Profile;

/// What a successful `initialize` fixed for the rest of the session (§13.2).
#[derive(Debug)]
pub(crate) struct Negotiated {
    pub profile: Profile,
    pub capabilities: Arc<Capabilities>,
    /// Serialised `initialize`/`info` result for this session.
    pub info: Arc<[u8]>,
    /// Minimum log level the client asked for, when it advertised the `log` capability.
    pub client_log: Option<LogLevel>,
}

/// One client's session: over stdio the whole connection, over HTTP one stateful session
/// (or a fresh implicitly-initialised one per request in stateless mode).
#[derive(Debug, Default)]
pub(crate) struct Session {
    negotiated: OnceLock<Negotiated>,
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    shutdown: AtomicBool,
    id: Option<String>,
    /// Stateless HTTP: implicitly initialised; `initialize` answers idempotently (§5.2).
    stateless: bool,
    /// One peer on a pipe (stdio, one byte stream): the session's waiting handle on the CPU
    /// pool ([`Executor::waiting`]), so a full lane makes its requests wait for room, and its
    /// transport stop reading, instead of refusing them.
    paced: Option<Executor>,
    /// What the caller may do, when a transport authenticated it with scoped credentials;
    /// `None`: everything ([`Grant::all`]).
    restricted: Option<Grant>,
    /// The session as handlers see it; ended when the session is dropped.
    scope: EndsOnDrop,
}

/// A [`SessionScope`] ended when its owner, the session, is dropped (the last request of a
/// closed connection or an expired HTTP session finished).
#[derive(Debug, Default)]
struct EndsOnDrop(SessionScope);

impl Drop for EndsOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Session {
    /// A new, uninitialised session.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A new session of the only peer of a pipe: its requests wait for room in a full CPU lane
    /// while the transport stops reading, instead of being refused with `-32011`.
    /// `paced` is the session's own waiting handle ([`Executor::waiting`]).
    pub(crate) fn piped(paced: Executor) -> Self {
        Self { paced: Some(paced), ..Self::default() }
    }

    /// This session, limited to what `grant` allows (§15.6): the caller's credentials decide
    /// what its `initialize` advertises, which methods it may call and, for a server with
    /// collections, which of them each call reaches.
    #[cfg(any(test, feature = "http"))]
    pub(crate) fn with_grant(self, grant: Grant) -> Self {
        Self { restricted: (grant != Grant::all()).then_some(grant), ..self }
    }

    /// The scopes the caller holds ([`Scopes::ALL`] unless a transport said otherwise).
    pub(crate) fn scopes(&self) -> Scopes {
        self.restricted.as_ref().map_or(Scopes::ALL, Grant::scopes)
    }

    /// What the caller is granted ([`Grant::all`] unless a transport said otherwise).
    pub(crate) fn grant(&self) -> Grant {
        self.restricted.clone().unwrap_or_else(Grant::all)
    }

    /// The executor handle of a pipe's session ([`Session::piped`]): its own jobs wait for
    /// room, and only they decide whether its transport reads.
    pub(crate) fn paced(&self) -> Option<&Executor> {
        self.paced.as_ref()
    }

    /// A new session carrying a transport-level session id (HTTP stateful mode).
    #[cfg(feature = "http")]
    pub(crate) fn with_id(id: impl Into<String>) -> Self {
        Self { id: Some(id.into()), ..Self::default() }
    }

    /// A stateless session (HTTP): already initialised at the server's advertised
    /// capabilities, where `initialize` answers idempotently instead of locking (§5.2).
    #[cfg(feature = "http")]
    pub(crate) fn stateless(n: Negotiated) -> Self {
        let s = Self { stateless: true, ..Self::default() };
        let _ = s.negotiated.set(n);
        s
    }

    /// Whether this is a stateless (implicitly initialised) session.
    pub(crate) fn is_stateless(&self) -> bool {
        self.stateless
    }

    /// The session as its handlers see it.
    pub(crate) fn scope(&self) -> &SessionScope {
        &self.scope.0
    }

    /// The transport session id, if any.
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Whether a successful `initialize` happened.
    pub(crate) fn is_initialized(&self) -> bool {
        self.negotiated.get().is_some()
    }

    /// Whether `shutdown` was received.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(crate) fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    pub(crate) fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.get()
    }

    /// Records a successful handshake; `Err` if one already happened.
    pub(crate) fn set_negotiated(&self, n: Negotiated) -> Result<(), Negotiated> {
        self.negotiated.set(n)
    }

    /// Registers a request in flight; `None` if the id is already in flight (§4.7).
    pub(crate) fn begin(self: &Arc<Self>, id: &RequestId) -> Option<InFlight> {
        let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(id) {
            return None;
        }
        let token = CancellationToken::new();
        map.insert(id.clone(), token.clone());
        Some(InFlight { session: Arc::clone(self), id: id.clone(), token, answered: false })
    }

    /// Cancels the request with this id, if it is in flight; unknown ids are a no-op (§7.14).
    pub(crate) fn cancel(&self, id: &RequestId) -> bool {
        let map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

/// A registered in-flight request; unregisters itself when dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    session: Arc<Session>,
    id: RequestId,
    pub(crate) token: CancellationToken,
    answered: bool,
}

impl InFlight {
    /// Marks the request answered; dropping it then only unregisters it.
    pub(crate) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for InFlight {
    /// Unregisters the request. If it was never answered (its future was dropped, e.g. an HTTP
    /// client went away), fires its cancellation so work started off the async runtime stops.
    fn drop(&mut self) {
        if !self.answered {
            self.token.cancel();
        }
        let mut map = self.session.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&self.id);
    }
}
