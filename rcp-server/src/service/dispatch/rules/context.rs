//! Rule: which notifications a handler may send while it runs. Progress frames (§9) go out
//! only when the server advertises `streaming` and the request carries a valid
//! `_meta.progressToken`; log frames (§17.1) only when the server advertises `log` and the
//! request (`_meta.logLevel`) or the session (at `initialize`) asked for them.

use rcp_wire::Meta;
use rcp_wire::capabilities::Capabilities;
use rcp_wire::notifications::LogLevel;
use serde_json::Value;

use crate::service::outbound::Outbound;

/// The progress channel of a request: its token and where the frames go.
pub(crate) fn progress(caps: &Capabilities, meta: Option<&Meta>, out: &Outbound) -> Option<(Value, Outbound)> {
    caps.streaming
        .as_ref()
        .and(meta.and_then(|m| m.get("progressToken")))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .map(|t| (t.clone(), out.clone()))
}

/// The log channel of a request: the lowest level that reaches the client, and where the
/// frames go. The request's own `_meta.logLevel` wins over the session's.
pub(crate) fn log(
    caps: &Capabilities,
    meta: Option<&Meta>,
    session_level: Option<LogLevel>,
    out: &Outbound,
) -> Option<(LogLevel, Outbound)> {
    let request_level = meta.and_then(|m| m.get("logLevel")).and_then(Value::as_str).and_then(LogLevel::parse);
    caps.log.as_ref().and(request_level.or(session_level)).map(|level| (level, out.clone()))
}

#[cfg(test)]
mod tests {
    use rcp_wire::capabilities::{Flag, LogCapability};
    use serde_json::json;

    use super::*;

    fn meta(v: Value) -> Meta {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn progress_needs_streaming_and_a_valid_token() {
        let out = Outbound::discard();
        let token = meta(json!({"progressToken": "p"}));
        assert!(progress(&Capabilities::default(), Some(&token), &out).is_none(), "streaming not advertised");
        let streaming = Capabilities { streaming: Some(Flag::default()), ..Capabilities::default() };
        assert_eq!(progress(&streaming, Some(&token), &out).map(|(t, _)| t), Some(json!("p")));
        assert!(progress(&streaming, Some(&meta(json!({"progressToken": 1.5}))), &out).is_none());
        assert!(progress(&streaming, None, &out).is_none());
    }

    #[test]
    fn the_request_log_level_wins_over_the_session() {
        let out = Outbound::discard();
        let logs = Capabilities { log: Some(LogCapability::default()), ..Capabilities::default() };
        let asked = meta(json!({"logLevel": "error"}));
        assert_eq!(log(&logs, Some(&asked), Some(LogLevel::Info), &out).map(|(l, _)| l), Some(LogLevel::Error));
        assert_eq!(log(&logs, None, Some(LogLevel::Info), &out).map(|(l, _)| l), Some(LogLevel::Info));
        assert!(log(&logs, None, None, &out).is_none(), "nobody asked");
        assert!(log(&Capabilities::default(), Some(&asked), None, &out).is_none(), "log not advertised");
    }
}
