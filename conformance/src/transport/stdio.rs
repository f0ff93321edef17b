//! NDJSON over a child process's pipes (§5.1).

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio as StdStdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Incoming, RecvError};

/// A spawned server speaking NDJSON over its stdin/stdout (§5.1).
pub(crate) struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    exit: Option<ExitStatus>,
}

impl StdioTransport {
    /// Spawns `program args...` with piped stdio; the process is killed when this is dropped.
    pub(crate) fn spawn(program: &str, args: &[String]) -> std::io::Result<Self> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(StdStdio::piped())
            .stdout(StdStdio::piped())
            .stderr(StdStdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr pipe"))?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&b'\n') {
                            buf.pop();
                        }
                        if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(mut t) = sink.lock() else { return };
                t.push_back(line);
                while t.len() > 20 {
                    t.pop_front();
                }
            }
        });
        Ok(Self { child, stdin, lines, stderr: tail, exit: None })
    }

    /// Writes raw bytes to the server's stdin.
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin.write_all(bytes).await.map_err(|e| format!("write to server stdin failed: {e}"))?;
        stdin.flush().await.map_err(|e| format!("flush of server stdin failed: {e}"))
    }

    pub(super) async fn recv(&mut self, deadline: Instant) -> Result<Incoming, RecvError> {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some(line)) => Ok(Incoming::Text(line)),
            Ok(None) => Err(RecvError::Closed),
            Err(_) => Err(RecvError::Timeout),
        }
    }

    /// Waits for the process to exit.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(timeout, self.child.wait()).await.ok().and_then(Result::ok);
        }
        self.exit
    }

    /// Ends the process and reaps it: closes stdin (an implicit shutdown, §5.1), gives it `grace`
    /// to exit, then kills it. When this returns the process is gone, so a server holding an
    /// exclusive resource (a data directory lock) has released it before the next one starts.
    pub(crate) async fn close(&mut self, grace: Duration) {
        self.stdin = None;
        if self.wait_exit(grace).await.is_some() {
            return;
        }
        // `kill` sends SIGKILL and waits for the process to be reaped.
        if self.child.kill().await.is_ok() {
            self.exit = self.child.try_wait().ok().flatten();
        }
    }

    /// Whether the process has exited.
    pub(crate) fn exited(&mut self) -> bool {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit.is_some()
    }

    /// The last lines the server wrote to stderr.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join(" | ")).unwrap_or_default()
    }
}
