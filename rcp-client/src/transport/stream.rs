//! NDJSON over any byte stream pair (§5.1): one JSON message per line, many calls pipelined on
//! one stream and correlated by id. [`StreamTransport::spawn`] runs an engine process and
//! speaks over its stdio.

use std::collections::VecDeque;
use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rcp_protocol::RequestId;
use rcp_protocol::notifications;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Request, Router, Transport};
use crate::error::{ClientError, ConnectError, Disconnect};

/// A stream transport: a writer task fed by a channel, a reader task feeding the [`Router`].
pub(crate) struct StreamTransport {
    frames: mpsc::UnboundedSender<Vec<u8>>,
    write_error: Arc<Mutex<Option<Arc<io::Error>>>>,
    router: Arc<Router>,
    /// The engine process, killed when the transport is dropped.
    _child: Option<Mutex<Child>>,
}

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

    /// As [`Self::new`]; when the engine's stderr is being collected (`stderr`), the end of
    /// `reader` waits briefly for the stderr to end too and closes the connection with its last
    /// lines ([`Disconnect::Exited`]), so the error says why the engine died.
    fn with_stderr<R, W>(reader: R, writer: W, router: &Arc<Router>, stderr: Option<StderrTail>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (frames, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let write_error = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&write_error);
        tokio::spawn(async move {
            let mut writer = writer;
            while let Some(frame) = rx.recv().await {
                let mut written = writer.write_all(&frame).await;
                if written.is_ok() {
                    written = writer.write_all(b"\n").await;
                }
                if written.is_ok() && rx.is_empty() {
                    written = writer.flush().await;
                }
                if let Err(e) = written {
                    if let Ok(mut slot) = failed.lock() {
                        *slot = Some(Arc::new(e));
                    }
                    break;
                }
            }
        });
        let weak = Arc::downgrade(router);
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            let reason = loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        let Some(router) = weak.upgrade() else { return };
                        router.on_line(&line);
                    }
                    Ok(None) => match stderr {
                        Some(tail) => break tail.finish().await,
                        None => break Disconnect::Eof,
                    },
                    Err(e) => break Disconnect::Read(Arc::new(e)),
                }
            };
            if let Some(router) = weak.upgrade() {
                router.close(reason);
            }
        });
        Self { frames, write_error, router: Arc::clone(router), _child: None }
    }

    /// Spawns `command` (program and arguments) and speaks over its stdin/stdout. Its stderr
    /// is forwarded to `tracing` (target `rcp_client::engine`), and its last
    /// [`STDERR_TAIL_LINES`] lines are kept for the error that reports the engine's death; the
    /// process is killed when the transport is dropped.
    pub(crate) fn spawn(command: &[String], router: &Arc<Router>) -> Result<Self, ConnectError> {
        let (program, args) = command.split_first().ok_or(ConnectError::EmptyCommand)?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ConnectError::Spawn { program: program.clone(), source: Arc::new(e) })?;
        let not_piped = |what: &str| ConnectError::Unavailable(format!("{program}: no {what} pipe"));
        let stdin = child.stdin.take().ok_or_else(|| not_piped("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| not_piped("stdout"))?;
        let tail = child.stderr.take().map(|stderr| StderrTail::collect(stderr, router.label().to_owned()));
        let mut transport = Self::with_stderr(stdout, stdin, router, tail);
        transport._child = Some(Mutex::new(child));
        Ok(transport)
    }

    fn send(&self, frame: Vec<u8>) -> Result<(), ClientError> {
        if let Some(reason) = self.router.closed() {
            return Err(ClientError::Closed(reason));
        }
        let stopped = || {
            let cause = self.write_error.lock().ok().and_then(|e| e.clone());
            let cause = cause.unwrap_or_else(|| Arc::new(io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped")));
            ClientError::Closed(Disconnect::Write(cause))
        };
        self.router.count_frame();
        self.frames.send(frame).map_err(|_| stopped())
    }
}

/// How many of an engine's last stderr lines a dead connection reports.
pub(crate) const STDERR_TAIL_LINES: usize = 20;

/// How long the end of an engine's stdout waits for its stderr to end as well.
const STDERR_GRACE: Duration = Duration::from_millis(500);

/// An engine's stderr, forwarded line by line to `tracing` while the last lines are kept in a
/// ring buffer.
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    done: JoinHandle<()>,
}

impl StderrTail {
    /// Starts reading `stderr` of the engine labelled `label`.
    fn collect(stderr: ChildStderr, label: String) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
        let ring = Arc::clone(&lines);
        let done = tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::info!(target: "rcp_client::engine", engine = %label, "{line}");
                if let Ok(mut ring) = ring.lock() {
                    if ring.len() == STDERR_TAIL_LINES {
                        ring.pop_front();
                    }
                    ring.push_back(strip_ansi(&line));
                }
            }
        });
        Self { lines, done }
    }

    /// The disconnect reason once stdout ended: waits up to [`STDERR_GRACE`] for the stderr
    /// to end (a dying engine writes its cause last), then reports its last lines.
    async fn finish(self) -> Disconnect {
        let _ = tokio::time::timeout(STDERR_GRACE, self.done).await;
        let stderr_tail: Vec<String> = self.lines.lock().map(|l| l.iter().cloned().collect()).unwrap_or_default();
        Disconnect::Exited { stderr_tail }
    }
}

/// `line` without ANSI escape sequences (an engine's coloured log output).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_sequences_are_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m index locked"),
            "2026 ERROR index locked"
        );
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
