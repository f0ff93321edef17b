//! `bm25_mixed`: latency of a mixed, pipelined read/write workload on `rcp-bm25 serve`.
//!
//! Builds a Cranfield index once (`rcp-bm25 index`), then for each `--engine` binary serves a
//! fresh copy of it over stdio and keeps `--window` requests in flight for `--seconds`: a mix
//! of `retrieve` (Cranfield queries, k=10) and `index/add` (one Cranfield document under a new
//! id), with a `--write-share` of writes. Reports per-kind p50/p99/max latency and the
//! acknowledged writes per second. Several `--engine`s run one after another on identical
//! copies, so an old and a new binary compare in one run.
//!
//! ```sh
//! cargo build -p rcp-bm25 -p rcp-bench
//! target/debug/bm25_mixed --engine old=/tmp/rcp-bm25-main --engine new=target/debug/rcp-bm25 --seconds 20
//! ```

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, percentile};
use rcp_bench::scratch::{Cleanup, copy_dir, sibling};
use rcp_bench::stdio::spawn_quiet;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(name = "bm25_mixed", about = "Mixed pipelined retrieve + index/add latency on rcp-bm25 serve (stdio)")]
struct Args {
    /// A server binary to measure, `LABEL=PATH` or `PATH`; repeatable (default: `rcp-bm25`
    /// beside this executable).
    #[arg(long = "engine", value_name = "[LABEL=]PATH")]
    engines: Vec<String>,

    /// The Cranfield directory (BEIR layout); default `RCP_CRANFIELD` or ../shared/data/cranfield.
    #[arg(long)]
    cranfield: Option<PathBuf>,

    /// Seconds of traffic per engine.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,

    /// Requests kept in flight.
    #[arg(long, default_value_t = 64)]
    window: usize,

    /// Share of requests that are `index/add` (0–1).
    #[arg(long, default_value_t = 0.2)]
    write_share: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Retrieve,
    Add,
}

/// Latencies (ms) per kind, and errors.
#[derive(Debug, Default)]
struct Outcome {
    latencies: HashMap<Kind, Vec<f64>>,
    errors: usize,
    elapsed: f64,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run_all(&Args::parse()))
}

/// Builds the index once, then measures each `--engine` on a copy of it.
fn run_all(args: &Args) -> anyhow::Result<()> {
    let cranfield = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let collection = Collection::load(&cranfield)
        .with_context(|| format!("load the Cranfield collection in {}", cranfield.display()))?;
    let corpus: Vec<Value> = std::fs::read_to_string(&collection.corpus)
        .with_context(|| format!("read {}", collection.corpus.display()))?
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let engines: Vec<(String, PathBuf)> = if args.engines.is_empty() {
        vec![("rcp-bm25".into(), sibling("rcp-bm25"))]
    } else {
        args.engines
            .iter()
            .map(|e| match e.split_once('=') {
                Some((label, path)) => (label.to_owned(), PathBuf::from(path)),
                None => (e.clone(), PathBuf::from(e)),
            })
            .collect()
    };
    let work = std::env::temp_dir().join(format!("bm25-mixed-{}", std::process::id()));
    let _cleanup = Cleanup(work.clone());
    let base = work.join("base");
    let out = Command::new(&engines[0].1)
        .arg("index")
        .arg("--data-dir")
        .arg(&base)
        .arg(&collection.corpus)
        .output()
        .with_context(|| format!("run {} index", engines[0].1.display()))?;
    if !out.status.success() {
        bail!("index failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end());
    }
    println!(
        "mixed workload: {:.0} s per engine, window {}, {:.0}% index/add (1 document each), Cranfield ({} docs, {} queries)",
        args.seconds,
        args.window,
        args.write_share * 100.0,
        corpus.len(),
        collection.queries.len()
    );
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "engine", "reads/s", "read p50", "read p99", "writes/s", "write p50", "write p99", "write max", "errors"
    );
    for (i, (label, bin)) in engines.iter().enumerate() {
        let data = work.join(format!("run-{i}"));
        copy_dir(&base, &data).with_context(|| format!("copy the index to {}", data.display()))?;
        let o = run(bin, &data, args, &collection, &corpus).with_context(|| format!("engine {label}"))?;
        let mut reads = o.latencies.get(&Kind::Retrieve).cloned().unwrap_or_default();
        let mut writes = o.latencies.get(&Kind::Add).cloned().unwrap_or_default();
        println!(
            "{:<12} {:>9.0} {:>8.1}ms {:>8.1}ms {:>9.1} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>7}",
            label,
            reads.len() as f64 / o.elapsed,
            percentile(&mut reads, 50.0),
            percentile(&mut reads, 99.0),
            writes.len() as f64 / o.elapsed,
            percentile(&mut writes, 50.0),
            percentile(&mut writes, 99.0),
            percentile(&mut writes, 100.0),
            o.errors
        );
    }
    Ok(())
}

