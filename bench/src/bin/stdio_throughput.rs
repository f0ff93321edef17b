//! `stdio_throughput`: pipelined request throughput of one or more RCP servers over stdio.
//!
//! Every run spawns the server, writes `initialize` followed by N pre-generated requests as fast
//! as the pipe accepts them, closes stdin (EOF is an implicit `shutdown`, so the server must
//! drain) and counts response lines until all N+1 ids have been answered. Two times are kept:
//!
//! * **answer time**: from just before the first byte is written to the last expected response;
//! * **wall time**: from spawning the process to reaping it (includes start-up and drain).
//!
//! Several `--server` entries are run round-robin (run 1 of each, then run 2 of each, ...) so
//! their ratios are measured under the same machine load. Each run is also checked: every id
//! answered exactly once, no error responses, exit status 0.
//!
//! ```sh
//! cargo run --release -p rcp-bench --bin stdio_throughput -- \
//!     --server ours=target/release/examples/tiny_engine \
//!     --server "ref=/path/to/example_server" --requests 100000 --runs 5
//! cargo run --release -p rcp-bench --bin stdio_throughput -- \
//!     --server target/release/examples/tiny_engine --slow-probe
//! ```
//!
//! `--slow-probe` checks concurrency instead: one `retrieve` carrying
//! `_meta.x-tiny-delayMs` (understood by the `tiny_engine` example) is sent first, then
//! `--probe-pings` pings; every ping must be answered before the slow request.

use std::io::{self, Read, Write};
use std::path::Path;
use std::process::{ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use memchr::memmem;
use rcp_client::ndjson::{LineRef, LineSplitter, MAX_READ_LINE_BYTES};
use serde_json::{Value, json};

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(name = "stdio_throughput", about = "Pipelined NDJSON throughput of RCP servers over stdio")]
struct Args {
    /// Server to run: `[LABEL=]COMMAND [ARG...]`, split on whitespace. Repeat to compare servers
    /// side by side in one invocation; the first is the baseline for ratios.
    #[arg(long = "server", value_name = "SPEC", required = true)]
    servers: Vec<String>,

    /// Extra arguments for the server (only with a single `--server`). Takes every following
    /// value, including ones starting with `-`, so put it last.
    #[arg(long = "server-args", value_name = "ARG", num_args = 1.., allow_hyphen_values = true)]
    server_args: Vec<String>,

    /// Labels for the servers, in `--server` order (default: `LABEL=` or the command's file name).
    #[arg(long = "label", value_name = "NAME")]
    labels: Vec<String>,

    /// Requests per run, after the `initialize` request.
    #[arg(long, default_value_t = 100_000)]
    requests: u64,

    /// Which request to repeat.
    #[arg(long, value_enum, default_value_t = BenchMethod::Ping)]
    method: BenchMethod,

    /// Measured runs per server.
    #[arg(long, default_value_t = 5)]
    runs: usize,

    /// Unmeasured warm-up runs per server, before the measured ones.
    #[arg(long, default_value_t = 1)]
    warmup: usize,

    /// Per-run limit in seconds; the server is killed (and the run failed) when it expires.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,

    /// Where the servers' stderr goes.
    #[arg(long, value_enum, default_value_t = StderrMode::Inherit)]
    server_stderr: StderrMode,

    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,

    /// Run the concurrency probe instead of the throughput benchmark (once per server).
    #[arg(long)]
    slow_probe: bool,

    /// Pings queued behind the slow request in `--slow-probe`.
    #[arg(long, default_value_t = 10_000)]
    probe_pings: u64,

    /// Delay requested by the slow request in `--slow-probe`, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    probe_delay_ms: u64,
}

/// The request repeated by the throughput benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BenchMethod {
    /// `ping` with a numeric nonce.
    Ping,
    /// `retrieve` of a term that matches nothing in `tiny_engine` (near no-op).
    Retrieve,
}

impl BenchMethod {
    fn name(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Retrieve => "retrieve",
        }
    }
}

