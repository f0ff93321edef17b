//! The MCP bridge's stdio transport: NDJSON frames read with rcp-wire's bounded splitter,
//! checked before rmcp sees them, and answered as JSON-RPC 2.0 requires when they are not
//! messages (rmcp's own stdio transport ignores unparsable input and answers some invalid
//! frames without an `id`):
//!
//! - a line that is not UTF-8, not JSON, or nested deeper than serde_json's limit (128) is
//!   `-32700` (parse error) with `"id": null`;
//! - a line longer than [`FrameLimits::max_frame_bytes`] is skipped without being held in
//!   memory and answered `-32600` with `"id": null` and the limit in `error.data`;
//! - JSON that is not a request, notification or response (not an object, an empty or any
//!   batch, a wrong `jsonrpc`, a `method` that is not a string, an `id` that is not a string,
//!   number or null, `params` that are not structured) is `-32600` (invalid request), with the
//!   frame's `id` when it has a valid one and `null` otherwise;
//! - a well-formed request whose params do not fit its MCP method is `-32602` with its `id`;
//!   a notification is never answered.
//!
//! Everything else goes to rmcp. Frames both ways pass through bounded queues, so a client
//! that stops reading stdout stops the bridge reading stdin instead of growing a buffer.

use std::io;

use rcp_wire::ndjson::{Line, LineSplitter};
use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// JSON-RPC 2.0: invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0: the JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;

/// The request methods the bridge serves (its handler's), whose params rmcp parses.
const BRIDGED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// Frames waiting in each direction before the other side is made to wait.
const QUEUED_FRAMES: usize = 32;
/// Bytes read from the input at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Bounds of the bridge's stdio transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Longest accepted line, in bytes; a longer one is skipped and answered `-32600`.
    pub max_frame_bytes: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self { max_frame_bytes: rcp_wire::ndjson::DEFAULT_MAX_LINE_BYTES }
    }
}

/// What became of one inbound line.
#[derive(Debug)]
enum Verdict {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// An error frame to answer with.
    Answer(Value),
    /// Nothing to do (an invalid notification or response).
    Ignore,
}

/// rmcp's side of the transport: messages the reader accepted, frames for the writer.
#[derive(Debug)]
pub struct NdjsonTransport {
    incoming: mpsc::Receiver<Box<RxJsonRpcMessage<RoleServer>>>,
    outgoing: mpsc::Sender<Vec<u8>>,
}

/// The tasks behind an [`NdjsonTransport`]; [`Pump::finish`] waits until every frame queued
/// for the output has been written.
#[derive(Debug)]
pub struct Pump {
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<io::Result<()>>,
}

impl Pump {
    /// Stops reading and waits for the writer to write what is queued (it ends once the
    /// transport, the only other sender, is dropped).
    pub async fn finish(self) -> io::Result<()> {
        self.reader.abort();
        let _ = self.reader.await;
        match self.writer.await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(e)),
        }
    }
}

/// A transport over `input` and `output` (the bridge uses stdin and stdout), and the tasks that
/// read and write them.
pub fn transport<R, W>(input: R, output: W, limits: FrameLimits) -> (NdjsonTransport, Pump)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, incoming) = mpsc::channel(QUEUED_FRAMES);
    let (outgoing, to_write) = mpsc::channel(QUEUED_FRAMES);
    let reader = tokio::spawn(read(input, limits, to_rmcp, outgoing.clone()));
    let writer = tokio::spawn(write(output, to_write));
    (NdjsonTransport { incoming, outgoing }, Pump { reader, writer })
}

