//! The JSON-RPC 2.0 envelope of §4: requests, notifications, responses, ids and batches.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Meta;
use crate::error::RcpError;

/// The `jsonrpc` member every frame carries (§4).
pub const JSONRPC_VERSION: &str = "2.0";

/// A request id (§4.1, §4.7): a string or a number, echoed with the same JSON type and value.
///
/// Numbers keep their exact JSON form (`7`, `-3`, `1.5`), so an id round-trips unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id.
    Number(serde_json::Number),
    /// A string id.
    String(String),
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => Ok(Self::Number(n)),
            Value::String(s) => Ok(Self::String(s)),
            other => Err(de::Error::custom(format!("id must be a string or a number, got {}", json_type(&other)))),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n.into())
    }
}

impl From<i32> for RequestId {
    fn from(n: i32) -> Self {
        Self::Number(n.into())
    }
}

impl From<u64> for RequestId {
    fn from(n: u64) -> Self {
        Self::Number(n.into())
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A request: a call that expects exactly one response (§4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The id the response will echo.
    pub id: RequestId,
    /// The method name (§7).
    pub method: String,
    /// The params object; RCP never uses positional params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl Request {
    /// A request with the given id, method and params.
    pub fn new(id: impl Into<RequestId>, method: impl Into<String>, params: Value) -> Self {
        Self { jsonrpc: JSONRPC_VERSION.into(), id: id.into(), method: method.into(), params: Some(params) }
    }
}

/// A notification: a message with no `id`, never answered (§4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The method name, e.g. `notifications/progress`.
    pub method: String,
    /// The params object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl Notification {
    /// A notification with the given method and params.
    pub fn new(method: impl Into<String>, params: Value) -> Self {
        Self { jsonrpc: JSONRPC_VERSION.into(), method: method.into(), params: Some(params) }
    }
}

/// A response to a request (§4.2, §4.3): exactly one of `result` or `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` serialises as `null` (unparseable request).
    pub id: Option<RequestId>,
    /// The outcome.
    pub outcome: Result<Value, RcpError>,
}

impl Response {
    /// A success response.
    pub fn success(id: RequestId, result: Value) -> Self {
        Self { id: Some(id), outcome: Ok(result) }
    }

    /// An error response; `id` is `None` only when the request's id could not be recovered.
    pub fn error(id: Option<RequestId>, error: RcpError) -> Self {
        Self { id, outcome: Err(error) }
    }
}

#[derive(Serialize, Deserialize)]
struct ResponseWire {
    jsonrpc: String,
    id: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<RcpError>,
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (result, error) = match &self.outcome {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        ResponseWire { jsonrpc: JSONRPC_VERSION.into(), id: self.id.clone(), result, error }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ResponseWire::deserialize(d)?;
        let outcome = match (w.result, w.error) {
            (_, Some(e)) => Err(e),
            (Some(r), None) => Ok(r),
            (None, None) => return Err(de::Error::custom("response has neither result nor error")),
        };
        Ok(Self { id: w.id, outcome })
    }
}

/// Any single frame, as a peer receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request (has `id` and `method`).
    Request(Request),
    /// A notification (has `method`, no `id`).
    Notification(Notification),
    /// A response (has `result` or `error`).
    Response(Response),
}

impl Message {
    /// Classifies a parsed JSON value as a frame, or says why it is not one.
    pub fn from_value(v: Value) -> Result<Self, RcpError> {
        let Value::Object(map) = &v else {
            return Err(RcpError::invalid_request(format!("a frame must be an object, got {}", json_type(&v))));
        };
        if map.contains_key("method") {
            if map.contains_key("id") {
                serde_json::from_value(v).map(Message::Request)
            } else {
                serde_json::from_value(v).map(Message::Notification)
            }
        } else {
            serde_json::from_value(v).map(Message::Response)
        }
        .map_err(|e| RcpError::invalid_request(format!("not a valid JSON-RPC frame: {e}")))
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Request(r) => r.serialize(s),
            Message::Notification(n) => n.serialize(s),
            Message::Response(r) => r.serialize(s),
        }
    }
}

/// `params` of a method that takes none besides `_meta` (`shutdown`, `catalog/list`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyParams {
    /// Side-band data (§4.4).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `result` of a method that returns nothing besides `_meta` (`shutdown`).
pub type EmptyResult = EmptyParams;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_keep_their_json_type() {
        for raw in [json!(7), json!("7"), json!(-3), json!(1.5), json!(18446744073709551615u64)] {
            let id: RequestId = serde_json::from_value(raw.clone()).unwrap();
            assert_eq!(serde_json::to_value(&id).unwrap(), raw);
        }
        assert!(serde_json::from_value::<RequestId>(json!(null)).is_err());
        assert!(serde_json::from_value::<RequestId>(json!([1])).is_err());
    }

    #[test]
    fn response_serialises_exactly_one_outcome() {
        let ok = Response::success(1.into(), json!({}));
        assert_eq!(serde_json::to_value(&ok).unwrap(), json!({"jsonrpc":"2.0","id":1,"result":{}}));
        let err = Response::error(None, RcpError::invalid_request("bad"));
        let v = serde_json::to_value(&err).unwrap();
        assert_eq!(v["id"], Value::Null);
        assert!(v.get("result").is_none());
    }

    #[test]
    fn classify_frames() {
        assert!(matches!(
            Message::from_value(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
            Ok(Message::Request(_))
        ));
        assert!(matches!(Message::from_value(json!({"jsonrpc":"2.0","method":"x"})), Ok(Message::Notification(_))));
        assert!(matches!(Message::from_value(json!({"jsonrpc":"2.0","id":1,"result":{}})), Ok(Message::Response(_))));
        assert!(Message::from_value(json!([1])).is_err());
    }
}
