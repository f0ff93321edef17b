//! [`Connection`]: one session on a server, driven frame by frame.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::handler::BoxFuture;
use crate::service::dispatch::{self, Dispatcher, Processed};
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// One client's session on a server, for a transport that carries whole frames (a WebSocket,
/// a message queue) or a test: each inbound frame (a message or a batch) goes to
/// [`Connection::handle`], which resolves to the answer, if any. Progress and log frames go to
/// the sink given to [`crate::Server::connect`].
///
/// Frames are dispatched in the order `handle` is called; answers may complete in any order
/// (pipelining, §4.7), and a [`Reply`] need not be awaited before the next frame is handled.
///
/// A connection does not know whether its frames come from one peer, so when the CPU lanes
/// are full its requests are refused with `-32011` and `retryAfterMs`, as over HTTP; a byte
/// stream served with [`crate::Server::serve`] has one peer and is paced instead.
pub struct Connection {
    dispatcher: Arc<Dispatcher>,
    session: Arc<Session>,
    out: Outbound,
}

impl Connection {
    /// A connection on `session`, its notifications going to `out`.
    pub(crate) fn new(dispatcher: Arc<Dispatcher>, session: Arc<Session>, out: Outbound) -> Self {
        Self { dispatcher, session, out }
    }

    /// Dispatches one inbound frame now; the returned [`Reply`] resolves to its answer (`None`
    /// for notifications, all-notification batches and stray responses).
    pub fn handle(&self, frame: &[u8]) -> Reply {
        Reply(match self.process(frame) {
            Processed::Nothing => State::Ready(None),
            Processed::Ready(b) | Processed::Shutdown(b) => State::Ready(Some(b)),
            Processed::Pending(f) => State::Running(f),
        })
    }

    /// Whether `shutdown` was received: the transport should stop reading, let in-flight
    /// replies finish, then close (§7.12).
    pub fn is_shutting_down(&self) -> bool {
        self.session.is_shutting_down()
    }

    /// Dispatches one inbound frame (for the crate's own transports).
    pub(crate) fn process(&self, frame: &[u8]) -> Processed {
        dispatch::process(&self.dispatcher, &self.session, frame, &self.out)
    }

    /// What the session is served from.
    pub(crate) fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection").field("session", &self.session).finish_non_exhaustive()
    }
}

/// The answer to one frame given to [`Connection::handle`]: ready at once for what the
/// framework answers itself, else when the handler finishes.
#[must_use = "a reply does nothing unless awaited"]
pub struct Reply(State);

enum State {
    Ready(Option<Vec<u8>>),
    Running(BoxFuture<Option<Vec<u8>>>),
}

impl Future for Reply {
    type Output = Option<Vec<u8>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            State::Ready(answer) => Poll::Ready(answer.take()),
            State::Running(f) => f.as_mut().poll(cx),
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            State::Ready(_) => "Reply::Ready",
            State::Running(_) => "Reply::Running",
        })
    }
}
