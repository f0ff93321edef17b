//! Client errors: the server's own protocol errors, errors raised locally before any I/O
//! (gating, §14.4), and transport failures, each keeping its underlying cause.

use std::io;
use std::sync::Arc;

use rcp_wire::{ErrorCode, RcpError};

/// Why a client call failed.
///
/// Causes are kept behind `Arc` so the error stays `Clone` (a federation reports one engine's
/// failure in several places) while [`std::error::Error::source`] still reaches them.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a JSON-RPC error (§12).
    #[error("server error: {0}")]
    Rpc(RcpError),
    /// Refused locally, before any I/O: the server did not advertise the capability (-32003).
    #[error("'{method}' needs capability '{capability}', which the server did not advertise")]
    CapabilityMissing {
        /// The method called.
        method: String,
        /// The capability it needs.
        capability: String,
    },
    /// Refused locally, before any I/O: an option value the server did not advertise (-32005).
    #[error("{option} '{value}' not advertised by the server; advertised: {advertised}")]
    OptionUnsupported {
        /// The option (`mode`, `encoding`, ...).
        option: String,
        /// The value requested.
        value: String,
        /// What the server advertises.
        advertised: String,
    },
    /// Refused locally: the params are malformed (-32602), e.g. a filter the server would reject.
    #[error("invalid params: {0}")]
    InvalidParams(#[source] RcpError),
    /// The negotiated version is below this client's minimum (§7.1): the connection was aborted.
    #[error("negotiated protocol version {negotiated} is below the client minimum {minimum}")]
    VersionTooOld {
        /// What the server negotiated.
        negotiated: u32,
        /// This client's minimum.
        minimum: u32,
    },
    /// The client-side deadline elapsed; a cancel was sent and a late answer will be discarded.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The call was cancelled by the caller.
    #[error("cancelled")]
    Cancelled,
    /// The transport died (EOF, process exit, connection reset): every in-flight call fails
    /// with this, and it says nothing about whether the request took effect (§13.1).
    #[error("transport closed: {0}")]
    Closed(#[source] Disconnect),
    /// Could not connect or spawn.
    #[error("connect failed: {0}")]
    Connect(#[source] ConnectError),
    /// A frame or a result could not be decoded as JSON of the expected shape.
    #[error("protocol violation: {what}: {source}")]
    Decode {
        /// What was being decoded (`retrieve result`, `SSE frame`, ...).
        what: String,
        /// The decoder's error.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// A frame did not have the expected shape (no underlying decoder error).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The call went over one of the connection's [`crate::Limits`] (an HTTP body or SSE
    /// event too large or too slow, or too many frames queued to a server that does not read);
    /// the connection stays usable.
    #[error("{0}")]
    Limit(#[source] LimitExceeded),
}

/// Which of the [`crate::Limits`] a server went over, with the figures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitExceeded {
    /// A frame (stdio line, HTTP body or SSE event) over `max_frame_bytes`; it was discarded
    /// as it arrived, not held.
    #[error("the server sent a frame of at least {seen} bytes, over the limit of {limit} bytes (max_frame_bytes)")]
    FrameTooLarge {
        /// Bytes of the frame seen when it was refused (a lower bound of its size).
        seen: u64,
        /// The limit.
        limit: u64,
    },
    /// A frame whose first byte arrived but which did not complete within `frame_timeout`.
    #[error("the server started a frame and did not complete it within {} ms (frame_timeout)", .0.as_millis())]
    FrameTimeout(std::time::Duration),
    /// The server is not reading its input: too many frames or bytes already queued to it.
    #[error(
        "the server is not reading its input: {frames} frames ({bytes} bytes) already queued, \
         limits {max_frames} frames (max_queued_frames) and {max_bytes} bytes (max_queued_bytes)"
    )]
    QueueFull {
        /// Frames queued when the call was refused.
        frames: usize,
        /// Bytes queued when the call was refused.
        bytes: usize,
        /// The frame limit.
        max_frames: usize,
        /// The byte limit.
        max_bytes: usize,
    },
}

/// Why a transport closed (§13.1): the cause of [`ClientError::Closed`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Disconnect {
    /// The server closed its output stream (stdout, or the duplex's read half).
    #[error("server closed its output")]
    Eof,
    /// The engine process closed its stdout (it exited or crashed); its last stderr lines,
    /// which usually say why, are kept.
    #[error("{}", exited_message(stderr_tail))]
    Exited {
        /// The last lines the engine wrote to stderr (at most 20), oldest first.
        stderr_tail: Vec<String>,
    },
    /// Reading from the server failed.
    #[error("reading from the server: {0}")]
    Read(#[source] Arc<io::Error>),
    /// Writing to the server failed, or the writer stopped.
    #[error("writing to the server: {0}")]
    Write(#[source] Arc<io::Error>),
    /// An HTTP request or its body failed (the message names the underlying cause).
    #[error("HTTP: {}", causes(.0))]
    Http(#[source] Arc<reqwest::Error>),
    /// Nothing listens at the server's address.
    #[error("connection refused: is the server running at {addr}?")]
    Refused {
        /// `host:port` of the base URL.
        addr: String,
        /// The HTTP client's error.
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// The server answered 404 with a body that is not JSON-RPC: the base URL's path is not
    /// where it serves RCP.
    #[error("HTTP 404 Not Found at {url}: {hint}")]
    NotFound {
        /// The URL posted to.
        url: String,
        /// What to try instead.
        hint: String,
    },
    /// The HTTP server answered with a status and a body that is not a JSON-RPC response.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the body (at most 200 characters).
        body: String,
    },
    /// An SSE response ended before the final JSON-RPC response (§11).
    #[error("SSE stream ended without a final response")]
    StreamEnded,
    /// The client closed the connection itself (e.g. the negotiated version was too old).
    #[error("{0}")]
    Aborted(String),
    /// The server went over one of the connection's [`crate::Limits`] in a way that leaves
    /// the stream unusable (an over-long or never-ending stdio line): the connection was closed
    /// and the engine process, if any, killed.
    #[error("{0}")]
    Limit(#[source] LimitExceeded),
}

/// An error's message followed by those of its causes that it does not already contain
/// (reqwest's own message omits them: "error sending request for url (...)"), each once.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let m = cause.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        next = cause.source();
    }
    s
}

fn exited_message(tail: &[String]) -> String {
    if tail.is_empty() {
        return "the engine closed its stdout (it wrote nothing to stderr)".to_owned();
    }
    let mut s = String::from("the engine closed its stdout; its stderr ended with:");
    for line in tail {
        s.push_str("\n    ");
        s.push_str(line);
    }
    s
}

/// Why connecting failed: the cause of [`ClientError::Connect`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The stdio command was empty.
    #[error("empty command")]
    EmptyCommand,
    /// The engine process could not be spawned.
    #[error("spawn {program}: {source}")]
    Spawn {
        /// The program that was to be spawned.
        program: String,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The HTTP base URL is not usable; the message says how to fix it.
    #[error("invalid URL '{url}': {hint}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong and what to write instead.
        hint: String,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    HttpClient(#[source] Arc<reqwest::Error>),
    /// The TLS options could not be applied (a CA or client certificate file, §15).
    #[error("TLS: {}", causes(.0.as_ref()))]
    Tls(#[source] Arc<crate::transport::tls::TlsError>),
    /// No `initialize` answer arrived within the connect timeout.
    #[error("no initialize answer within {0:?}")]
    HandshakeTimeout(std::time::Duration),
    /// An engine's bearer token could not be read from its `tokenEnv` variable.
    #[error("engine '{engine}': {source}")]
    Token {
        /// The registry id of the engine.
        engine: String,
        /// What is wrong with the variable.
        #[source]
        source: crate::registry::TokenError,
    },
    /// No engine could be used (selection by a registry, a bad command line, ...).
    #[error("{0}")]
    Unavailable(String),
    /// The engine failed `failures` times in a row, so its circuit breaker is open: no
    /// attempt (no spawn, no connect) is made before the back-off ends.
    #[error(
        "engine '{engine}' is backing off after {failures} consecutive failures; next attempt in {} ms; last failure: {last}",
        .retry_in.as_millis()
    )]
    CircuitOpen {
        /// The registry id of the engine.
        engine: String,
        /// Consecutive failures so far.
        failures: u32,
        /// Time left before the next attempt (a half-open probe).
        retry_in: std::time::Duration,
        /// The last failure, as text.
        last: String,
    },
}

impl ClientError {
    /// A [`ClientError::Decode`] for `what`.
    pub(crate) fn decode(what: impl Into<String>, source: serde_json::Error) -> Self {
        Self::Decode { what: what.into(), source: Arc::new(source) }
    }

    /// The JSON-RPC code this error corresponds to, where there is one.
    pub fn code(&self) -> Option<ErrorCode> {
        Some(match self {
            Self::Rpc(e) | Self::InvalidParams(e) => e.code,
            Self::CapabilityMissing { .. } => ErrorCode::CAPABILITY_MISSING,
            Self::OptionUnsupported { .. } => ErrorCode::OPTION_UNSUPPORTED,
            Self::VersionTooOld { .. } => ErrorCode::VERSION_MISMATCH,
            Self::Timeout(_) => ErrorCode::TIMEOUT,
            Self::Cancelled => ErrorCode::CANCELLED,
            Self::Closed(_) | Self::Connect(_) | Self::Limit(_) => ErrorCode::BACKEND_UNAVAILABLE,
            Self::Decode { .. } | Self::Protocol(_) => return None,
        })
    }

    /// The error as a protocol error object (for federation notes and re-raising).
    pub fn to_rcp(&self) -> RcpError {
        match self {
            Self::Rpc(e) | Self::InvalidParams(e) => e.clone(),
            other => RcpError::new(other.code().unwrap_or(ErrorCode::INTERNAL_ERROR), other.to_string()),
        }
    }

    /// Whether retrying the same request may succeed (§12.2), and after how long at least.
    pub fn retry_hint(&self) -> Option<Option<u64>> {
        match self {
            Self::Rpc(e) => {
                let after = e.data.as_ref().and_then(|d| d.retry_after_ms);
                e.code.is_retryable().then_some(after)
            }
            Self::Timeout(_) => Some(None),
            _ => None,
        }
    }
}

impl From<RcpError> for ClientError {
    fn from(e: RcpError) -> Self {
        Self::Rpc(e)
    }
}

impl From<Disconnect> for ClientError {
    fn from(d: Disconnect) -> Self {
        Self::Closed(d)
    }
}

impl From<ConnectError> for ClientError {
    fn from(c: ConnectError) -> Self {
        Self::Connect(c)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn causes_are_reachable_and_messages_name_them() {
        let io = io::Error::new(io::ErrorKind::BrokenPipe, "pipe gone");
        let e = ClientError::Closed(Disconnect::Write(Arc::new(io)));
        assert_eq!(e.to_string(), "transport closed: writing to the server: pipe gone");
        let cause = e.source().and_then(|d| d.source()).expect("io cause");
        assert!(cause.downcast_ref::<Arc<io::Error>>().is_some() || cause.downcast_ref::<io::Error>().is_some());
        assert_eq!(e.code(), Some(ErrorCode::BACKEND_UNAVAILABLE));

        let json = serde_json::from_str::<u32>("x").unwrap_err();
        let e = ClientError::decode("retrieve result", json);
        assert!(e.to_string().starts_with("protocol violation: retrieve result: "), "{e}");
        assert!(e.source().is_some());
        assert_eq!(e.code(), None);
    }
}
