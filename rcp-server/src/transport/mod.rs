//! Transports carry a session's frames; every protocol rule lives in the dispatcher.
//!
//! The seam is [`IntoTransport`]: [`crate::Server::serve`] serves one session over anything
//! that converts into a [`Transport`] — a `(reader, writer)` pair of async byte streams (a
//! socket's halves, a child's pipes, `tokio::io::duplex` in tests), or this process's own
//! stdin/stdout ([`Transport::stdio`]). Both frame NDJSON (§5.1) through one session pipeline
//! (`pipeline`); stdio adds its own reader and writer threads, so a sequential client is
//! answered with one `read` and one `write`. A transport that carries whole messages instead
//! of a byte stream drives a [`Connection`] frame by frame. HTTP (§5.2) is the other transport,
//! in [`http`] (also `rcp_server::http`): it hands each body to the same dispatcher.
//!
//! A byte stream has one peer, so the pipe is its flow control: when the CPU lanes are full its
//! requests wait for room and no further line is read until they drain (see
//! [`crate::exec::Executor::waiting`]); nothing is refused with `-32011`, every request is
//! answered, and memory stays bounded by what was read. Transports shared by many clients
//! (HTTP, a [`Connection`]) refuse instead.

mod connection;
#[cfg(feature = "http")]
pub mod http;
mod lines;
mod pipeline;
mod queue;
mod stdio;
mod stream;

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

pub use connection::{Connection, Reply};

use crate::service::dispatch::Dispatcher;

/// What a server serves one session over (§5.1): NDJSON lines over a byte stream.
pub struct Transport(Kind);

enum Kind {
    /// This process's stdin and stdout, read and written by threads of their own.
    Stdio,
    /// Any pair of async byte streams.
    Stream { reader: Box<dyn AsyncRead + Unpin + Send>, writer: Box<dyn AsyncWrite + Unpin + Send> },
}

impl Transport {
    /// This process's stdin and stdout. A plain thread reads stdin (its blocking read never
    /// holds up shutdown) and answers what it can on the spot; another gathers the rest into
    /// vectored writes. Both run [`crate::ServerOptions::io_thread_start`] first.
    pub fn stdio() -> Self {
        Self(Kind::Stdio)
    }

    /// NDJSON over `reader` and `writer`, with the same framing and behaviour as stdio.
    pub fn stream<R, W>(reader: R, writer: W) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self(Kind::Stream { reader: Box::new(reader), writer: Box::new(writer) })
    }

    /// Whether this is the process's own stdio (which announces itself with a start-up line).
    pub(crate) fn is_stdio(&self) -> bool {
        matches!(self.0, Kind::Stdio)
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Kind::Stdio => "Transport::Stdio",
            Kind::Stream { .. } => "Transport::Stream",
        })
    }
}

/// Anything a server can be served over; see [`Transport`].
pub trait IntoTransport {
    /// The transport.
    fn into_transport(self) -> Transport;
}

impl IntoTransport for Transport {
    fn into_transport(self) -> Transport {
        self
    }
}

impl<R, W> IntoTransport for (R, W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    fn into_transport(self) -> Transport {
        Transport::stream(self.0, self.1)
    }
}

/// Serves one session over `transport` until EOF or `shutdown`, in-flight requests drained
/// and every answer flushed.
pub(crate) async fn serve(dispatcher: Arc<Dispatcher>, transport: Transport) -> io::Result<()> {
    match transport.0 {
        Kind::Stdio => stdio::serve(dispatcher).await,
        Kind::Stream { reader, writer } => stream::serve(dispatcher, reader, writer).await,
    }
}