/// What happens to a server's stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StderrMode {
    /// Shared with this process.
    Inherit,
    /// Discarded.
    Null,
}

/// One server to benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ServerSpec {
    label: String,
    program: String,
    args: Vec<String>,
}

impl ServerSpec {
    /// Parses `[LABEL=]COMMAND [ARG...]`. A `=` in the first word only introduces a label when
    /// the part before it contains no `/` (so `./a=b` stays a path).
    fn parse(spec: &str) -> anyhow::Result<Self> {
        let mut words = spec.split_whitespace();
        let first = words.next().with_context(|| format!("empty --server spec {spec:?}"))?;
        let (label, program) = match first.split_once('=') {
            Some((label, program)) if !label.is_empty() && !label.contains('/') => {
                let program = if program.is_empty() {
                    words.next().with_context(|| format!("no command in --server spec {spec:?}"))?
                } else {
                    program
                };
                (Some(label.to_owned()), program)
            }
            _ => (None, first),
        };
        let label = label.unwrap_or_else(|| {
            Path::new(program).file_name().map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned())
        });
        Ok(Self { label, program: program.to_owned(), args: words.map(str::to_owned).collect() })
    }

    fn command_line(&self) -> Vec<String> {
        std::iter::once(self.program.clone()).chain(self.args.iter().cloned()).collect()
    }
}

/// The bytes written in one run and what to expect back.
struct Workload {
    /// Every request line, `\n`-terminated, `initialize` (id 0) first.
    bytes: Vec<u8>,
    /// Requests carry ids `0..ids`; each must be answered exactly once.
    ids: u64,
    /// An id whose answer time is recorded separately (the slow probe's request).
    watch: Option<u64>,
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;

impl Workload {
    /// `initialize` then `n` requests of `method`, ids 1..=n.
    fn throughput(method: BenchMethod, n: u64) -> Self {
        let mut bytes = Vec::with_capacity(INITIALIZE.len() + 1 + n as usize * 80);
        writeln!(bytes, "{INITIALIZE}").expect("writing to a Vec cannot fail");
        for i in 1..=n {
            match method {
                BenchMethod::Ping => {
                    writeln!(bytes, r#"{{"jsonrpc":"2.0","id":{i},"method":"ping","params":{{"nonce":{i}}}}}"#)
                }
                BenchMethod::Retrieve => writeln!(
                    bytes,
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"retrieve","params":{{"query":"zzzz","k":1}}}}"#
                ),
            }
            .expect("writing to a Vec cannot fail");
        }
        Self { bytes, ids: n + 1, watch: None }
    }

