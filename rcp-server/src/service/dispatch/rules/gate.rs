//! Rule: gating (§7, §12, §13, §15.6). A request that is not a lifecycle method reaches its
//! handler only if it is not a notification carrying an id, its session is initialised, the
//! method exists in the negotiated revision, the session's scopes allow it (`-32012`, before
//! capability gating, so a caller cannot probe capabilities it may not use; see
//! [`crate::access`]), and the session's capabilities advertise it. The capability rules
//! themselves are `rcp_wire::gating`'s, shared with the client.

use rcp_wire::RcpError;
use rcp_wire::gating;
use rcp_wire::methods::Method;

use crate::service::session::{Negotiated, Session};

/// The method `name` (`method` when it is one RCP defines) and the session's negotiated state,
/// if the request may be served; else the error that answers it.
pub(crate) fn admit<'s>(
    session: &'s Session,
    name: &str,
    method: Option<Method>,
) -> Result<(Method, &'s Negotiated), RcpError> {
    if name.starts_with("notifications/") {
        return Err(RcpError::invalid_request(format!("'{name}' is a notification and must not carry an id")));
    }
    let Some(negotiated) = session.negotiated() else {
        return Err(RcpError::not_initialized(name));
    };
    let Some(m) = method.filter(|m| negotiated.profile.permits_method(*m)) else {
        return Err(RcpError::unknown_method(name));
    };
    session.scopes().admit(m)?;
    gating::method(&negotiated.capabilities, m).map_err(|missing| missing.error())?;
    Ok((m, negotiated))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rcp_wire::ErrorCode;
    use rcp_wire::capabilities::{Capabilities, RetrieveCapability};

    use super::*;
    use crate::service::profile::Profile;

    fn initialized(caps: Capabilities) -> Session {
        initialized_as(caps, crate::service::access::Scopes::ALL)
    }

    fn initialized_as(caps: Capabilities, scopes: crate::service::access::Scopes) -> Session {
        let session = Session::new().with_grant(scopes.into());
        let n = Negotiated {
            profile: Profile::latest(),
            capabilities: Arc::new(caps),
            info: Arc::from(Vec::new()),
            client_log: None,
        };
        assert!(session.set_negotiated(n).is_ok());
        session
    }

    fn code(r: Result<(Method, &Negotiated), RcpError>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn a_notification_with_an_id_is_refused_first() {
        let session = Session::new();
        assert_eq!(code(admit(&session, "notifications/cancel", None)), Some(ErrorCode::INVALID_REQUEST));
    }

    #[test]
    fn nothing_but_lifecycle_runs_before_initialize() {
        let session = Session::new();
        assert_eq!(code(admit(&session, "retrieve", Some(Method::Retrieve))), Some(ErrorCode::NOT_INITIALIZED));
        assert_eq!(code(admit(&session, "nope", None)), Some(ErrorCode::NOT_INITIALIZED));
    }

    #[test]
    fn a_method_outside_the_scopes_is_unauthorized_before_capability_gating() {
        use crate::service::access::{Scope, Scopes};
        let caps = Capabilities { retrieve: Some(RetrieveCapability::default()), ..Capabilities::default() };
        let session = initialized_as(caps, Scopes::NONE.with(Scope::Read));
        // Not advertised at all, yet -32012: a read caller learns nothing of the index.
        assert_eq!(code(admit(&session, "index/add", Some(Method::IndexAdd))), Some(ErrorCode::UNAUTHORIZED));
        assert_eq!(code(admit(&session, "embed", Some(Method::Embed))), Some(ErrorCode::CAPABILITY_MISSING));
        assert!(admit(&session, "retrieve", Some(Method::Retrieve)).is_ok());
    }

    #[test]
    fn unknown_and_unadvertised_methods_are_told_apart() {
        let caps = Capabilities { retrieve: Some(RetrieveCapability::default()), ..Capabilities::default() };
        let session = initialized(caps);
        assert_eq!(code(admit(&session, "nope", None)), Some(ErrorCode::UNKNOWN_METHOD));
        assert_eq!(code(admit(&session, "embed", Some(Method::Embed))), Some(ErrorCode::CAPABILITY_MISSING));
        let admitted = admit(&session, "retrieve", Some(Method::Retrieve)).map(|(m, _)| m);
        assert_eq!(admitted.ok(), Some(Method::Retrieve));
    }
}
