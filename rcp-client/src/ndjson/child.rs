//! An engine process spawned with piped stdio: its stderr kept (or forwarded, or discarded),
//! its exit status recorded, and the process killed when the handle is dropped.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

use crate::error::ConnectError;
use crate::limits::{Limits, LogBudget};

/// What happens to a child's stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stderr {
    /// The parent's stderr (what the test kit and benchmarks show).
    Inherit,
    /// Discarded.
    Null,
    /// Forwarded line by line to `tracing` (target `rcp_client::engine`, field `engine` =
    /// `label`), and its last `lines` lines kept, without ANSI colours, to explain a failure.
    /// Read as bytes until the process closes it, whatever it writes: invalid UTF-8 is
    /// replaced (lossy), lines are cut at [`Limits::max_log_line_bytes`], and forwarding is
    /// rate-limited by [`Limits::log_lines_per_sec`] (a "suppressed N lines" event stands for
    /// the rest), so an engine never blocks, or dies of a closed pipe, because of its stderr.
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
        Self::spawn_with_limits(command, stderr, &Limits::default())
    }

    /// [`Self::spawn`], its stderr forwarded under `limits` (line length, lines per second).
    pub fn spawn_with_limits(command: &[String], stderr: Stderr, limits: &Limits) -> Result<Self, ConnectError> {
        let (program, args) = command.split_first().ok_or(ConnectError::EmptyCommand)?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        Self::from_command_with_limits(cmd, program.clone(), stderr, limits)
    }

    /// [`Self::spawn`] for a prepared command (environment, working directory, ...);
    /// `program` names it in errors.
    pub fn from_command(cmd: Command, program: String, stderr: Stderr) -> Result<Self, ConnectError> {
        Self::from_command_with_limits(cmd, program, stderr, &Limits::default())
    }

    /// [`Self::from_command`] under `limits`.
    pub fn from_command_with_limits(
        mut cmd: Command,
        program: String,
        stderr: Stderr,
        limits: &Limits,
    ) -> Result<Self, ConnectError> {
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
            (Stderr::Tail { lines, label }, Some(pipe)) => Some(StderrTail::collect(pipe, lines, label, limits)),
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
    fn collect(stderr: ChildStderr, keep: usize, label: String, limits: &Limits) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(keep.min(64))));
        let ring = Arc::clone(&lines);
        let (open_tx, open) = watch::channel(true);
        let budget = LogBudget::new(limits);
        let max_line = limits.max_log_line_bytes.max(1);
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut splitter = StderrLines::new(max_line);
            let mut buf = vec![0; 8 * 1024];
            let mut each = |line: &[u8]| {
                let line = strip_ansi(&String::from_utf8_lossy(line));
                match budget.admit() {
                    Some(0) => tracing::info!(target: "rcp_client::engine", engine = %label, "{line}"),
                    Some(n) => {
                        tracing::warn!(target: "rcp_client::engine", engine = %label, suppressed = n, "suppressed {n} stderr lines (over the log rate limit)");
                        tracing::info!(target: "rcp_client::engine", engine = %label, "{line}");
                    }
                    None => {}
                }
                if keep > 0
                    && let Ok(mut ring) = ring.lock()
                {
                    if ring.len() == keep {
                        ring.pop_front();
                    }
                    ring.push_back(line);
                }
            };
            // Read until the end whatever arrives: an error is the pipe's end too.
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                splitter.push(&buf[..n], &mut each);
            }
            splitter.finish(&mut each);
            let n = budget.take_suppressed();
            if n > 0 {
                tracing::warn!(target: "rcp_client::engine", engine = %label, suppressed = n, "suppressed {n} stderr lines (over the log rate limit)");
            }
            let _ = open_tx.send(false);
        });
        Self { lines, open }
    }
}

/// stderr cut into lines of at most `max` bytes: the rest of a longer line is dropped as it
/// arrives, so one line never holds more than `max` bytes.
#[derive(Debug)]
struct StderrLines {
    line: Vec<u8>,
    max: usize,
}

impl StderrLines {
    fn new(max: usize) -> Self {
        Self { line: Vec::new(), max }
    }

    /// Feeds bytes; each completed line (cut to `max`, without `\r\n`) goes to `each`.
    fn push(&mut self, mut data: &[u8], each: &mut impl FnMut(&[u8])) {
        while !data.is_empty() {
            let (chunk, done) = match memchr_newline(data) {
                Some(i) => (&data[..i], Some(i + 1)),
                None => (data, None),
            };
            let room = self.max.saturating_sub(self.line.len());
            self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            match done {
                Some(next) => {
                    let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
                    each(line);
                    self.line.clear();
                    data = &data[next..];
                }
                None => break,
            }
        }
    }

    /// The last line, if it did not end with `\n`.
    fn finish(&mut self, each: &mut impl FnMut(&[u8])) {
        if !self.line.is_empty() {
            each(&self.line);
            self.line.clear();
        }
    }
}

fn memchr_newline(data: &[u8]) -> Option<usize> {
    data.iter().position(|b| *b == b'\n')
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

    #[tokio::test]
    async fn stderr_is_read_as_bytes_to_its_end_whatever_it_holds() {
        // Invalid UTF-8, then an over-long line, then a line the engine writes after them.
        let script = "printf 'boot \\377\\n' >&2; head -c 10000 /dev/zero | tr '\\0' x >&2; echo >&2; echo after >&2; exec sleep 30";
        let command = ["sh", "-c", script].map(String::from);
        let limits = Limits::default().with_logs(1000, 100);
        let child = ChildProcess::spawn_with_limits(&command, Stderr::Tail { lines: 5, label: "t".into() }, &limits)
            .expect("spawn sh");
        let stderr = child.stderr().expect("kept");
        for _ in 0..250 {
            if stderr.tail().last().map(String::as_str) == Some("after") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let tail = stderr.tail();
        assert_eq!(tail.first().map(String::as_str), Some("boot \u{FFFD}"), "{tail:?}");
        assert_eq!(tail.get(1).map(String::len), Some(100), "cut at the line cap");
        assert_eq!(tail.last().map(String::as_str), Some("after"), "read past the bad byte: {tail:?}");
    }
}