/// Serves `data` with `bin` and drives the pipelined mix; returns the latencies.
fn run(bin: &Path, data: &Path, args: &Args, c: &Collection, corpus: &[Value]) -> anyhow::Result<Outcome> {
    let mut child = spawn_quiet(&[bin.as_os_str(), "serve".as_ref(), "--data-dir".as_ref(), data.as_os_str()])?;
    let mut stdin = BufWriter::new(child.stdin.take().context("no stdin")?);
    let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    writeln!(stdin, "{hello}").and_then(|_| stdin.flush()).context("initialize: write")?;
    let mut line = String::new();
    stdout.read_line(&mut line).context("initialize: read")?;

    let in_flight: Arc<Mutex<HashMap<u64, (Kind, Instant)>>> = Arc::default();
    let (permits_tx, permits_rx) = mpsc::sync_channel::<()>(args.window);
    for _ in 0..args.window {
        let _ = permits_tx.send(());
    }
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let reader = {
        let in_flight = Arc::clone(&in_flight);
        std::thread::spawn(move || {
            let mut o = Outcome::default();
            let mut line = String::new();
            loop {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                let Some(id) = v.get("id").and_then(Value::as_u64) else { continue };
                let Some((kind, sent)) = in_flight.lock().ok().and_then(|mut m| m.remove(&id)) else { continue };
                if v.get("error").is_some() {
                    o.errors += 1;
                } else {
                    o.latencies.entry(kind).or_default().push(sent.elapsed().as_secs_f64() * 1e3);
                }
                let _ = permits_tx.send(());
                let _ = done_tx.send(id);
            }
            o
        })
    };

    let started = Instant::now();
    let stop = started + Duration::from_secs_f64(args.seconds);
    let mut sent = 0u64;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while Instant::now() < stop {
        if permits_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            bail!("no answer for 60 s");
        }
        sent += 1;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let write = (rng % 10_000) as f64 / 10_000.0 < args.write_share;
        let (kind, frame) = if write {
            let src = &corpus[(rng as usize / 7) % corpus.len()];
            let doc = json!({"id": format!("mixed-{sent}"), "text": src["text"], "meta": {"title": src["title"]}});
            (Kind::Add, json!({"jsonrpc": "2.0", "id": sent, "method": "index/add", "params": {"documents": [doc]}}))
        } else {
            let q = &c.queries[(rng as usize / 7) % c.queries.len()].1;
            (
                Kind::Retrieve,
                json!({"jsonrpc": "2.0", "id": sent, "method": "retrieve", "params": {"query": q, "k": 10}}),
            )
        };
        if let Ok(mut m) = in_flight.lock() {
            m.insert(sent, (kind, Instant::now()));
        }
        writeln!(stdin, "{frame}").and_then(|_| stdin.flush()).context("write")?;
    }
    // Drain: every request sent is answered before the clock stops.
    rcp_bench::stdio::await_answers(&done_rx, sent, Duration::from_secs(120))?;
    let elapsed = started.elapsed().as_secs_f64();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let mut o = reader.join().map_err(|_| anyhow!("reader thread panicked"))?;
    o.elapsed = elapsed;
    Ok(o)
}