    /// `initialize`, one slow `retrieve` (id 1), then `pings` pings (ids 2..=pings+1).
    fn slow_probe(pings: u64, delay_ms: u64) -> Self {
        let mut bytes = Vec::with_capacity(256 + pings as usize * 64);
        writeln!(bytes, "{INITIALIZE}").expect("writing to a Vec cannot fail");
        writeln!(
            bytes,
            r#"{{"jsonrpc":"2.0","id":1,"method":"retrieve","params":{{"query":"zzzz","k":1,"_meta":{{"x-tiny-delayMs":{delay_ms}}}}}}}"#
        )
        .expect("writing to a Vec cannot fail");
        for i in 2..=pings + 1 {
            writeln!(bytes, r#"{{"jsonrpc":"2.0","id":{i},"method":"ping","params":{{"nonce":{i}}}}}"#)
                .expect("writing to a Vec cannot fail");
        }
        Self { bytes, ids: pings + 2, watch: Some(1) }
    }
}

/// Counts response lines and checks ids against a bitset.
struct Tally {
    finder: memmem::Finder<'static>,
    error_finder: memmem::Finder<'static>,
    method_finder: memmem::Finder<'static>,
    seen: Vec<u64>,
    ids: u64,
    watch: Option<u64>,
    /// Distinct expected ids answered.
    unique: u64,
    /// Lines with a top-level id (responses).
    responses: u64,
    /// Answers to an id already answered.
    duplicates: u64,
    /// Responses whose id is not one we sent (or null / non-numeric).
    unknown: u64,
    /// Responses carrying `"error"`.
    errors: u64,
    /// Error responses, first few, for the report.
    error_samples: Vec<String>,
    /// Lines that are not answers: notifications and requests from the server.
    other_lines: u64,
    /// When the last expected id was answered.
    all_answered: Option<Instant>,
    /// When the watched id was answered, and whether with an error.
    watched: Option<(Instant, bool)>,
    /// Distinct non-watched ids answered before the watched one.
    before_watched: u64,
    /// When every non-watched id had been answered.
    others_done: Option<Instant>,
}

impl Tally {
    fn new(ids: u64, watch: Option<u64>) -> Self {
        Self {
            finder: memmem::Finder::new(b"\"id\":").into_owned(),
            error_finder: memmem::Finder::new(b"\"error\":").into_owned(),
            method_finder: memmem::Finder::new(b"\"method\":").into_owned(),
            seen: vec![0; ids.div_ceil(64) as usize],
            ids,
            watch,
            unique: 0,
            responses: 0,
            duplicates: 0,
            unknown: 0,
            errors: 0,
            error_samples: Vec::new(),
            other_lines: 0,
            all_answered: None,
            watched: None,
            before_watched: 0,
            others_done: None,
        }
    }

    /// Reads `"id":<digits>` at `pos` (after the key), skipping blanks.
    fn number_at(line: &[u8], pos: usize) -> Option<u64> {
        let rest = line.get(pos..)?;
        let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        let digits = &rest[start..];
        let len = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
        if len == 0 || len > 19 {
            return None;
        }
        std::str::from_utf8(&digits[..len]).ok()?.parse().ok()
    }

    /// Classifies one line. The fast path trusts the only `"id":` in the line; a line with
    /// several (hits carry ids too) is parsed properly.
    fn line(&mut self, line: &[u8]) {
        let Some(pos) = self.finder.find(line) else {
            if !line.iter().all(u8::is_ascii_whitespace) {
                self.other_lines += 1;
            }
            return;
        };
        let after = pos + 5;
        let (id, is_error) = if self.finder.find(&line[after..]).is_none() {
            if self.method_finder.find(line).is_some() {
                // A request from the server (or an echo of ours), not an answer.
                self.other_lines += 1;
                return;
            }
            (Self::number_at(line, after), self.error_finder.find(line).is_some())
        } else {
            match serde_json::from_slice::<Value>(line) {
                Ok(Value::Object(map)) if map.contains_key("id") && !map.contains_key("method") => {
                    (map.get("id").and_then(Value::as_u64), map.contains_key("error"))
                }
                Ok(_) => {
                    self.other_lines += 1;
                    return;
                }
                Err(_) => (None, self.error_finder.find(line).is_some()),
            }
        };
        self.responses += 1;
        if is_error {
            self.errors += 1;
            if self.error_samples.len() < 3 {
                let text = String::from_utf8_lossy(line);
                self.error_samples.push(text.chars().take(300).collect());
            }
        }
        let Some(id) = id.filter(|&id| id < self.ids) else {
            self.unknown += 1;
            return;
        };
        let (word, bit) = ((id / 64) as usize, 1u64 << (id % 64));
        if self.seen[word] & bit != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= bit;
        self.unique += 1;
        if let Some(watch) = self.watch {
            let now = Instant::now();
            if id == watch {
                self.watched = Some((now, is_error));
                self.before_watched = self.unique - 1;
            } else if self.unique - u64::from(self.watched.is_some()) == self.ids - 1 {
                self.others_done = Some(now);
            }
        }
        if self.unique == self.ids {
            self.all_answered = Some(Instant::now());
        }
    }

