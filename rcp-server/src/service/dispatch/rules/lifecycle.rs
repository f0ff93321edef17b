//! Rule: the four REQUIRED methods are the framework's own (§7.1, §7.2, §7.12, §7.15, §13).
//! `initialize`, `info`, `ping` and `shutdown` are answered at once, before `initialize` too,
//! never gated and whatever handlers were registered. Which methods these are is
//! `Method::callable_before_initialize`'s to say (one table, in `rcp_wire`). What `initialize`
//! advertises is narrowed to the session's scopes ([`crate::access::Scopes::narrow`]), so a
//! caller is offered only what its credentials allow.

use std::sync::{Arc, OnceLock};

use rcp_wire::capabilities::Capabilities;
use rcp_wire::lifecycle::{ConformanceLevel, InitializeParams, InitializeResult, PeerInfo};
use rcp_wire::methods::Method;
use rcp_wire::notifications::LogLevel;
use rcp_wire::{Meta, RcpError};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::service::access::Scopes;
use crate::service::dispatch::Processed;
use crate::service::dispatch::envelope::{is_valid_id, ok_frame};
use crate::service::profile::{Profile, Revisions};
use crate::service::session::{Negotiated, Session};
use crate::service::validate;

/// What `initialize` and `info` report: the server's identity and what it enables.
#[derive(Debug)]
pub(crate) struct Identity {
    /// Name and version.
    pub info: PeerInfo,
    /// The level reported in `_meta.conformance` (§14).
    pub conformance: ConformanceLevel,
    /// Everything the server enables, before any profile narrows it.
    pub enabled: Capabilities,
    /// The latest profile's capability set (what stateless sessions are served at).
    pub default_caps: Arc<Capabilities>,
    /// `info` result before `initialize` (the latest profile's set).
    pub default_info: Arc<[u8]>,
    /// The protocol revisions spoken.
    pub revisions: Revisions,
    /// The latest profile's set and `info` result as seen with each set of scopes short of
    /// all (by [`Scopes::bits`]), made when first asked for.
    narrowed: [OnceLock<Advertised>; 8],
    /// Whether the handlers apply collection grants (`ServerBuilder::collection_grants`).
    pub collection_grants: bool,
}

/// A capability set and the `initialize`/`info` result advertising it.
type Advertised = (Arc<Capabilities>, Arc<[u8]>);

impl Identity {
    /// The identity of a server named `info` enabling `enabled`.
    pub(crate) fn new(
        info: PeerInfo,
        conformance: ConformanceLevel,
        enabled: Capabilities,
        revisions: Revisions,
    ) -> Self {
        let profile = revisions.latest();
        let caps = profile.apply(&enabled);
        let mut identity = Self {
            info,
            conformance,
            enabled,
            default_caps: Arc::new(caps),
            default_info: Arc::from(Vec::new()),
            revisions,
            narrowed: Default::default(),
            collection_grants: false,
        };
        identity.default_info = Arc::from(identity.result(profile, &identity.default_caps, None));
        identity
    }

    /// The `initialize`/`info` result at `profile` with `caps`, naming `session` if any.
    fn result(&self, profile: Profile, caps: &Capabilities, session: Option<&str>) -> Vec<u8> {
        let mut meta = Meta::new();
        meta.insert("conformance".into(), Value::from(self.conformance.as_str()));
        if let Some(id) = session {
            meta.insert("session".into(), Value::from(id));
        }
        let result = InitializeResult {
            protocol_version: profile.version(),
            server: self.info.clone(),
            capabilities: caps.clone(),
            meta: Some(meta),
        };
        serde_json::to_vec(&result).unwrap_or_else(|_| b"{}".to_vec())
    }

    /// The `info` result of `session`: its negotiated one, or before `initialize` the latest
    /// profile's as the session's scopes see it.
    fn info_of(&self, session: &Session) -> Arc<[u8]> {
        session.negotiated().map_or_else(|| self.latest_for(session.scopes()).1, |n| Arc::clone(&n.info))
    }

