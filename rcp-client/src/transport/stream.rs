//! NDJSON over any byte stream pair (§5.1): one JSON message per line, many calls pipelined on
//! one stream and correlated by id. [`StreamTransport::spawn`] runs an engine process and
//! speaks over its stdio.

use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rcp_protocol::RequestId;
use rcp_protocol::notifications;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

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
                    Ok(None) => break Disconnect::Eof,
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
    /// is forwarded to `tracing` (target `rcp_client::engine`); the process is killed when the
    /// transport is dropped.
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
        if let Some(stderr) = child.stderr.take() {
            let label = router.label().to_owned();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::info!(target: "rcp_client::engine", engine = %label, "{line}");
                }
            });
        }
        let mut transport = Self::new(stdout, stdin, router);
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