    /// Ids in `0..ids` never answered (at most `limit` of them).
    fn missing(&self, limit: usize) -> Vec<u64> {
        (0..self.ids).filter(|&id| self.seen[(id / 64) as usize] & (1 << (id % 64)) == 0).take(limit).collect()
    }
}

/// Reads the server's stdout to EOF, cut into lines by the NDJSON splitter every peer uses.
fn read_responses(mut out: ChildStdout, mut tally: Tally) -> (Tally, Instant) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut lines = LineSplitter::new(MAX_READ_LINE_BYTES);
    let mut take = |line: LineRef<'_>| match line {
        LineRef::Frame(line) => tally.line(line),
        LineRef::TooLong(_) => tally.other_lines += 1,
    };
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => lines.push_each(&buf[..n], &mut take),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let eof = Instant::now();
    lines.finish_each(&mut take);
    (tally, eof)
}

/// Measurements and checks of one run.
#[derive(Debug, Clone)]
struct RunResult {
    /// Write start to last expected answer (or to stdout EOF when some never came).
    answer: Duration,
    /// Spawn to exit.
    wall: Duration,
    /// Write start to stdin closed.
    write: Duration,
    /// Exit status as text (`0`, `1`, `signal 9`, ...).
    exit: String,
    responses: u64,
    unique: u64,
    duplicates: u64,
    unknown: u64,
    errors: u64,
    other_lines: u64,
    /// Slow probe: when the slow request and all the others were answered, after write start.
    watched_at: Option<Duration>,
    others_done_at: Option<Duration>,
    before_watched: u64,
    /// Everything wrong with this run; empty when it passed.
    problems: Vec<String>,
}

impl RunResult {
    fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn to_json(&self) -> Value {
        json!({
            "ok": self.ok(),
            "answer_s": self.answer.as_secs_f64(),
            "wall_s": self.wall.as_secs_f64(),
            "write_s": self.write.as_secs_f64(),
            "exit": self.exit,
            "responses": self.responses,
            "unique": self.unique,
            "duplicates": self.duplicates,
            "unknown": self.unknown,
            "errors": self.errors,
            "other_lines": self.other_lines,
            "problems": self.problems,
        })
    }
}

fn describe_exit(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return code.to_string();
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("signal {sig}");
        }
    }
    status.to_string()
}

