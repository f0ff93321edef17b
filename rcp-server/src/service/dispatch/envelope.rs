//! The JSON-RPC envelope, shared by every transport: the zero-copy parse of an inbound message
//! (§4), the id check (§4.1), and the `result`/`error` frames written back (§4.3, §12).

use std::borrow::Cow;

use rcp_wire::RcpError;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// Keeps an explicit `null` distinguishable from an absent key.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// One inbound message (not a batch), decoded just enough to route it.
pub(super) enum Inbound<'a> {
    /// Not a request; answer with this frame and do nothing else.
    Invalid(Vec<u8>),
    /// A response from the client: this server sends no requests, so there is nothing to
    /// correlate and nothing to answer.
    Response,
    /// A notification (§4.5): never answered.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The raw params, if any.
        params: Option<&'a RawValue>,
    },
    /// A request with a valid id (§4.1) and object-or-absent params.
    Request {
        /// The raw id, a JSON string or number.
        id: &'a str,
        /// The method name.
        method: Cow<'a, str>,
        /// The raw params object, if any.
        params: Option<&'a RawValue>,
    },
}

/// Decodes one message: the envelope checks of JSON-RPC 2.0 (§4) and nothing more.
pub(super) fn decode(frame: &[u8]) -> Inbound<'_> {
    if frame.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        // Only an object can be a request; serde would otherwise read an array positionally.
        return Inbound::Invalid(match serde_json::from_slice::<Value>(frame) {
            Err(e) => error_frame(None, &RcpError::parse_error(e.to_string())),
            Ok(v) => error_frame(
                None,
                &RcpError::invalid_request(format!(
                    "not a valid request: a request must be a JSON object, got {}",
                    rcp_wire::message::json_type(&v)
                )),
            ),
        });
    }
    let env: Envelope<'_> = match serde_json::from_slice(frame) {
        Ok(env) => env,
        Err(e) => return Inbound::Invalid(malformed(frame, e)),
    };
    if let Some(v) = &env.jsonrpc
        && v != "2.0"
        && env.id.is_some()
    {
        let id = env.id.map(RawValue::get).filter(|r| is_valid_id(r));
        return Inbound::Invalid(error_frame(
            id,
            &RcpError::invalid_request(format!("jsonrpc must be \"2.0\", got \"{v}\"")),
        ));
    }
    let Some(method) = env.method else {
        if env.result.is_some() || env.error.is_some() {
            return Inbound::Response;
        }
        let id = env.id.map(RawValue::get).filter(|r| is_valid_id(r));
        return Inbound::Invalid(error_frame(id, &RcpError::invalid_request("missing 'method'")));
    };
    let Some(id) = env.id else {
        return Inbound::Notification { method, params: env.params };
    };
    let id = id.get();
    if !is_valid_id(id) {
        return Inbound::Invalid(error_frame(
            None,
            &RcpError::invalid_request("id must be a string or a number that fits a double"),
        ));
    }
    if let Some(p) = env.params
        && !p.get().starts_with('{')
    {
        return Inbound::Invalid(error_frame(
            Some(id),
            &RcpError::invalid_params("params", "params must be an object"),
        ));
    }
    Inbound::Request { id, method, params: env.params }
}

/// A frame that did not parse as an envelope: invalid JSON (-32700) or valid JSON that is not
/// a request (-32600, echoing the id when one can be recovered).
fn malformed(frame: &[u8], e: serde_json::Error) -> Vec<u8> {
    if !e.is_data() {
        return error_frame(None, &RcpError::parse_error(e.to_string()));
    }
    let value = serde_json::from_slice::<Value>(frame).ok();
    let id = value.as_ref().and_then(|v| v.get("id").filter(|i| i.is_string() || i.is_number()).map(|i| i.to_string()));
    let detail = match &value {
        Some(v) if !v.is_object() => {
            format!("a request must be a JSON object, got {}", rcp_wire::message::json_type(v))
        }
        _ => e.to_string().split(" at line ").next().unwrap_or_default().to_owned(),
    };
    error_frame(id.as_deref(), &RcpError::invalid_request(format!("not a valid request: {detail}")))
}

