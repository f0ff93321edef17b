//! Error codes of §12 and the protocol error object (`code`, `message`, `data`).

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON-RPC / RCP error code (§12). Unknown codes are kept as-is (§12: a receiver treats
/// an unrecognised code as a generic failure, never rejects the frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// `-32700` Invalid JSON.
    pub const PARSE_ERROR: Self = Self(-32700);
    /// `-32600` Not a valid Request object.
    pub const INVALID_REQUEST: Self = Self(-32600);
    /// `-32601` Reserved by JSON-RPC; RCP prefers [`ErrorCode::UNKNOWN_METHOD`].
    pub const METHOD_NOT_FOUND: Self = Self(-32601);
    /// `-32602` Missing/malformed params or filter field.
    pub const INVALID_PARAMS: Self = Self(-32602);
    /// `-32603` Server-side failure.
    pub const INTERNAL_ERROR: Self = Self(-32603);
    /// `-32001` Called before `initialize`.
    pub const NOT_INITIALIZED: Self = Self(-32001);
    /// `-32002` No common protocol version.
    pub const VERSION_MISMATCH: Self = Self(-32002);
    /// `-32003` Method exists but its capability was not advertised.
    pub const CAPABILITY_MISSING: Self = Self(-32003);
    /// `-32004` Method not defined by RCP.
    pub const UNKNOWN_METHOD: Self = Self(-32004);
    /// `-32005` A requested option value is not advertised.
    pub const OPTION_UNSUPPORTED: Self = Self(-32005);
    /// `-32006` Request was cancelled via `notifications/cancel`.
    pub const CANCELLED: Self = Self(-32006);
    /// `-32010` Model offline, index not built, upstream down.
    pub const BACKEND_UNAVAILABLE: Self = Self(-32010);
    /// `-32011` Server is shedding load.
    pub const RATE_LIMITED: Self = Self(-32011);
    /// `-32012` Caller is unauthenticated or not authorised.
    pub const UNAUTHORIZED: Self = Self(-32012);
    /// `-32013` Request exceeds a server limit.
    pub const PAYLOAD_TOO_LARGE: Self = Self(-32013);
    /// `-32014` The server's deadline for this request elapsed.
    pub const TIMEOUT: Self = Self(-32014);
    /// `-32015` A referenced entity does not exist.
    pub const NOT_FOUND: Self = Self(-32015);
    /// `-32016` The write conflicts with current state.
    pub const CONFLICT: Self = Self(-32016);

    /// The symbolic name of §12 (`"InvalidParams"`), or `None` for an unknown code.
    pub fn symbol(self) -> Option<&'static str> {
        Some(match self.0 {
            -32700 => "ParseError",
            -32600 => "InvalidRequest",
            -32601 => "MethodNotFound",
            -32602 => "InvalidParams",
            -32603 => "InternalError",
            -32001 => "NotInitialized",
            -32002 => "VersionMismatch",
            -32003 => "CapabilityMissing",
            -32004 => "UnknownMethod",
            -32005 => "OptionUnsupported",
            -32006 => "Cancelled",
            -32010 => "BackendUnavailable",
            -32011 => "RateLimited",
            -32012 => "Unauthorized",
            -32013 => "PayloadTooLarge",
            -32014 => "Timeout",
            -32015 => "NotFound",
            -32016 => "Conflict",
            _ => return None,
        })
    }

    /// Whether an identical retry might succeed, per the table of §12.2
    /// (`RateLimited`, `BackendUnavailable`, `Timeout` and, once, `InternalError`).
    pub fn is_retryable(self) -> bool {
        matches!(self.0, -32011 | -32010 | -32014 | -32603)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.symbol() {
            Some(s) => write!(f, "{} ({s})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The conventional `error.data` object of §12.1. Unknown keys are kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorData {
    /// The offending params path, e.g. `"filter.and[1].value"` (for `-32602`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The unsupported option (for `-32005`), e.g. `"mode"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
    /// Whether an identical retry might succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Hint to wait before retrying (for `-32011`/`-32010`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Human-readable diagnostic (never for control flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Any other keys a peer sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorData {
    fn is_empty(&self) -> bool {
        self.field.is_none()
            && self.option.is_none()
            && self.retryable.is_none()
            && self.retry_after_ms.is_none()
            && self.detail.is_none()
            && self.extra.is_empty()
    }
}

/// A protocol error: the JSON-RPC `error` object of §4.3 with RCP's `error.data` (§12.1).
///
/// Construct it with the per-code constructors ([`RcpError::invalid_params`],
/// [`RcpError::option_unsupported`], ...) so the code and its data always agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} [{code}]{}", self.detail_suffix())]
pub struct RcpError {
    /// The error code.
    pub code: ErrorCode,
    /// A short human-readable message saying what was wrong and what is allowed.
    pub message: String,
    /// Structured details (§12.1); skipped when empty.
    #[serde(default, skip_serializing_if = "data_is_empty")]
    pub data: Option<ErrorData>,
}

fn data_is_empty(d: &Option<ErrorData>) -> bool {
    d.as_ref().is_none_or(ErrorData::is_empty)
}

/// How many bytes of a peer's input an error message echoes back; longer input is cut and its
/// original length noted, so a hostile frame cannot make the server amplify it.
pub const ECHO_LIMIT: usize = 200;

/// The longest `message` or `error.data.detail` a constructed error carries.
const TEXT_LIMIT: usize = 2048;

/// `input` as an error may echo it: at most [`ECHO_LIMIT`] bytes, cut on a character
/// boundary, with the original length noted when cut.
pub fn echo(input: &str) -> Cow<'_, str> {
    clip(input, ECHO_LIMIT)
}

fn clip(s: &str, limit: usize) -> Cow<'_, str> {
    if s.len() <= limit {
        return Cow::Borrowed(s);
    }
    let mut end = limit;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &s[..end], s.len()))
}

