//! `rtt`: sequential round-trip latency, one request at a time (the way an agent calls a
//! tool), against any server command over stdio: `ping` and a near-no-op `retrieve`.
//!
//! Frames are written pre-serialised and answers matched by their envelope only, so the
//! client adds as little as it can to what is measured. Any RCP server works (the public
//! SDKs' example servers too); a server without `retrieve` gets only the `ping` row.
//!
//! On a virtual machine a round trip between two processes on different CPUs is dominated by
//! waking the idle CPU (tens of µs, the same for every server), and which placement the
//! scheduler picks changes from run to run. So each server is measured under `--placement`s:
//! `same-cpu` (client and server pinned to CPU 0: the software path alone, every wake-up a
//! direct switch), `split` (client on CPU 0, server on CPU 1: the cross-CPU wake-ups), and
//! `free` (the scheduler decides). Servers are pinned with `taskset` (util-linux), the client
//! with `sched_setaffinity`; `free` runs first, since the client cannot unpin itself portably.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin rtt -p rcp-examples --example tiny_engine
//! target/release/rtt --server ours=target/release/examples/tiny_engine --n 5000
//! ```

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{ChildStdin, ChildStdout, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::percentile;
use rcp_bench::stdio::{server_spec, spawn_quiet};

#[derive(Debug, Parser)]
#[command(name = "rtt", about = "Sequential round-trip latency (ping, no-op retrieve) over stdio")]
struct Args {
    /// A server command, `LABEL=COMMAND ARGS...` (split on whitespace); repeatable.
    #[arg(long = "server", value_name = "[LABEL=]COMMAND", required = true)]
    servers: Vec<String>,

    /// Measured round trips per method.
    #[arg(long, default_value_t = 5000)]
    n: usize,

    /// Unmeasured round trips first.
    #[arg(long, default_value_t = 500)]
    warmup: usize,

    /// The query of the retrieve round trips (k=1).
    #[arg(long, default_value = "x")]
    query: String,

    /// Placements measured; they always run in the order free, split, same-cpu.
    #[arg(long, value_delimiter = ',', default_value = "free,split,same-cpu")]
    placement: Vec<Placement>,
}

/// Where client and server run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
enum Placement {
    /// Wherever the scheduler puts them.
    Free,
    /// Client on CPU 0, server on CPU 1.
    Split,
    /// Both on CPU 0.
    SameCpu,
}

impl Placement {
    /// The CPU the server is pinned to.
    fn server_cpu(self) -> Option<usize> {
        match self {
            Placement::Free => None,
            Placement::Split => Some(1),
            Placement::SameCpu => Some(0),
        }
    }
}

/// Pins this process (the client) to CPU 0.
fn pin_client() -> anyhow::Result<()> {
    let pid = std::process::id().to_string();
    let status = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &pid])
        .stdout(std::process::Stdio::null())
        .status()
        .context("taskset")?;
    if !status.success() {
        bail!("taskset exited with {status}");
    }
    Ok(())
}

struct Peer {
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Peer {
    /// Sends one frame and reads lines until the answer to `id`; whether it is a result.
    fn call(&mut self, frame: &[u8], id: u64) -> anyhow::Result<bool> {
        self.stdin.write_all(frame).and_then(|_| self.stdin.flush()).context("write")?;
        let wanted_a = format!("\"id\":{id},");
        let wanted_b = format!("\"id\": {id},");
        loop {
            self.line.clear();
            if self.stdout.read_until(b'\n', &mut self.line).context("read")? == 0 {
                bail!("server closed stdout");
            }
            let head = &self.line[..self.line.len().min(64)];
            let head = String::from_utf8_lossy(head);
            if head.contains(&wanted_a) || head.contains(&wanted_b) {
                return Ok(head.contains("\"result\""));
            }
        }
    }
}

fn frame(id: u64, method: &str, params: &str) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n").into_bytes()
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let mut placements = args.placement.clone();
    placements.sort();
    placements.dedup();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("sequential round trips over stdio: {} per method after {} warm-up", args.n, args.warmup);
    println!("{:<12} {:<9} {:<9} {:>9} {:>9} {:>9}", "server", "placement", "method", "p50 µs", "p99 µs", "mean µs");
    for placement in placements {
        if placement == Placement::Split && cpus < 2 {
            println!("(split skipped: one CPU)");
            continue;
        }
        if placement != Placement::Free {
            pin_client().context("pin the client to CPU 0")?;
        }
        for (si, spec) in args.servers.iter().enumerate() {
            measure(args, placement, si, spec)?;
        }
    }
    Ok(())
}

/// One server under one placement: ping, then retrieve.
fn measure(args: &Args, placement: Placement, si: usize, spec: &str) -> anyhow::Result<()> {
    let place = match placement {
        Placement::Free => "free",
        Placement::Split => "split",
        Placement::SameCpu => "same-cpu",
    };
    {
        let (label, command) = server_spec(spec, si);
        let cpu = placement.server_cpu().map(|c| c.to_string());
        let mut argv: Vec<&str> = Vec::new();
        if let Some(cpu) = cpu.as_deref() {
            argv.extend(["taskset", "-c", cpu]);
        }
        argv.extend(command.split_whitespace());
        let mut child = spawn_quiet(&argv).with_context(|| format!("server {label}"))?;
        let mut peer = Peer {
            stdin: BufWriter::new(child.stdin.take().context("no stdin")?),
            stdout: BufReader::new(child.stdout.take().context("no stdout")?),
            line: Vec::new(),
        };
        let hello = frame(0, "initialize", r#"{"protocolVersion":1,"client":{"name":"rcp-bench-rtt","version":"0"}}"#);
        if !peer.call(&hello, 0).with_context(|| format!("{label}: initialize"))? {
            bail!("{label}: initialize failed");
        }
        let query = serde_json::to_string(&args.query).context("--query as JSON")?;
        let methods = [("ping", "{}".to_owned()), ("retrieve", format!("{{\"query\":{query},\"k\":1}}"))];
        let mut id = 0u64;
        for (method, params) in &methods {
            let mut samples = Vec::with_capacity(args.n);
            let mut ok = true;
            for i in 0..args.warmup + args.n {
                id += 1;
                let f = frame(id, method, params);
                let started = Instant::now();
                ok = peer.call(&f, id).with_context(|| format!("{label}: {method} ({place})"))?;
                let took = started.elapsed().as_secs_f64() * 1e6;
                if !ok {
                    break;
                }
                if i >= args.warmup {
                    samples.push(took);
                }
            }
            if !ok {
                println!("{label:<12} {place:<9} {method:<9} (answered with an error; skipped)");
                continue;
            }
            let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
            println!(
                "{:<12} {:<9} {:<9} {:>9.1} {:>9.1} {:>9.1}",
                label,
                place,
                method,
                percentile(&mut samples, 50.0),
                percentile(&mut samples, 99.0),
                mean
            );
        }
        drop(peer);
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(())
}