    /// The negotiated state of a stateless session (HTTP, §5.2) of a caller with `scopes`:
    /// initialised at the latest profile's advertised set, narrowed to those scopes.
    #[cfg(feature = "http")]
    pub(crate) fn stateless(&self, scopes: Scopes) -> Negotiated {
        let (capabilities, info) = self.latest_for(scopes);
        Negotiated { profile: self.revisions.latest(), capabilities, info, client_log: None }
    }

    /// The latest profile's set and `info` result as a caller with `scopes` sees them.
    fn latest_for(&self, scopes: Scopes) -> Advertised {
        if scopes == Scopes::ALL {
            return (Arc::clone(&self.default_caps), Arc::clone(&self.default_info));
        }
        let slot = &self.narrowed[usize::from(scopes.bits()) % self.narrowed.len()];
        let (caps, info) = slot.get_or_init(|| {
            let caps = scopes.narrow(&self.default_caps);
            let info = Arc::from(self.result(self.revisions.latest(), &caps, None));
            (Arc::new(caps), info)
        });
        (Arc::clone(caps), Arc::clone(info))
    }
}

/// The answer to request `id` if `method` is a lifecycle method, else `None`: ready at once,
/// and for `shutdown` [`Processed::Shutdown`] (the transport stops reading, drains the requests
/// in flight, then sends it).
pub(crate) fn answer(
    identity: &Identity,
    session: &Session,
    id: &str,
    method: Method,
    params: Option<&RawValue>,
) -> Option<Result<Processed, RcpError>> {
    if !method.callable_before_initialize() {
        return None;
    }
    Some(match method {
        Method::Ping => ping(id, params).map(Processed::Ready),
        Method::Info => Ok(Processed::Ready(ok_frame(id, &identity.info_of(session)))),
        Method::Initialize => initialize(identity, session, id, params).map(Processed::Ready),
        Method::Shutdown => {
            session.request_shutdown();
            Ok(Processed::Shutdown(ok_frame(id, b"{}")))
        }
        other => Err(RcpError::internal(format!("'{other}' has no lifecycle answer"))),
    })
}

/// Whether `name` is answered the moment it is read and never waits for a handler, a worker or
/// a queue: `ping`, `info` and `notifications/cancel`. Transports exempt these from per-client
/// in-flight caps, so a client at its cap can still check liveness and cancel.
#[cfg(feature = "http")]
pub(crate) fn answered_at_once(name: &str) -> bool {
    name == rcp_wire::notifications::CANCEL || matches!(Method::from_name(name), Some(Method::Ping | Method::Info))
}

/// `initialize` (§7.1): negotiates once per session; on a stateless session it only reports
/// the advertised set, idempotently (§5.2).
fn initialize(
    identity: &Identity,
    session: &Session,
    id: &str,
    params: Option<&RawValue>,
) -> Result<Vec<u8>, RcpError> {
    let p: InitializeParams = validate::parse(params)?;
    if session.is_stateless() {
        let profile = negotiate(&identity.revisions, p.protocol_version)?;
        return Ok(if profile == identity.revisions.latest() {
            ok_frame(id, &identity.info_of(session))
        } else {
            let caps = session.scopes().narrow(&profile.apply(&identity.enabled));
            ok_frame(id, &identity.result(profile, &caps, None))
        });
    }
    if session.is_initialized() {
        return Err(already_initialized());
    }
    let profile = negotiate(&identity.revisions, p.protocol_version)?;
    let caps = session.scopes().narrow(&profile.apply(&identity.enabled));
    let meta_level = p.meta.as_ref().and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
    let client_wants_log = p.capabilities.as_ref().is_some_and(|c| c.log.is_some());
    let client_log = if client_wants_log { Some(meta_level.unwrap_or(LogLevel::Info)) } else { meta_level };
    // A stateless revision keeps nothing between requests, so no session token is issued.
    let token = session.id().filter(|_| !profile.is_stateless());
    let info: Arc<[u8]> = Arc::from(identity.result(profile, &caps, token));
    let n = Negotiated { profile, capabilities: Arc::new(caps), info: Arc::clone(&info), client_log };
    session.set_negotiated(n).map_err(|_| already_initialized())?;
    tracing::debug!(client = ?p.client.map(|c| c.name), version = profile.version(), "initialized");
    Ok(ok_frame(id, &info))
}

