//! The four REQUIRED methods, callable before `initialize` and never gated (§7.1, §7.2, §7.12,
//! §7.15, §13): version negotiation, `info`, `ping` and `shutdown`.

use rcp_protocol::RcpError;
use rcp_protocol::lifecycle::InitializeParams;
use rcp_protocol::methods::Method;
use rcp_protocol::notifications::LogLevel;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

use super::Processed;
use super::frame::{is_valid_id, ok_frame};
use crate::profile::{MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION, Profile};
use crate::server::Server;
use crate::session::{Negotiated, Session};
use crate::validate;

/// A lifecycle method: answered by the framework itself, whatever was registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// `initialize` (§7.1).
    Initialize,
    /// `info` (§7.2).
    Info,
    /// `ping` (§7.15).
    Ping,
    /// `shutdown` (§7.12).
    Shutdown,
}

impl Lifecycle {
    /// The lifecycle method `m` is, if it is one.
    pub(super) fn of(m: Method) -> Option<Self> {
        match m {
            Method::Initialize => Some(Self::Initialize),
            Method::Info => Some(Self::Info),
            Method::Ping => Some(Self::Ping),
            Method::Shutdown => Some(Self::Shutdown),
            _ => None,
        }
    }
}

/// Whether `name` is answered the moment it is read and never waits for a handler, a worker or
/// a queue: `ping`, `info` and `notifications/cancel`. Transports exempt these from per-client
/// in-flight caps, so a client at its cap can still check liveness and cancel.
#[cfg(feature = "http")]
pub(crate) fn answered_at_once(name: &str) -> bool {
    name == rcp_protocol::notifications::CANCEL
        || Method::from_name(name)
            .and_then(Lifecycle::of)
            .is_some_and(|l| matches!(l, Lifecycle::Ping | Lifecycle::Info))
}

#[derive(Deserialize)]
struct PingParams<'a> {
    #[serde(default, borrow)]
    nonce: Option<&'a RawValue>,
}

impl Server {
    /// Answers a lifecycle request on `session`.
    pub(super) fn lifecycle(
        &self,
        session: &Session,
        id: &str,
        method: Lifecycle,
        params: Option<&RawValue>,
    ) -> Result<Processed, RcpError> {
        match method {
            Lifecycle::Ping => ping(id, params).map(Processed::Ready),
            Lifecycle::Info => {
                let info = session.negotiated().map_or(&self.shared.default_info, |n| &n.info);
                Ok(Processed::Ready(ok_frame(id, info)))
            }
            Lifecycle::Initialize => self.initialize(session, id, params).map(Processed::Ready),
            Lifecycle::Shutdown => {
                session.request_shutdown();
                Ok(Processed::Shutdown(ok_frame(id, b"{}")))
            }
        }
    }

    /// `initialize` (§7.1): negotiates once per session; on a stateless session it only reports
    /// the advertised set, idempotently (§5.2).
    fn initialize(&self, session: &Session, id: &str, params: Option<&RawValue>) -> Result<Vec<u8>, RcpError> {
        let p: InitializeParams = validate::parse(params)?;
        if session.is_stateless() {
            let profile = negotiate(p.protocol_version)?;
            let info = session.negotiated().map_or(&self.shared.default_info, |n| &n.info);
            return Ok(if profile == Profile::latest() {
                ok_frame(id, info)
            } else {
                ok_frame(id, &self.info_result(profile, &profile.apply(&self.shared.enabled), None))
            });
        }
        if session.is_initialized() {
            return Err(already_initialized());
        }
        let profile = negotiate(p.protocol_version)?;
        let caps = profile.apply(&self.shared.enabled);
        let meta_level =
            p.meta.as_ref().and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
        let client_wants_log = p.capabilities.as_ref().is_some_and(|c| c.log.is_some());
        let client_log = if client_wants_log { Some(meta_level.unwrap_or(LogLevel::Info)) } else { meta_level };
        let info: Arc<[u8]> = Arc::from(self.info_result(profile, &caps, session.id()));
        let n = Negotiated { profile, capabilities: Arc::new(caps), info: Arc::clone(&info), client_log };
        session.set_negotiated(n).map_err(|_| already_initialized())?;
        tracing::debug!(client = ?p.client.map(|c| c.name), version = profile.version(), "initialized");
        Ok(ok_frame(id, &info))
    }
}

fn already_initialized() -> RcpError {
    RcpError::invalid_request("already initialized; re-negotiation is not permitted mid-session")
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

/// Version negotiation (§7.1): `min(client, server)`, `-32002` only below the floor.
fn negotiate(client: i64) -> Result<Profile, RcpError> {
    let negotiated = client.min(i64::from(MAX_PROTOCOL_VERSION));
    u32::try_from(negotiated)
        .ok()
        .filter(|v| *v >= MIN_PROTOCOL_VERSION)
        .and_then(Profile::for_version)
        .ok_or_else(|| RcpError::version_mismatch(client, MIN_PROTOCOL_VERSION, MAX_PROTOCOL_VERSION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_required_methods_are_lifecycle() {
        let lifecycle: Vec<Method> = Method::ALL.into_iter().filter(|m| Lifecycle::of(*m).is_some()).collect();
        assert_eq!(lifecycle, [Method::Initialize, Method::Info, Method::Ping, Method::Shutdown]);
        assert!(lifecycle.iter().all(|m| m.capability().is_none()));
    }

    #[test]
    fn negotiation_takes_the_lower_version_above_the_floor() {
        assert_eq!(
            negotiate(i64::from(MAX_PROTOCOL_VERSION) + 5).map(Profile::version).ok(),
            Some(MAX_PROTOCOL_VERSION)
        );
        assert!(negotiate(0).is_err());
        assert!(negotiate(-1).is_err());
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
