//! An engine process spawned with piped stdio: its stderr kept (or forwarded, or discarded),
//! its exit status recorded, and the process killed when the handle is dropped.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

use crate::error::ConnectError;

/// What happens to a child's stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stderr {
    /// The parent's stderr (what the test kit and benchmarks show).
    Inherit,
    /// Discarded.
    Null,
    /// Forwarded line by line to `tracing` (target `rcp_client::engine`, field `engine` =
    /// `label`), and its last `lines` lines kept, without ANSI colours, to explain a failure.
    Tail {
        /// How many of the last lines are kept.
        lines: usize,
        /// The engine's name in the forwarded events.
        label: String,
    },
}

/// A spawned engine process. Dropping the handle kills the process (and reaps it).
#[derive(Debug)]
pub struct ChildProcess {
    program: String,
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    tail: Option<StderrTail>,
    exit: ExitHandle,
    kill: Option<oneshot::Sender<()>>,
}

impl ChildProcess {
    /// Spawns `command` (program and arguments) with piped stdin and stdout, and stderr as
    /// `stderr` says. Must run inside a tokio runtime.
    pub fn spawn(command: &[String], stderr: Stderr) -> Result<Self, ConnectError> {
        let (program, args) = command.split_first().ok_or(ConnectError::EmptyCommand)?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        Self::from_command(cmd, program.clone(), stderr)
    }

    /// [`Self::spawn`] for a prepared command (environment, working directory, ...);
    /// `program` names it in errors.
    pub fn from_command(mut cmd: Command, program: String, stderr: Stderr) -> Result<Self, ConnectError> {
        let err = match &stderr {
            Stderr::Inherit => Stdio::inherit(),
            Stderr::Null => Stdio::null(),
            Stderr::Tail { .. } => Stdio::piped(),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ConnectError::Spawn { program: program.clone(), source: Arc::new(e) })?;
        let tail = match (stderr, child.stderr.take()) {
            (Stderr::Tail { lines, label }, Some(pipe)) => Some(StderrTail::collect(pipe, lines, label)),
            _ => None,
        };
        let (stdin, stdout, pid) = (child.stdin.take(), child.stdout.take(), child.id());
        let (exit_tx, exit) = watch::channel(None);
        let (kill, killed) = oneshot::channel::<()>();
        // The task owns the process: it records the exit status, or kills the process when
        // the handle goes away first.
        tokio::spawn(async move {
            let mut child = child;
            let status = tokio::select! {
                status = child.wait() => status,
                _ = killed => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            let text = status.map_or_else(|e| e.to_string(), |s: ExitStatus| s.to_string());
            let _ = exit_tx.send(Some(text));
        });
        Ok(Self { program, pid, stdin, stdout, tail, exit: ExitHandle { exit }, kill: Some(kill) })
    }

    /// The program that was spawned.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The process id, while it was known at spawn.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The child's stdin, once.
    pub fn take_stdin(&mut self) -> Result<ChildStdin, ConnectError> {
        self.stdin.take().ok_or_else(|| ConnectError::Unavailable(format!("{}: no stdin pipe", self.program)))
    }

    /// The child's stdout, once.
    pub fn take_stdout(&mut self) -> Result<ChildStdout, ConnectError> {
        self.stdout.take().ok_or_else(|| ConnectError::Unavailable(format!("{}: no stdout pipe", self.program)))
    }

    /// The exit status as text (`exit status: 1`, `signal: 9 (SIGKILL)`), once it exited.
    pub fn exit_status(&self) -> Option<String> {
        self.exit.status()
    }

    /// A handle on the exit status, for a task that outlives this borrow.
    pub fn exit(&self) -> ExitHandle {
        self.exit.clone()
    }

    /// Kills the process now (it is also killed when the handle is dropped).
    pub fn kill(&mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }

    /// A handle on the kept stderr lines (with [`Stderr::Tail`]).
    pub fn stderr(&self) -> Option<StderrHandle> {
        self.tail.as_ref().map(|t| StderrHandle { lines: Arc::clone(&t.lines), open: t.open.clone() })
    }

    /// The last stderr lines kept (with [`Stderr::Tail`]), oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr().map(|s| s.tail()).unwrap_or_default()
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The exit status of a [`ChildProcess`], readable from any task.
#[derive(Debug, Clone)]
pub struct ExitHandle {
    exit: watch::Receiver<Option<String>>,
}

impl ExitHandle {
    /// The exit status as text, once the process exited.
    pub fn status(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Waits for the process to exit; its exit status as text (`None` if it cannot be known).
    pub async fn wait(&self) -> Option<String> {
        let mut exit = self.exit.clone();
        exit.wait_for(Option::is_some).await.ok().and_then(|s| s.clone())
    }
}

/// The kept stderr of a [`ChildProcess`], readable while and after the process runs.
#[derive(Debug, Clone)]
pub struct StderrHandle {
    lines: Arc<Mutex<VecDeque<String>>>,
    open: watch::Receiver<bool>,
}

impl StderrHandle {
    /// The last lines, oldest first.
    pub fn tail(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.iter().cloned().collect()).unwrap_or_default()
    }

    /// Waits until the stderr ends (a dying engine writes its cause last), at most `grace`.
    pub async fn closed(&self, grace: Duration) {
        let mut open = self.open.clone();
        let _ = tokio::time::timeout(grace, open.wait_for(|open| !open)).await;
    }
}

/// A child's stderr, forwarded line by line to `tracing` while the last lines are kept.
#[derive(Debug)]
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    open: watch::Receiver<bool>,
}

impl StderrTail {
    fn collect(stderr: ChildStderr, keep: usize, label: String) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(keep)));
        let ring = Arc::clone(&lines);
        let (open_tx, open) = watch::channel(true);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::info!(target: "rcp_client::engine", engine = %label, "{line}");
                if let Ok(mut ring) = ring.lock() {
                    if ring.len() == keep {
                        ring.pop_front();
                    }
                    if keep > 0 {
                        ring.push_back(strip_ansi(&line));
                    }
                }
            }
            let _ = open_tx.send(false);
        });
        Self { lines, open }
    }
}

/// `line` without ANSI escape sequences (an engine's coloured log output).
pub fn strip_ansi(line: &str) -> String {
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

    #[tokio::test]
    async fn the_stderr_tail_is_kept_and_dropping_the_handle_kills() {
        let command = ["sh", "-c", "echo one >&2; echo two >&2; exec sleep 30"].map(String::from);
        let child = ChildProcess::spawn(&command, Stderr::Tail { lines: 1, label: "t".into() }).expect("spawn sh");
        let stderr = child.stderr().expect("kept");
        for _ in 0..100 {
            if stderr.tail() == ["two"] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(stderr.tail(), ["two"]);
        assert_eq!(child.exit_status(), None);
        drop(child);
        // `sleep` holds the stderr open: it closes only when the process is gone.
        let started = std::time::Instant::now();
        stderr.closed(Duration::from_secs(10)).await;
        assert!(started.elapsed() < Duration::from_secs(10), "the child outlived its handle");
    }
}
