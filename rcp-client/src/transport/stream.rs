//! The client's NDJSON transport (§5.1): many calls pipelined on one line stream and
//! correlated by id, over [`crate::ndjson`]'s lines — any `AsyncRead`/`AsyncWrite` pair, or
//! an engine process spawned by [`StreamTransport::spawn`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rcp_wire::RequestId;
use rcp_wire::notifications;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Request, Router, Transport};
use crate::error::LimitExceeded;
use crate::error::{ClientError, ConnectError, Disconnect};
use crate::ndjson::{ChildProcess, LineReader, LineWriter, SendError, Stderr, StderrHandle};

/// A stream transport: lines out through a [`LineWriter`], a reader task feeding the
/// [`Router`].
pub(crate) struct StreamTransport {
    lines: LineWriter,
    router: Arc<Router>,
    /// The engine process, killed when the transport is dropped.
    child: Option<ChildProcess>,
}

/// How many of an engine's last stderr lines a dead connection reports.
const STDERR_TAIL_LINES: usize = 20;

/// How long the end of an engine's stdout waits for its stderr to end as well.
const STDERR_GRACE: Duration = Duration::from_millis(500);

/// How long a `shutdown` that was answered waits for the engine process to exit; past it the
/// process is killed with the transport, as before.
const EXIT_GRACE: Duration = Duration::from_secs(5);

impl StreamTransport {
    /// Speaks NDJSON over `reader`/`writer`; answers and notifications go to `router`, and the
    /// end of `reader` closes it.
    pub(crate) fn new<R, W>(reader: R, writer: W, router: &Arc<Router>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_stderr(reader, writer, router, None)
    }

    /// As [`Self::new`]; when the engine's stderr is being kept (`stderr`), the end of
    /// `reader` waits briefly for the stderr to end too and closes the connection with its last
    /// lines ([`Disconnect::Exited`]), so the error says why the engine died.
    fn with_stderr<R, W>(reader: R, writer: W, router: &Arc<Router>, stderr: Option<StderrHandle>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let limits = *router.limits();
        let lines = LineWriter::with_limits(writer, &limits);
        let weak = Arc::downgrade(router);
        tokio::spawn(async move {
            let mut lines = LineReader::with_limits(reader, &limits);
            let reason = loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        let Some(router) = weak.upgrade() else { return };
                        router.on_line(&line);
                    }
                    Ok(None) => match &stderr {
                        Some(stderr) => {
                            stderr.closed(STDERR_GRACE).await;
                            break Disconnect::Exited { stderr_tail: stderr.tail() };
                        }
                        None => break Disconnect::Eof,
                    },
                    // Over a limit, or unreadable: the stream cannot be trusted any more. The
                    // reader is dropped with this task, so an engine still writing gets a
                    // broken pipe instead of filling memory.
                    Err(e) => break read_failure(e),
                }
            };
            if let Some(router) = weak.upgrade() {
                router.close(reason);
            }
        });
        Self { lines, router: Arc::clone(router), child: None }
    }

    /// Spawns `command` (program and arguments) and speaks over its stdin/stdout. Its stderr
    /// is forwarded to `tracing` (target `rcp_client::engine`), and its last
    /// [`STDERR_TAIL_LINES`] lines are kept for the error that reports the engine's death; the
    /// process is killed when the transport is dropped (and when it goes over a limit that
    /// closes the connection).
    pub(crate) fn spawn(command: &[String], router: &Arc<Router>) -> Result<Self, ConnectError> {
        let stderr = Stderr::Tail { lines: STDERR_TAIL_LINES, label: router.label().to_owned() };
        let mut child = ChildProcess::spawn_with_limits(command, stderr, router.limits())?;
        let (stdin, stdout) = (child.take_stdin()?, child.take_stdout()?);
        let mut transport = Self::with_stderr(stdout, stdin, router, child.stderr());
        transport.child = Some(child);
        Ok(transport)
    }

    fn send(&self, frame: Vec<u8>) -> Result<(), ClientError> {
        if let Some(reason) = self.router.closed() {
            return Err(ClientError::Closed(reason));
        }
        self.lines.try_send(frame).map_err(|e| match e {
            SendError::Full(limit) => ClientError::Limit(limit),
            SendError::Stopped(cause) => ClientError::Closed(Disconnect::Write(cause)),
        })?;
        self.router.count_frame();
        Ok(())
    }
}

/// Why reading stopped: a limit the server went over (typed), or the read error itself.
fn read_failure(e: std::io::Error) -> Disconnect {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<LimitExceeded>()) {
        Some(limit) => Disconnect::Limit(limit.clone()),
        None => Disconnect::Read(Arc::new(e)),
    }
}

impl Transport for StreamTransport {
    fn request<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Value, ClientError>> {
        let answer = self.router.expect(request.id.clone());
        let sent = self.send(request.frame.into_bytes());
        Box::pin(async move {
            sent?;
            answer.await.unwrap_or_else(|_| Err(ClientError::Closed(self.router.closed().unwrap_or(Disconnect::Eof))))
        })
    }

    fn notify(&self, _method: &str, frame: String) -> Result<(), ClientError> {
        self.send(frame.into_bytes())
    }

    fn abandon(&self, id: &RequestId) {
        if self.router.forget(id) {
            let frame = json!({"jsonrpc": "2.0", "method": notifications::CANCEL, "params": {"id": id, "reason": "abandoned by the client"}});
            let _ = self.send(frame.to_string().into_bytes());
        }
    }

    fn server_gone(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(child) = &self.child {
                let exit = child.exit();
                if tokio::time::timeout(EXIT_GRACE, exit.wait()).await.is_err() {
                    tracing::debug!(target: "rcp_client::engine", "{} did not exit within {EXIT_GRACE:?} of shutdown", child.program());
                }
            }
        })
    }
}