/// Whether a raw JSON id is a string or a number (§4.1). A number must also fit an IEEE-754
/// double: echoing `1e400` back would make the answer unreadable to most JSON stacks.
pub(crate) fn is_valid_id(raw: &str) -> bool {
    match raw.as_bytes().first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => raw.parse::<f64>().is_ok_and(f64::is_finite),
        _ => false,
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` from already-serialised parts.
pub(crate) fn ok_frame(id: &str, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + id.len() + result.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":<id|null>,"error":{...}}`.
pub(crate) fn error_frame(id: Option<&str>, error: &RcpError) -> Vec<u8> {
    let body = serde_json::to_vec(error).unwrap_or_else(|_| br#"{"code":-32603,"message":"internal error"}"#.to_vec());
    let id = id.unwrap_or("null");
    let mut out = Vec::with_capacity(32 + id.len() + body.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"error\":");
    out.extend_from_slice(&body);
    out.push(b'}');
    out
}

/// The `error.code` of an error frame (an invalid frame's answer, to count it by code).
pub(super) fn error_code(frame: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Code {
        code: i64,
    }
    #[derive(Deserialize)]
    struct ErrorOnly {
        error: Code,
    }
    serde_json::from_slice::<ErrorOnly>(frame).ok().map(|f| f.error.code)
}

/// `[a,b,...]`: the answers of a batch (§11) in one frame.
pub(super) fn join_batch(parts: Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&p);
    }
    out.push(b']');
    out
}

/// What a transport needs to know about a body before dispatching it (HTTP, §5.2): whether it
/// is a batch, and the id and method of a single message when they can be read.
#[cfg(feature = "http")]
pub(crate) struct Shape {
    /// The body is a JSON array.
    pub batch: bool,
    /// The request's id, when it is a valid one (§4.1).
    pub id: Option<String>,
    /// The request's method name.
    pub method: Option<String>,
}

/// Reads the [`Shape`] of a body; fails only when the body is not JSON at all.
#[cfg(feature = "http")]
pub(crate) fn shape(body: &[u8]) -> Result<Shape, serde_json::Error> {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(default, borrow)]
        id: Option<&'a RawValue>,
        #[serde(default, borrow)]
        method: Option<Cow<'a, str>>,
    }
    let raw: &RawValue = serde_json::from_slice(body)?;
    let text = raw.get();
    if text.starts_with('[') {
        return Ok(Shape { batch: true, id: None, method: None });
    }
    let peek: Option<Peek<'_>> = serde_json::from_str(text).ok();
    let id = peek.as_ref().and_then(|p| p.id).map(RawValue::get).filter(|r| is_valid_id(r)).map(str::to_owned);
    let method = peek.and_then(|p| p.method).map(Cow::into_owned);
    Ok(Shape { batch: false, id, method })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap_or("<not utf-8>")
    }

    #[test]
    fn ids_are_strings_or_numbers() {
        assert!(is_valid_id("\"a\""));
        assert!(is_valid_id("-1"));
        assert!(is_valid_id("7"));
        assert!(!is_valid_id("null"));
        assert!(!is_valid_id("{}"));
        assert!(!is_valid_id("true"));
        assert!(is_valid_id("1.5e3"));
        assert!(!is_valid_id("-2E14306"), "beyond f64: the answer could not be read back");
        assert!(!is_valid_id("1e400"));
    }

    #[test]
    fn frames_are_written_from_parts() {
        assert_eq!(text(&ok_frame("1", b"{}")), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let e = error_frame(None, &RcpError::invalid_request("x"));
        assert!(text(&e).starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600"#), "{}", text(&e));
        assert_eq!(text(&join_batch(vec![b"1".to_vec(), b"2".to_vec()])), "[1,2]");
    }

    #[test]
    fn decode_routes_by_shape() {
        assert!(matches!(decode(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Inbound::Response));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"notifications/cancel"}"#),
            Inbound::Notification { .. }
        ));
        match decode(br#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}"#) {
            Inbound::Request { id, method, params } => {
                assert_eq!(id, "\"a\"");
                assert_eq!(method, "ping");
                assert_eq!(params.map(RawValue::get), Some("{}"));
            }
            _ => panic!("expected a request"),
        }
        let Inbound::Invalid(f) = decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#) else {
            panic!("array params must be refused")
        };
        assert!(text(&f).contains("-32602"), "{}", text(&f));
        let Inbound::Invalid(f) = decode(b"{not json") else { panic!("expected a parse error") };
        assert!(text(&f).contains("-32700"), "{}", text(&f));
        assert_eq!(error_code(&f), Some(-32700));
        assert_eq!(error_code(&ok_frame("1", b"{}")), None);
    }

    #[cfg(feature = "http")]
    #[test]
    fn shape_peeks_at_id_and_method() {
        let s = shape(br#"{"id":2,"method":"retrieve"}"#).ok();
        assert_eq!(s.as_ref().and_then(|s| s.id.as_deref()), Some("2"));
        assert_eq!(s.as_ref().and_then(|s| s.method.as_deref()), Some("retrieve"));
        assert!(shape(b"[1]").is_ok_and(|s| s.batch));
        assert!(shape(b"nope").is_err());
    }
}
