//! The two transports of §5, reduced to "send a frame" and "receive the next thing the server
//! said". Over stdio that is a child process's pipes (§5.1); over HTTP every request is a `POST`
//! whose response body (a JSON frame, or the frames of an SSE stream) is queued for `recv`, so the
//! checks are written once for both (§5.2).
//!
//! The suite keeps its own transport on purpose, and depends on none of the crates it certifies
//! (`rcp-wire`, `rcp-server`, `rcp-client`): a referee that framed and parsed bytes with the
//! framework's own code would share its defects, and a defect there could hide itself from the
//! very checks meant to catch it. Independence is the point, so this module is not replaced by
//! the workspace's shared child-process transport.

mod http;
mod stdio;

use tokio::time::Instant;

pub(crate) use http::{HttpTransport, Reply, Throttles, retry_after, wait_after};
pub(crate) use stdio::StdioTransport;

/// Something the server said.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// One line of stdout, or one HTTP response body / SSE `data:` payload.
    Text(String),
    /// HTTP only: a non-2xx status (the body, if any, follows as `Text` when it is JSON).
    Status(u16, String),
    /// A transport-level rule was broken (e.g. wrong `Content-Type`); attributed to the running check.
    Violation(String),
}

/// Why `recv` returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    /// Nothing arrived before the deadline.
    Timeout,
    /// The server closed stdout (process exited) — nothing more will arrive.
    Closed,
}

/// How to send one frame.
#[derive(Debug, Clone, Default)]
pub(crate) struct Send {
    /// HTTP: the method for the URL path (`POST <base>/<method>`); `None` posts to the base.
    pub method: Option<String>,
    /// HTTP: ask for Server-Sent Events (`Accept: text/event-stream`).
    pub sse: bool,
    /// HTTP: do not wait for the response before returning (it is queued when it arrives).
    pub background: bool,
    /// HTTP: a 4xx answer is acceptable (unparseable or non-request bodies, §5.2).
    pub allow_4xx: bool,
    /// HTTP: leave out the configured headers (credentials), to probe authentication.
    pub no_auth: bool,
}

/// Either transport.
pub(crate) enum Transport {
    /// NDJSON over a child's pipes.
    Stdio(StdioTransport),
    /// POST per request.
    Http(HttpTransport),
}

impl Transport {
    /// Sends one frame (a `\n` is appended over stdio).
    pub(crate) async fn send(&mut self, text: &str, how: &Send) -> Result<(), String> {
        match self {
            Transport::Stdio(s) => {
                let mut line = Vec::with_capacity(text.len() + 1);
                line.extend_from_slice(text.as_bytes());
                line.push(b'\n');
                s.write(&line).await
            }
            Transport::Http(h) => {
                h.send(text.to_owned(), how).await;
                Ok(())
            }
        }
    }

    /// The next thing the server said, or why there is none.
    pub(crate) async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match self {
            Transport::Stdio(s) => s.recv(deadline).await,
            Transport::Http(h) => h.recv(deadline).await,
        }
    }

    /// Whether this is the stdio transport.
    pub(crate) fn is_stdio(&self) -> bool {
        matches!(self, Transport::Stdio(_))
    }
}