fn already_initialized() -> RcpError {
    RcpError::invalid_request("already initialized; re-negotiation is not permitted mid-session")
}

#[derive(Deserialize)]
struct PingParams<'a> {
    #[serde(default, borrow)]
    nonce: Option<&'a RawValue>,
}

/// `ping` (§7.15): `{}`, or the `nonce` echoed back verbatim.
fn ping(id: &str, params: Option<&RawValue>) -> Result<Vec<u8>, RcpError> {
    let p: PingParams<'_> = params
        .map(|p| serde_json::from_str(p.get()))
        .transpose()
        .map_err(|e| RcpError::invalid_params("params", e.to_string()))?
        .unwrap_or(PingParams { nonce: None });
    match p.nonce.map(RawValue::get) {
        None | Some("null") => Ok(ok_frame(id, b"{}")),
        Some(n) if is_valid_id(n) => {
            let mut body = Vec::with_capacity(n.len() + 10);
            body.extend_from_slice(b"{\"nonce\":");
            body.extend_from_slice(n.as_bytes());
            body.push(b'}');
            Ok(ok_frame(id, &body))
        }
        Some(_) => Err(RcpError::invalid_params("nonce", "nonce must be a string or a number")),
    }
}

/// Version negotiation (§7.1): `min(client, server)` among the revisions spoken, `-32002`
/// below the floor (or on a gap in the table).
fn negotiate(revisions: &Revisions, client: i64) -> Result<Profile, RcpError> {
    let negotiated = client.min(i64::from(revisions.max_version()));
    u32::try_from(negotiated)
        .ok()
        .filter(|v| *v >= revisions.min_version())
        .and_then(|v| revisions.profile(v))
        .ok_or_else(|| RcpError::version_mismatch(client, revisions.min_version(), revisions.max_version()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity::new(PeerInfo::new("t", "0"), ConformanceLevel::L0, Capabilities::default(), Revisions::default())
    }

    #[test]
    fn only_the_four_required_methods_are_lifecycle() {
        let lifecycle: Vec<Method> = Method::ALL.into_iter().filter(|m| m.callable_before_initialize()).collect();
        assert_eq!(lifecycle, [Method::Initialize, Method::Info, Method::Ping, Method::Shutdown]);
        assert!(lifecycle.iter().all(|m| m.capability().is_none()));
    }

    #[test]
    fn every_lifecycle_method_is_answered_before_initialize() {
        let identity = identity();
        for m in Method::ALL {
            let session = Session::new();
            let params = RawValue::from_string(r#"{"protocolVersion":1}"#.to_owned()).ok();
            let params = params.as_deref().filter(|_| m == Method::Initialize);
            match answer(&identity, &session, "1", m, params) {
                None => assert!(!m.callable_before_initialize(), "{m} is not answered"),
                Some(r) => assert!(r.is_ok(), "{m}: {r:?}"),
            }
        }
    }

    #[test]
    fn negotiation_takes_the_lower_version_above_the_floor() {
        let table = Revisions::default();
        let max = table.max_version();
        assert_eq!(negotiate(&table, i64::from(max) + 5).map(Profile::version).ok(), Some(max));
        assert!(negotiate(&table, 0).is_err());
        assert!(negotiate(&table, -1).is_err());
    }

    #[test]
    fn ping_echoes_string_or_number_nonces() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).ok();
        assert_eq!(ping("1", None).ok(), Some(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec()));
        let p = raw(r#"{"nonce":"n"}"#);
        assert_eq!(ping("1", p.as_deref()).ok(), Some(br#"{"jsonrpc":"2.0","id":1,"result":{"nonce":"n"}}"#.to_vec()));
        let p = raw(r#"{"nonce":[1]}"#);
        assert!(ping("1", p.as_deref()).is_err());
    }
}