/// Spawns the server, writes the workload, counts answers and waits for the exit.
fn run_once(spec: &ServerSpec, work: &Arc<Workload>, timeout: Duration, stderr: StderrMode) -> io::Result<RunResult> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(match stderr {
        StderrMode::Inherit => Stdio::inherit(),
        StderrMode::Null => Stdio::null(),
    });
    let spawned = Instant::now();
    let mut child = cmd.spawn()?;
    let stdin = child.stdin.take().ok_or_else(|| io::Error::other("no stdin pipe"))?;
    let stdout = child.stdout.take().ok_or_else(|| io::Error::other("no stdout pipe"))?;
    let pid = child.id();

    let (exit_tx, exit_rx) = mpsc::channel();
    thread::Builder::new().name("wait".into()).spawn(move || {
        let status = child.wait();
        let _ = exit_tx.send((status, Instant::now()));
    })?;
    let (read_tx, read_rx) = mpsc::channel();
    let tally = Tally::new(work.ids, work.watch);
    thread::Builder::new().name("reader".into()).spawn(move || {
        let _ = read_tx.send(read_responses(stdout, tally));
    })?;
    let payload = Arc::clone(work);
    let writer = thread::Builder::new().name("writer".into()).spawn(move || {
        let mut stdin = stdin;
        let start = Instant::now();
        let result = stdin.write_all(&payload.bytes).and_then(|()| stdin.flush());
        drop(stdin);
        (start, Instant::now(), result)
    })?;

    let mut problems = Vec::new();
    let deadline = spawned + timeout;
    let remaining = || deadline.saturating_duration_since(Instant::now());
    let (status, exited) = match exit_rx.recv_timeout(remaining()) {
        Ok(x) => x,
        Err(_) => {
            problems.push(format!("timed out after {:.1} s; killed", timeout.as_secs_f64()));
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            exit_rx.recv().map_err(io::Error::other)?
        }
    };
    let status = status?;
    let wall = exited - spawned;
    let (write_start, write_end, write_result) =
        writer.join().map_err(|_| io::Error::other("writer thread panicked"))?;
    if let Err(e) = write_result {
        problems.push(format!("writing requests failed: {e}"));
    }
    let (tally, eof) = read_rx
        .recv_timeout(remaining().max(Duration::from_secs(1)))
        .map_err(|_| io::Error::other("stdout still open after the server exited"))?;

    let exit = describe_exit(&status);
    if !status.success() {
        problems.push(format!("exit status {exit}"));
    }
    let since = |t: Instant| t.saturating_duration_since(write_start);
    let answer = since(tally.all_answered.unwrap_or(eof));
    if tally.unique < tally.ids {
        let missing = tally.missing(5);
        problems.push(format!("{} of {} ids never answered (first: {missing:?})", tally.ids - tally.unique, tally.ids));
    }
    if tally.duplicates > 0 {
        problems.push(format!("{} duplicate answers", tally.duplicates));
    }
    if tally.unknown > 0 {
        problems.push(format!("{} answers with an unknown or null id", tally.unknown));
    }
    if tally.errors > 0 {
        problems.push(format!("{} error responses, e.g. {}", tally.errors, tally.error_samples.join(" | ")));
    }
    Ok(RunResult {
        answer,
        wall,
        write: since(write_end),
        exit,
        responses: tally.responses,
        unique: tally.unique,
        duplicates: tally.duplicates,
        unknown: tally.unknown,
        errors: tally.errors,
        other_lines: tally.other_lines,
        watched_at: tally.watched.map(|(t, _)| since(t)),
        others_done_at: tally.others_done.map(since),
        before_watched: tally.before_watched,
        problems,
    })
}

/// A run that could not even start, recorded as a failed run.
fn spawn_failure(e: &io::Error) -> RunResult {
    RunResult {
        answer: Duration::ZERO,
        wall: Duration::ZERO,
        write: Duration::ZERO,
        exit: "not started".into(),
        responses: 0,
        unique: 0,
        duplicates: 0,
        unknown: 0,
        errors: 0,
        other_lines: 0,
        watched_at: None,
        others_done_at: None,
        before_watched: 0,
        problems: vec![format!("run failed: {e}")],
    }
}

/// Minimum and median of some durations.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Summary {
    min: Duration,
    median: Duration,
}

impl Summary {
    fn of(mut values: Vec<Duration>) -> Option<Self> {
        values.sort();
        let n = values.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2,
        };
        Some(Self { min: values[0], median })
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Resolves `--server`, `--server-args` and `--label` into the list of servers.
fn servers(args: &Args) -> anyhow::Result<Vec<ServerSpec>> {
    let mut specs = args.servers.iter().map(|s| ServerSpec::parse(s)).collect::<anyhow::Result<Vec<_>>>()?;
    if !args.server_args.is_empty() {
        if specs.len() != 1 {
            bail!("--server-args needs exactly one --server; put arguments inside each --server spec");
        }
        specs[0].args.extend(args.server_args.iter().cloned());
    }
    if args.labels.len() > specs.len() {
        bail!("{} labels for {} servers", args.labels.len(), specs.len());
    }
    for (spec, label) in specs.iter_mut().zip(&args.labels) {
        spec.label.clone_from(label);
    }
    for i in 1..specs.len() {
        let mut n = 1;
        let base = specs[i].label.clone();
        while specs[..i].iter().any(|s| s.label == specs[i].label) {
            n += 1;
            specs[i].label = format!("{base}#{n}");
        }
    }
    Ok(specs)
}

/// The servers to run, once the arguments are checked.
fn usage(args: &Args) -> anyhow::Result<Vec<ServerSpec>> {
    let specs = servers(args)?;
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        bail!("--timeout must be a positive number of seconds");
    }
    Ok(specs)
}

