//! Stateful HTTP sessions (§5.2): the table of live sessions and its idle sweep, behind a small
//! trait so the router does not care where sessions live.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use rcp_wire::methods::Method;
use rcp_wire::{ErrorCode, RcpError};

use super::options::{SESSION_HEADER, SessionMode};
use crate::server::Server;
use crate::service::access::Grant;
use crate::service::dispatch::Shape;
use crate::service::session::Session;

/// Where stateful sessions live between requests.
pub(super) trait SessionManager: Send + Sync {
    /// The live session with this token, its idle clock restarted, or `None` if it is unknown
    /// or expired.
    fn resume(&self, token: &str) -> Result<Option<Arc<Session>>, RcpError>;
    /// Keeps a session whose `initialize` succeeded, under its id.
    fn register(&self, id: String, session: Arc<Session>);
    /// Forgets a session (after its `shutdown`).
    fn close(&self, id: &str);
}

/// Sessions in this process's memory; those idle longer than `ttl` are swept whenever the
/// table is touched.
pub(super) struct LocalSessions {
    ttl: Duration,
    table: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
}

impl LocalSessions {
    /// An empty table whose sessions expire after `ttl` idle.
    pub(super) fn new(ttl: Duration) -> Self {
        Self { ttl, table: Mutex::new(HashMap::new()) }
    }

    fn sweep(&self, table: &mut HashMap<String, (Arc<Session>, Instant)>, now: Instant) {
        table.retain(|_, (_, used)| now.duration_since(*used) < self.ttl);
    }
}

impl SessionManager for LocalSessions {
    fn resume(&self, token: &str) -> Result<Option<Arc<Session>>, RcpError> {
        let mut table = self.table.lock().map_err(|_| RcpError::internal("session table poisoned"))?;
        let now = Instant::now();
        self.sweep(&mut table, now);
        Ok(table.get_mut(token).map(|(s, used)| {
            *used = now;
            Arc::clone(s)
        }))
    }

    fn register(&self, id: String, session: Arc<Session>) {
        if let Ok(mut table) = self.table.lock() {
            let now = Instant::now();
            self.sweep(&mut table, now);
            table.insert(id, (session, now));
        }
    }

    fn close(&self, id: &str) {
        if let Ok(mut table) = self.table.lock() {
            table.remove(id);
        }
    }
}

/// No sessions at all: every request is served on its own (stateless mode).
pub(super) struct NoSessions;

impl SessionManager for NoSessions {
    fn resume(&self, _token: &str) -> Result<Option<Arc<Session>>, RcpError> {
        Ok(None)
    }

    fn register(&self, _id: String, _session: Arc<Session>) {}

    fn close(&self, _id: &str) {}
}

/// Picks the session a request of a caller holding `grant` runs in; for a stateful
/// `initialize` without a live token, also returns the new session's id, to
/// [`SessionManager::register`] once its handshake succeeds.
///
/// A new session takes the caller's grant (§15.6). A live one keeps the one it was opened with,
/// so that what its `initialize` advertised stays true (§13); a request on it whose credentials
/// no longer grant all of it (the token was narrowed or replaced) is `-32012`.
///
/// In stateful mode a request that carries no token is served statelessly (implicitly
/// initialized at the advertised capabilities, as §5.2 permits), so clients that never send
/// `RCP-Session` interoperate; with `require_session` it is `-32001` instead, unless the
/// server's latest revision is stateless (any node serves it, no session needed). A token that
/// names no live session is always `-32001` (except on `initialize`, which starts a new one).
pub(super) fn resolve(
    server: &Server,
    mode: &SessionMode,
    require_session: bool,
    sessions: &dyn SessionManager,
    headers: &HeaderMap,
    shape: &Shape,
    grant: &Grant,
) -> Result<(Arc<Session>, Option<String>), RcpError> {
    let stateless = || {
        Arc::new(Session::stateless(server.dispatcher().identity.stateless(grant.scopes())).with_grant(grant.clone()))
    };
    if matches!(mode, SessionMode::Stateless) {
        return Ok((stateless(), None));
    }
    let token = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    let is_initialize = shape.method.as_deref().and_then(Method::from_name) == Some(Method::Initialize);
    if let Some(token) = token {
        if let Some(s) = sessions.resume(token)? {
            if !grant.covers(&s.grant()) {
                return Err(RcpError::unauthorized().with_detail(format!(
                    "this session was opened with the scopes '{}'; these credentials grant '{grant}'",
                    s.grant()
                )));
            }
            return Ok((s, None));
        }
        if !is_initialize {
            return Err(RcpError::new(
                ErrorCode::NOT_INITIALIZED,
                "unknown or expired RCP-Session; send initialize to start a new session",
            ));
        }
        // An initialize carrying a stale token simply starts a new session.
    }
    if is_initialize {
        let id = uuid::Uuid::new_v4().simple().to_string();
        return Ok((Arc::new(Session::with_id(id.clone()).with_grant(grant.clone())), Some(id)));
    }
    let stateless_revision = server.dispatcher().identity.revisions.latest().is_stateless();
    if token.is_none() && (!require_session || stateless_revision) {
        return Ok((stateless(), None));
    }
    Ok((Arc::new(Session::new().with_grant(grant.clone())), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_resume_until_closed() {
        let sessions = LocalSessions::new(Duration::from_secs(60));
        sessions.register("s1".into(), Arc::new(Session::with_id("s1")));
        assert!(sessions.resume("s1").is_ok_and(|s| s.is_some_and(|s| s.id() == Some("s1"))));
        assert!(sessions.resume("s2").is_ok_and(|s| s.is_none()));
        sessions.close("s1");
        assert!(sessions.resume("s1").is_ok_and(|s| s.is_none()));
    }

    #[test]
    fn idle_sessions_expire() {
        let sessions = LocalSessions::new(Duration::ZERO);
        sessions.register("s1".into(), Arc::new(Session::with_id("s1")));
        assert!(sessions.resume("s1").is_ok_and(|s| s.is_none()));
    }

    #[test]
    fn no_sessions_keeps_nothing() {
        NoSessions.register("s1".into(), Arc::new(Session::with_id("s1")));
        assert!(NoSessions.resume("s1").is_ok_and(|s| s.is_none()));
    }
}