fn clip_owned(s: String, limit: usize) -> String {
    match clip(&s, limit) {
        Cow::Borrowed(_) => s,
        Cow::Owned(c) => c,
    }
}

impl RcpError {
    fn detail_suffix(&self) -> String {
        match self.data.as_ref().and_then(|d| d.detail.as_deref()) {
            Some(d) if !self.message.contains(d) => format!(": {d}"),
            _ => String::new(),
        }
    }

    /// An error with a code and message and no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: clip_owned(message.into(), TEXT_LIMIT), data: None }
    }

    fn data_mut(&mut self) -> &mut ErrorData {
        self.data.get_or_insert_with(ErrorData::default)
    }

    /// Sets `error.data.detail`.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.data_mut().detail = Some(clip_owned(detail.into(), TEXT_LIMIT));
        self
    }

    /// Sets `error.data.retryable`.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.data_mut().retryable = Some(retryable);
        self
    }

    /// Sets `error.data.retryAfterMs` (and `retryable: true`).
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        let d = self.data_mut();
        d.retry_after_ms = Some(ms);
        d.retryable = Some(true);
        self
    }

    /// Sets `error.data.limit`: the limit the request exceeded (how many entries, bytes or
    /// parameters are allowed), so a client can tell its input is too large and by how much.
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.data_mut().extra.insert("limit".to_owned(), Value::from(limit));
        self
    }

    /// `error.data.limit`, if set (see [`RcpError::with_limit`]).
    pub fn limit(&self) -> Option<u64> {
        self.data.as_ref()?.extra.get("limit")?.as_u64()
    }

    /// `error.data.field`, if set.
    pub fn field(&self) -> Option<&str> {
        self.data.as_ref()?.field.as_deref()
    }

    /// `error.data.option`, if set.
    pub fn option(&self) -> Option<&str> {
        self.data.as_ref()?.option.as_deref()
    }

    /// `-32700`: the frame is not valid JSON.
    pub fn parse_error(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::PARSE_ERROR, "parse error: invalid JSON").with_detail(detail)
    }

    /// `-32600`: the frame is not a valid JSON-RPC request.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INVALID_REQUEST, message)
    }

    /// `-32602` with `error.data.field` naming the offending params path.
    pub fn invalid_params(field: impl Into<String>, detail: impl Into<String>) -> Self {
        let field = clip_owned(field.into(), ECHO_LIMIT);
        let detail = clip_owned(detail.into(), TEXT_LIMIT);
        let mut e = Self::new(ErrorCode::INVALID_PARAMS, format!("invalid params: {field}: {detail}"));
        let d = e.data_mut();
        d.field = Some(field);
        d.detail = Some(detail);
        e
    }

    /// `-32603`: a server-side failure.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::INTERNAL_ERROR, "internal error").with_detail(detail)
    }

    /// `-32001`: called before a successful `initialize`.
    pub fn not_initialized(method: &str) -> Self {
        Self::new(
            ErrorCode::NOT_INITIALIZED,
            format!(
                "'{}' called before a successful initialize; only info, ping and shutdown are allowed",
                echo(method)
            ),
        )
    }

    /// `-32002`: no common protocol version.
    pub fn version_mismatch(client: i64, floor: u32, max: u32) -> Self {
        Self::new(
            ErrorCode::VERSION_MISMATCH,
            format!("no common protocol version: client offers up to {client}, server supports {floor}..={max}"),
        )
    }

    /// `-32003`: the method is defined by RCP but its capability was not advertised.
    pub fn capability_missing(method: &str, capability: &str) -> Self {
        Self::new(
            ErrorCode::CAPABILITY_MISSING,
            format!("'{}' requires capability '{capability}', which this server does not advertise", echo(method)),
        )
    }

    /// `-32004`: the method is not defined by RCP.
    pub fn unknown_method(method: &str) -> Self {
        Self::new(ErrorCode::UNKNOWN_METHOD, format!("unknown method '{}'", echo(method)))
    }

    /// `-32005` with `error.data.option`: an option value outside the advertised set.
    ///
    /// `option` names the option (`"mode"`, `"filter.operators"`); `value` the rejected value;
    /// `advertised` the values that are allowed.
    pub fn option_unsupported(option: impl Into<String>, value: &str, advertised: &[&str]) -> Self {
        let option = clip_owned(option.into(), ECHO_LIMIT);
        let allowed = if advertised.is_empty() { "none".to_string() } else { advertised.join(", ") };
        let mut e = Self::new(
            ErrorCode::OPTION_UNSUPPORTED,
            format!("{option} '{}' not advertised; advertised: {allowed}", echo(value)),
        );
        e.data_mut().option = Some(option);
        e
    }

    /// `-32006`: the request was cancelled.
    pub fn cancelled(reason: Option<&str>) -> Self {
        let e = Self::new(ErrorCode::CANCELLED, "request cancelled");
        match reason {
            Some(r) => e.with_detail(r),
            None => e,
        }
    }

    /// `-32010`: a backend the request needs is unavailable.
    pub fn backend_unavailable(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::BACKEND_UNAVAILABLE, "backend unavailable").with_detail(detail).with_retryable(true)
    }

    /// `-32011`: load is being shed; retry after `retry_after_ms`.
    pub fn rate_limited(retry_after_ms: u64) -> Self {
        Self::new(ErrorCode::RATE_LIMITED, "rate limited; back off and retry").with_retry_after_ms(retry_after_ms)
    }

    /// `-32012`: the caller is not authorised.
    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::UNAUTHORIZED, "unauthorized")
    }

    /// `-32013`: the request exceeds a server limit.
    pub fn payload_too_large(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::PAYLOAD_TOO_LARGE, "payload too large").with_detail(detail)
    }

    /// `-32014`: the server's deadline for the request elapsed.
    pub fn timeout(deadline_ms: u64) -> Self {
        Self::new(ErrorCode::TIMEOUT, format!("deadline of {deadline_ms} ms elapsed")).with_retryable(true)
    }

    /// `-32015`: a referenced entity does not exist.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NOT_FOUND, format!("not found: {}", what.into()))
    }

    /// `-32015` with `error.data.field` `"cursor"`: a cursor this server issued but can no
    /// longer honour (expired, or of a format version it does not read), so the client must
    /// restart pagination from the first page (§10, §12.2). A cursor that is not one of this
    /// server's is [`RcpError::invalid_params`] on `cursor` instead.
    pub fn cursor_expired(detail: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorCode::NOT_FOUND, "cursor expired; restart pagination without a cursor")
            .with_detail(detail)
            .with_retryable(false);
        e.data_mut().field = Some("cursor".to_owned());
        e
    }

    /// `-32016`: the write conflicts with current state.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::CONFLICT, "conflict").with_detail(detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_params_carries_field() {
        let e = RcpError::invalid_params("filter.and[1].value", "expected a number");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["code"], -32602);
        assert_eq!(v["data"]["field"], "filter.and[1].value");
    }

    #[test]
    fn empty_data_is_skipped_and_unknown_codes_round_trip() {
        let e = RcpError::new(ErrorCode(-32099), "x");
        assert_eq!(serde_json::to_value(&e).unwrap(), json!({"code": -32099, "message": "x"}));
        let back: RcpError = serde_json::from_value(json!({"code": -1, "message": "m", "data": {"x-a": 1}})).unwrap();
        assert_eq!(back.code, ErrorCode(-1));
        assert_eq!(back.data.unwrap().extra["x-a"], 1);
    }

    #[test]
    fn echoed_input_is_cut_with_its_length() {
        let huge = "m".repeat(1 << 20);
        let e = RcpError::unknown_method(&huge);
        assert!(e.message.len() < 300, "{} bytes", e.message.len());
        assert!(e.message.contains("(1048576 bytes)"));
        let e = RcpError::invalid_params(huge.clone(), huge.clone());
        assert!(e.field().is_some_and(|f| f.len() < 300));
        assert!(serde_json::to_vec(&e).unwrap().len() < 5000);
        // Multi-byte characters are cut on a boundary.
        assert!(echo(&"é".repeat(300)).ends_with("(600 bytes)"));
        assert_eq!(echo("short"), "short");
    }

    #[test]
    fn an_expired_cursor_is_not_found_on_cursor() {
        let e = RcpError::cursor_expired("the index changed");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["code"], -32015);
        assert_eq!(v["data"]["field"], "cursor");
        assert_eq!(v["data"]["retryable"], false);
        assert!(e.to_string().contains("restart pagination") && e.to_string().contains("the index changed"), "{e}");
    }

    #[test]
    fn option_unsupported_lists_allowed() {
        let e = RcpError::option_unsupported("mode", "dense", &["sparse"]);
        assert_eq!(e.option(), Some("mode"));
        assert!(e.message.contains("advertised: sparse"));
    }
}