/// Reads lines until the input ends (or rmcp stops listening), handing messages to rmcp and
/// error frames to the writer.
async fn read<R: AsyncRead + Unpin>(
    mut input: R,
    limits: FrameLimits,
    to_rmcp: mpsc::Sender<Box<RxJsonRpcMessage<RoleServer>>>,
    answers: mpsc::Sender<Vec<u8>>,
) {
    let mut splitter = LineSplitter::new(limits.max_frame_bytes);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut lines = Vec::new();
    loop {
        let n = match input.read(&mut buf).await {
            Ok(0) => {
                splitter.finish(&mut lines);
                0
            }
            Ok(n) => {
                splitter.push(&buf[..n], &mut lines);
                n
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading MCP frames failed; closing");
                return;
            }
        };
        for line in lines.drain(..) {
            let sent = match judge(line, limits) {
                Verdict::Message(m) => to_rmcp.send(m).await.is_ok(),
                Verdict::Answer(frame) => answers.send(line_of(&frame)).await.is_ok(),
                Verdict::Ignore => true,
            };
            if !sent {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

/// Writes each queued frame, flushed, until every sender is gone.
async fn write<W: AsyncWrite + Unpin>(mut output: W, mut frames: mpsc::Receiver<Vec<u8>>) -> io::Result<()> {
    while let Some(frame) = frames.recv().await {
        output.write_all(&frame).await?;
        output.flush().await?;
    }
    Ok(())
}

fn line_of(frame: &Value) -> Vec<u8> {
    let mut line = frame.to_string().into_bytes();
    line.push(b'\n');
    line
}

fn error_frame(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The decision for one line, as the module documentation lists.
fn judge(line: Line, limits: FrameLimits) -> Verdict {
    let bytes = match line {
        Line::Frame(bytes) => bytes,
        Line::TooLong(n) => {
            tracing::warn!(bytes = n, limit = limits.max_frame_bytes, "MCP frame over the size limit skipped");
            return Verdict::Answer(error_frame(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: frame too large",
                Some(json!({"bytes": n, "limit": limits.max_frame_bytes})),
            ));
        }
    };
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(&bytes);
    if let Err(e) = std::str::from_utf8(bytes) {
        let detail = format!("not UTF-8: invalid byte at offset {}", e.valid_up_to());
        return Verdict::Answer(error_frame(Value::Null, PARSE_ERROR, "Parse error", Some(json!({"detail": detail}))));
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Answer(error_frame(
                Value::Null,
                PARSE_ERROR,
                "Parse error",
                Some(json!({"detail": e.to_string()})),
            ));
        }
    };
    if let Err((id, why)) = check_envelope(&value) {
        return Verdict::Answer(error_frame(id, INVALID_REQUEST, "Invalid Request", Some(json!({"detail": why}))));
    }
    let id = value.get("id").cloned();
    let is_request = value.get("method").is_some() && id.is_some();
    let method = value.get("method").and_then(Value::as_str).map(str::to_owned);
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        // rmcp reads a request of a method it knows whose params do not fit as a custom
        // request, and would answer "method not found".
        Ok(JsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && method.as_deref().is_some_and(|m| BRIDGED_METHODS.contains(&m)) =>
        {
            Verdict::Answer(error_frame(
                id.unwrap_or(Value::Null),
                INVALID_PARAMS,
                "Invalid params",
                Some(json!({"detail": format!("the params do not fit '{}'", method.unwrap_or_default())})),
            ))
        }
        Ok(m) => Verdict::Message(Box::new(m)),
        Err(e) if is_request => Verdict::Answer(error_frame(
            id.unwrap_or(Value::Null),
            INVALID_PARAMS,
            "Invalid params",
            Some(json!({"detail": e.to_string()})),
        )),
        Err(e) => {
            tracing::debug!(error = %e, "an invalid MCP notification or response ignored");
            Verdict::Ignore
        }
    }
}

/// Checks the JSON-RPC 2.0 envelope; `Err` carries the id to answer with (the frame's, when
/// it is a valid one) and what is wrong.
fn check_envelope(v: &Value) -> Result<(), (Value, String)> {
    let Some(o) = v.as_object() else {
        let why = match v {
            Value::Array(a) if a.is_empty() => "an empty batch".to_owned(),
            Value::Array(_) => "batches are not supported; send one message per line".to_owned(),
            other => format!("a message must be an object, got {}", kind(other)),
        };
        return Err((Value::Null, why));
    };
    let id = match o.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id.clone()),
        Some(other) => {
            return Err((Value::Null, format!("'id' must be a string, a number or null, got {}", kind(other))));
        }
    };
    let fail = |why: String| Err((id.clone().unwrap_or(Value::Null), why));
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return fail("'jsonrpc' must be \"2.0\"".to_owned());
    }
    match o.get("method") {
        Some(Value::String(_)) if id == Some(Value::Null) => {
            return fail("a request's 'id' must not be null".to_owned());
        }
        Some(Value::String(_)) => {}
        Some(other) => return fail(format!("'method' must be a string, got {}", kind(other))),
        None if o.contains_key("result") || o.contains_key("error") => {
            return if id.is_some() { Ok(()) } else { fail("a response needs an 'id'".to_owned()) };
        }
        None => return fail("'method' is missing".to_owned()),
    }
    match o.get("params") {
        None | Some(Value::Object(_) | Value::Array(_)) => Ok(()),
        Some(other) => fail(format!("'params' must be an object or an array, got {}", kind(other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Transport<RoleServer> for NdjsonTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outgoing = self.outgoing.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            outgoing.send(line).await.map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed"))
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await.map(|m| *m)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &[u8]) -> Value {
        match judge(Line::Frame(line.to_vec()), FrameLimits::default()) {
            Verdict::Answer(v) => v,
            other => panic!("{}: expected an answer, got {other:?}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn unparsable_lines_are_parse_errors_with_a_null_id() {
        let deep = "[".repeat(100_000);
        for line in [&b"{not json"[..], b"\xff\xfe{}", deep.as_bytes(), b"{\"jsonrpc\":\"2.0\",\"id\":1"] {
            let v = answer(line);
            assert_eq!((&v["error"]["code"], &v["id"]), (&json!(PARSE_ERROR), &Value::Null), "{v}");
        }
    }

    #[test]
    fn invalid_requests_keep_a_valid_id_and_name_the_problem() {
        let cases = [
            (r#"[]"#, Value::Null, "empty batch"),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Value::Null, "batches"),
            (r#"7"#, Value::Null, "object"),
            (r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, json!(3), "jsonrpc"),
            (r#"{"jsonrpc":"2.0","id":"x","method":5}"#, json!("x"), "'method'"),
            (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, Value::Null, "'id'"),
            (r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":"p"}"#, json!(4), "'params'"),
            (r#"{"jsonrpc":"2.0","id":5}"#, json!(5), "missing"),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, Value::Null, "null"),
        ];
        for (line, id, why) in cases {
            let v = answer(line.as_bytes());
            assert_eq!((&v["error"]["code"], &v["id"]), (&json!(INVALID_REQUEST), &id), "{line}: {v}");
            assert!(v["error"]["data"]["detail"].as_str().is_some_and(|d| d.contains(why)), "{line}: {v}");
        }
    }

    #[test]
    fn params_that_do_not_fit_the_method_are_invalid_params() {
        let v = answer(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":7}}"#);
        assert_eq!((&v["error"]["code"], &v["id"]), (&json!(INVALID_PARAMS), &json!(9)), "{v}");
    }

    #[test]
    fn valid_messages_and_over_long_lines() {
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(matches!(judge(Line::Frame(ping.to_vec()), FrameLimits::default()), Verdict::Message(_)));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(judge(Line::Frame(note.to_vec()), FrameLimits::default()), Verdict::Message(_)));
        match judge(Line::TooLong(5000), FrameLimits { max_frame_bytes: 4096 }) {
            Verdict::Answer(v) => {
                assert_eq!((&v["error"]["code"], &v["id"]), (&json!(INVALID_REQUEST), &Value::Null));
                assert_eq!(v["error"]["data"]["limit"], 4096);
            }
            other => panic!("{other:?}"),
        }
    }
}
