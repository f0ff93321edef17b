//! Rule: the answer is framed once, straight from the finished result (§4.3, §12).
//!
//! A handler's result is kept as a [`Body`] until here and serialised directly into its
//! response frame: no intermediate buffer, no copy into an envelope. Large bodies are framed
//! on the CPU executor rather than on the async runtime's threads, which also read requests,
//! answer pings and write answers. An error, from any earlier rule or from the handler, becomes
//! an error frame carrying the request's id.

use rcp_wire::RcpError;

use crate::operations::observe::Outcome;
use crate::server::exec::Executor;
use crate::service::dispatch::envelope::error_frame;

/// A finished result, serialised once, straight into its response frame, into a buffer sized
/// from `hint` up front.
pub(crate) struct Body {
    write: WriteBody,
    hint: usize,
}

/// Serialises the result it holds into the buffer.
type WriteBody = Box<dyn FnOnce(&mut Vec<u8>) -> serde_json::Result<()> + Send>;

/// The body of `v`, expected to serialise to about `hint` bytes.
pub(crate) fn body_sized<T: serde::Serialize + Send + 'static>(v: T, hint: usize) -> Body {
    Body { write: Box::new(move |buf| serde_json::to_writer(buf, &v)), hint }
}

/// The body of a small result.
pub(crate) fn body<T: serde::Serialize + Send + 'static>(v: T) -> Body {
    body_sized(v, 256)
}

/// Bodies expected to serialise to at least this many bytes are framed on the CPU executor's
/// finishing queue rather than on the async runtime's threads: a `retrieve` with k=100 full
/// texts is ~100 KB of escaping.
const FRAME_ON_EXECUTOR: usize = 32 * 1024;

impl Body {
    /// `{"jsonrpc":"2.0","id":<id>,"result":<body>}`; a serialisation failure is the engine's
    /// fault (`-32603`).
    fn frame(self, id: &str) -> Result<Vec<u8>, RcpError> {
        let mut out = Vec::with_capacity(32 + id.len() + self.hint);
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b",\"result\":");
        (self.write)(&mut out).map_err(|e| RcpError::internal(format!("could not serialise the result: {e}")))?;
        out.push(b'}');
        Ok(out)
    }
}

/// The response frame of `body`: large bodies are serialised on `executor`'s finishing queue
/// (ahead of queued searches, never refused), small ones right here.
async fn frame_on(executor: &Executor, body: Body, id: &str) -> Result<Vec<u8>, RcpError> {
    if body.hint < FRAME_ON_EXECUTOR {
        return body.frame(id);
    }
    let id = id.to_owned();
    executor.finish(move || body.frame(&id)).await?
}

/// The frame answering request `id` with `outcome`, and how the request ended (for the
/// metrics): the result framed, or an error frame when the call or the framing failed.
pub(crate) async fn answer(executor: &Executor, outcome: Result<Body, RcpError>, id: &str) -> (Vec<u8>, Outcome) {
    let framed = match outcome {
        Ok(body) => frame_on(executor, body, id).await,
        Err(e) => Err(e),
    };
    match framed {
        Ok(frame) => (frame, Outcome::Ok),
        Err(e) => (error_frame(Some(id), &e), Outcome::Error(e.code.0)),
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::{Hit, RetrieveResult};
    use serde_json::Value;

    use super::*;
    use crate::service::dispatch::finish::retrieve_size;

    #[test]
    fn bodies_are_written_into_their_frame() {
        let frame = body(serde_json::json!({"a": [1, 2]})).frame("\"x\"").expect("frame");
        assert_eq!(String::from_utf8_lossy(&frame), r#"{"jsonrpc":"2.0","id":"x","result":{"a":[1,2]}}"#);
        let res = RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]);
        let size = retrieve_size(&res);
        let frame = body_sized(res, size).frame("7").expect("frame");
        assert!(frame.len() <= size + 40, "the size hint covers the frame: {} > {size}", frame.len());
        // A map with non-string keys cannot be JSON: the engine's fault.
        let bad: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        assert_eq!(body(bad).frame("1").map_err(|e| e.code.0), Err(-32603));
    }

    /// Serialises to a string of `len` bytes naming the thread it was serialised on.
    struct ThreadName(usize);

    impl serde::Serialize for ThreadName {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            s.serialize_str(&format!("{name:-<width$}", width = self.0))
        }
    }

    #[tokio::test]
    async fn large_bodies_are_framed_on_the_executor() {
        let exec = Executor::new(crate::server::exec::ExecOptions { threads: 1, queue: 0, ..Default::default() });
        let on = |frame: Vec<u8>| {
            let v: Value = serde_json::from_slice(&frame).unwrap_or_default();
            v["result"].as_str().unwrap_or_default().trim_end_matches('-').to_owned()
        };
        let small = frame_on(&exec, body_sized(ThreadName(10), 10), "1").await.expect("frame");
        assert_ne!(on(small), "rcp-cpu", "a small body is framed where it was finished");
        let n = FRAME_ON_EXECUTOR;
        let large = frame_on(&exec, body_sized(ThreadName(n), n), "2").await.expect("frame");
        assert!(large.len() > n);
        assert_eq!(on(large), "rcp-cpu");
        let bad: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        let err = frame_on(&exec, body_sized(bad, n), "3").await.map_err(|e| e.code.0);
        assert_eq!(err, Err(-32603), "a failure on the executor is still the engine's fault");
    }

    #[tokio::test]
    async fn an_error_is_answered_with_the_request_id_and_counted_by_code() {
        let exec = Executor::new(crate::server::exec::ExecOptions { threads: 1, queue: 0, ..Default::default() });
        let (frame, outcome) = answer(&exec, Err(RcpError::cancelled(None)), "9").await;
        let v: Value = serde_json::from_slice(&frame).unwrap_or_default();
        assert_eq!(v["id"], 9);
        assert_eq!(outcome, Outcome::Error(v["error"]["code"].as_i64().unwrap_or_default()));
        let (frame, outcome) = answer(&exec, Ok(body(1)), "9").await;
        assert_eq!(String::from_utf8_lossy(&frame), r#"{"jsonrpc":"2.0","id":9,"result":1}"#);
        assert_eq!(outcome, Outcome::Ok);
    }
}
