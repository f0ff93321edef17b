//! A minimal blocking RCP client over a child's stdio, for measuring the full protocol path,
//! on rcp-client's blocking NDJSON harness ([`rcp_client::ndjson::blocking`]). Its errors are
//! `anyhow` with context: this module supports the benchmark binaries only (see
//! [`crate::exit`]).

use std::ffi::OsStr;
use std::io::BufWriter;
use std::process::{ChildStdin, ChildStdout, Command};

use anyhow::{Context, anyhow, bail};
use rcp_client::ndjson::MAX_READ_LINE_BYTES;
use rcp_client::ndjson::blocking::{BlockingChild, LineReader, write_line};
use serde_json::{Value, json};

/// A `--server` argument, `LABEL=COMMAND ARGS...` or just `COMMAND ARGS...` (then labelled
/// `server<index>`): its label and its command line.
pub fn server_spec(spec: &str, index: usize) -> (String, String) {
    match spec.split_once('=') {
        Some((label, command)) if !label.contains(' ') => (label.to_owned(), command.to_owned()),
        _ => (format!("server{index}"), spec.to_owned()),
    }
}

/// Waits until a reader thread has reported `sent` answers on `done` (one message each),
/// allowing `within` between two of them: the drain at the end of a pipelined run.
pub fn await_answers<T>(
    done: &std::sync::mpsc::Receiver<T>,
    sent: u64,
    within: std::time::Duration,
) -> anyhow::Result<()> {
    for answered in 0..sent {
        if done.recv_timeout(within).is_err() {
            bail!("{} requests unanswered (none answered for {} s)", sent - answered, within.as_secs_f64());
        }
    }
    Ok(())
}

/// Spawns `argv` (program, then arguments) with piped stdin and stdout and stderr discarded,
/// as the benchmarks that drive a server by hand need it; the process is killed when the
/// handle is dropped (it derefs to the [`std::process::Child`]).
pub fn spawn_quiet<S: AsRef<OsStr>>(argv: &[S]) -> anyhow::Result<BlockingChild> {
    let program = argv.first().map(|p| p.as_ref().to_string_lossy().into_owned()).unwrap_or_default();
    BlockingChild::spawn_quiet(argv).with_context(|| format!("spawn {program}"))
}

/// A spawned RCP server, initialised and ready for sequential calls.
pub struct StdioServer {
    child: BlockingChild,
    stdin: BufWriter<ChildStdin>,
    stdout: LineReader<ChildStdout>,
    next_id: u64,
}

impl std::fmt::Debug for StdioServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioServer").field("next_id", &self.next_id).finish_non_exhaustive()
    }
}

impl StdioServer {
    /// Spawns `cmd` (stderr as the command sets it; inherited by default) and runs `initialize`.
    pub fn spawn(cmd: Command) -> anyhow::Result<Self> {
        let described = format!("{cmd:?}");
        let mut child = BlockingChild::spawn(cmd).with_context(|| format!("spawn {described}"))?;
        let stdin = BufWriter::new(child.stdin.take().context("no stdin")?);
        let stdout = LineReader::new(child.stdout.take().context("no stdout")?, MAX_READ_LINE_BYTES);
        let mut s = Self { child, stdin, stdout, next_id: 0 };
        s.call("initialize", json!({"protocolVersion": 1, "client": {"name": "rcp-bench"}}))
            .with_context(|| format!("start {described}"))?;
        Ok(s)
    }

    /// Sends one request and waits for its answer (notifications are skipped). Returns the
    /// `result`, or an error holding the `error` object.
    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write_line(&mut self.stdin, frame.to_string().as_bytes()).with_context(|| format!("{method}: write"))?;
        loop {
            let Some(line) = self.stdout.next_line().with_context(|| format!("{method}: read"))? else {
                bail!("{method}: server closed stdout");
            };
            let v: Value = serde_json::from_str(&line).with_context(|| format!("{method}: bad frame: {line}"))?;
            if v.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            return match (v.get("result"), v.get("error")) {
                (Some(r), _) => Ok(r.clone()),
                (_, Some(e)) => Err(anyhow!("{method}: error response {e}")),
                _ => Err(anyhow!("{method}: malformed response: {v}")),
            };
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `shutdown` and waits for the process to exit.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        let _ = self.call("shutdown", json!({}));
        self.child.wait().context("wait for the server to exit").map(|_| ())
    }
}