fn throughput(args: &Args, specs: &[ServerSpec]) -> bool {
    let timeout = Duration::from_secs_f64(args.timeout);
    let work = Arc::new(Workload::throughput(args.method, args.requests));
    let mut results: Vec<Vec<RunResult>> = vec![Vec::new(); specs.len()];
    let mut warmup_problems: Vec<Vec<String>> = vec![Vec::new(); specs.len()];
    let rounds = args.warmup + args.runs;
    for round in 0..rounds {
        let warm = round < args.warmup;
        for (i, spec) in specs.iter().enumerate() {
            let r = run_once(spec, &work, timeout, args.server_stderr).unwrap_or_else(|e| spawn_failure(&e));
            let tag =
                if warm { "warm-up".to_owned() } else { format!("run {}/{}", round - args.warmup + 1, args.runs) };
            eprintln!(
                "{:<8} {:<16} answer {:>10}  wall {:>10}  exit {}{}",
                tag,
                spec.label,
                ms(r.answer),
                ms(r.wall),
                r.exit,
                if r.ok() { String::new() } else { format!("  FAIL: {}", r.problems.join("; ")) }
            );
            if warm {
                warmup_problems[i].extend(r.problems);
            } else {
                results[i].push(r);
            }
        }
    }

    let summaries: Vec<(Option<Summary>, Option<Summary>)> = results
        .iter()
        .map(|runs| {
            // Failed runs may have stopped early; their times would flatter the server.
            let done = || runs.iter().filter(|r| r.ok());
            (Summary::of(done().map(|r| r.answer).collect()), Summary::of(done().map(|r| r.wall).collect()))
        })
        .collect();
    let base = summaries.first().copied().unwrap_or((None, None));
    let ratio = |s: Option<Summary>, b: Option<Summary>| match (s, b) {
        (Some(s), Some(b)) if !b.median.is_zero() => Some(s.median.as_secs_f64() / b.median.as_secs_f64()),
        _ => None,
    };
    let rate =
        |s: Option<Summary>| s.filter(|s| !s.median.is_zero()).map(|s| args.requests as f64 / s.median.as_secs_f64());
    let all_ok = results.iter().flatten().all(RunResult::ok) && warmup_problems.iter().all(Vec::is_empty);

    if args.json {
        let servers: Vec<Value> = specs
            .iter()
            .zip(&results)
            .zip(&summaries)
            .zip(&warmup_problems)
            .map(|(((spec, runs), &(answer, wall)), warm)| {
                let sum = |s: Option<Summary>| {
                    s.map(|s| json!({"min": s.min.as_secs_f64(), "median": s.median.as_secs_f64()}))
                };
                json!({
                    "label": spec.label,
                    "command": spec.command_line(),
                    "ok": runs.iter().all(RunResult::ok) && warm.is_empty(),
                    "answer_s": sum(answer),
                    "wall_s": sum(wall),
                    "requests_per_s_median": rate(answer),
                    "answer_ratio_vs_first": ratio(answer, base.0),
                    "wall_ratio_vs_first": ratio(wall, base.1),
                    "warmup_problems": warm,
                    "runs": runs.iter().map(RunResult::to_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = json!({
            "benchmark": "stdio_throughput",
            "method": args.method.name(),
            "requests": args.requests,
            "runs": args.runs,
            "warmup": args.warmup,
            "ok": all_ok,
            "servers": servers,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return all_ok;
    }

    println!(
        "\n{} x {} (+ initialize), {} measured run(s) per server after {} warm-up, interleaved; min/median over passing runs, ratios = median / median of '{}'",
        args.requests,
        args.method.name(),
        args.runs,
        args.warmup,
        specs[0].label
    );
    let width = specs.iter().map(|s| s.label.len()).max().unwrap_or(6).max(6);
    println!(
        "{:<width$}  {:>5}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>7}",
        "server", "ok", "answer min", "answer med", "req/s (med)", "wall min", "wall med", "answer×", "wall×"
    );
    let opt_ms = |s: Option<Summary>, f: fn(Summary) -> Duration| s.map_or("-".into(), |s| ms(f(s)));
    let opt_ratio = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}"));
    for ((spec, runs), &(answer, wall)) in specs.iter().zip(&results).zip(&summaries) {
        let passed = runs.iter().filter(|r| r.ok()).count();
        println!(
            "{:<width$}  {:>5}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>7}",
            spec.label,
            format!("{passed}/{}", runs.len()),
            opt_ms(answer, |s| s.min),
            opt_ms(answer, |s| s.median),
            rate(answer).map_or("-".into(), thousands),
            opt_ms(wall, |s| s.min),
            opt_ms(wall, |s| s.median),
            opt_ratio(ratio(answer, base.0)),
            opt_ratio(ratio(wall, base.1)),
        );
    }
    for ((spec, runs), warm) in specs.iter().zip(&results).zip(&warmup_problems) {
        for p in warm {
            println!("FAIL {} (warm-up): {p}", spec.label);
        }
        for (n, r) in runs.iter().enumerate() {
            for p in &r.problems {
                println!("FAIL {} run {}: {p}", spec.label, n + 1);
            }
        }
    }
    all_ok
}

fn slow_probe(args: &Args, specs: &[ServerSpec]) -> bool {
    let timeout = Duration::from_secs_f64(args.timeout);
    let delay = Duration::from_millis(args.probe_delay_ms);
    let work = Arc::new(Workload::slow_probe(args.probe_pings, args.probe_delay_ms));
    let mut all_ok = true;
    let mut rows = Vec::new();
    for spec in specs {
        let mut r = run_once(spec, &work, timeout, args.server_stderr).unwrap_or_else(|e| spawn_failure(&e));
        let others = work.ids - 1;
        match r.watched_at {
            None => r.problems.push("the slow request was never answered".into()),
            Some(at) => {
                if r.before_watched < others {
                    r.problems.push(format!(
                        "only {} of {others} other requests were answered before the slow one",
                        r.before_watched
                    ));
                }
                if at < delay {
                    r.problems.push(format!(
                        "the slow request came back after {}, sooner than its {} delay (x-tiny-delayMs ignored?)",
                        ms(at),
                        ms(delay)
                    ));
                }
            }
        }
        all_ok &= r.ok();
        rows.push(r);
    }
    if args.json {
        let servers: Vec<Value> = specs
            .iter()
            .zip(&rows)
            .map(|(spec, r)| {
                json!({
                    "label": spec.label,
                    "command": spec.command_line(),
                    "pings_done_s": r.others_done_at.map(|d| d.as_secs_f64()),
                    "slow_done_s": r.watched_at.map(|d| d.as_secs_f64()),
                    "answered_before_slow": r.before_watched,
                    "run": r.to_json(),
                })
            })
            .collect();
        let doc = json!({
            "benchmark": "slow_probe",
            "pings": args.probe_pings,
            "delay_ms": args.probe_delay_ms,
            "ok": all_ok,
            "servers": servers,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return all_ok;
    }
    println!(
        "\nslow probe: initialize, 1 retrieve with _meta.x-tiny-delayMs={}, then {} pings, EOF (times from first byte written)",
        args.probe_delay_ms, args.probe_pings
    );
    let width = specs.iter().map(|s| s.label.len()).max().unwrap_or(6).max(6);
    println!(
        "{:<width$}  {:>12}  {:>12}  {:>21}  {:>11}  {:>5}  verdict",
        "server", "pings done", "slow done", "answered before slow", "wall", "exit"
    );
    for (spec, r) in specs.iter().zip(&rows) {
        println!(
            "{:<width$}  {:>12}  {:>12}  {:>21}  {:>11}  {:>5}  {}",
            spec.label,
            r.others_done_at.map_or("-".into(), ms),
            r.watched_at.map_or("-".into(), ms),
            format!("{}/{}", r.before_watched, work.ids - 1),
            ms(r.wall),
            r.exit,
            if r.ok() { "PASS" } else { "FAIL" }
        );
    }
    for (spec, r) in specs.iter().zip(&rows) {
        for p in &r.problems {
            println!("FAIL {}: {p}", spec.label);
        }
    }
    all_ok
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let specs = match usage(&args) {
        Ok(specs) => specs,
        // A usage error exits 2, as clap's own do; a failed run exits 1.
        Err(e) => return rcp_bench::exit::finish_with(env!("CARGO_BIN_NAME"), Err(e), 2),
    };
    let ok = if args.slow_probe { slow_probe(&args, &specs) } else { throughput(&args, &specs) };
    if ok { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_specs() {
        let s = ServerSpec::parse("ours=target/release/examples/tiny_engine --x 1").unwrap();
        assert_eq!(s.label, "ours");
        assert_eq!(s.program, "target/release/examples/tiny_engine");
        assert_eq!(s.args, ["--x", "1"]);
        let s = ServerSpec::parse("/usr/bin/python3 server.py").unwrap();
        assert_eq!((s.label.as_str(), s.args.len()), ("python3", 1));
        let s = ServerSpec::parse("./odd=name").unwrap();
        assert_eq!((s.label.as_str(), s.program.as_str()), ("odd=name", "./odd=name"));
        let s = ServerSpec::parse("py= python3 x.py").unwrap();
        assert_eq!((s.label.as_str(), s.program.as_str()), ("py", "python3"));
        assert!(ServerSpec::parse("  ").is_err());
    }

    #[test]
    fn workloads_are_well_formed() {
        let w = Workload::throughput(BenchMethod::Retrieve, 3);
        let lines: Vec<Value> = w
            .bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0]["method"], "initialize");
        assert_eq!(lines[3]["id"], 3);
        let w = Workload::slow_probe(2, 50);
        let lines: Vec<Value> = w
            .bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines[1]["params"]["_meta"]["x-tiny-delayMs"], 50);
        assert_eq!((w.ids, lines.len()), (4, 4));
    }

    #[test]
    fn tally_counts_ids_once() {
        let mut t = Tally::new(4, None);
        t.line(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        t.line(br#"{"id": 2, "jsonrpc": "2.0", "result": {"nonce": 2}}"#);
        t.line(br#"{"jsonrpc":"2.0","method":"notifications/log","params":{}}"#);
        t.line(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        t.line(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
        t.line(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#);
        t.line(br#"{"jsonrpc":"2.0","id":3,"result":{"hits":[{"id":"a"},{"id":"b"}]}}"#);
        t.line(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"nonce":1}}"#);
        assert_eq!((t.unique, t.duplicates, t.unknown, t.errors, t.other_lines), (4, 1, 1, 1, 2));
        assert!(t.all_answered.is_some());
        assert!(t.missing(10).is_empty());
    }

    #[test]
    fn tally_watches_one_id() {
        let mut t = Tally::new(4, Some(1));
        for id in [0, 2, 3, 1] {
            t.line(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).as_bytes());
        }
        assert_eq!(t.before_watched, 3);
        assert!(t.others_done.is_some() && t.watched.is_some());
        let mut t = Tally::new(4, Some(1));
        for id in [0, 1, 2] {
            t.line(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).as_bytes());
        }
        assert_eq!((t.before_watched, t.others_done.is_none()), (1, true));
        assert_eq!(t.missing(10), [3]);
    }

    #[test]
    fn medians() {
        let d = Duration::from_millis;
        assert_eq!(Summary::of(vec![d(3), d(1), d(2)]), Some(Summary { min: d(1), median: d(2) }));
        assert_eq!(Summary::of(vec![d(4), d(1), d(2), d(3)]).unwrap().median, Duration::from_micros(2500));
        assert_eq!(Summary::of(vec![]), None);
        assert_eq!(thousands(1234567.4), "1,234,567");
    }
}
