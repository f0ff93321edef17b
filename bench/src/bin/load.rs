//! `load`: a mixed workload against any engine command over stdio (pipelined on one session)
//! or HTTP (that many concurrent keep-alive clients), at several concurrency levels, with the
//! server process's memory and thread count.
//!
//! For each `--transport`, each `--server` and each `--inflight` level, a fresh server is
//! started (on a fresh copy of `--data` when given: `{data}` in the command is replaced by the
//! copy; over HTTP with `--http 127.0.0.1:PORT` appended), initialised, and kept at that many
//! requests in flight for `--seconds`: `retrieve` k=10 and k=100
//! (Cranfield queries), `index/add` (one Cranfield document under a new id) and `ping`, in
//! the shares `--mix` gives. Reports per kind the answered requests per second, p50/p99/p999
//! latency, refusals (`-32011`) and other errors; per run the idle and peak RSS (`VmHWM`) and
//! the idle and largest thread count of the server (`/proc/<pid>/status`, sampled every 5 ms).
//!
//! Each run starts with `--warmup` seconds of the same traffic that are not counted.
//!
//! Beside the mix, a probe sends one `ping` every `--probe-ms` from a thread of its own (over
//! HTTP on its own connection), the way a health check reaches a loaded server: "ping (probe)"
//! is the server's answer time without the generator's own queues (the mix's pings wait
//! behind the generator's 256 HTTP clients on two runtime threads). With `--io-nice N` the
//! generator's reading and writing threads ask for the niceness `serve --io-nice N` gives a
//! server's, so on a machine the server saturates they are not what the latencies measure.
//!
//! ```sh
//! cargo build -p rcp-bm25 -p rcp-bench
//! target/debug/rcp-bm25 index --data-dir /tmp/cran ../shared/data/cranfield/corpus.jsonl
//! target/debug/load --data /tmp/cran --seconds 10 \
//!     --server 'before=/tmp/rcp-bm25-main serve --data-dir {data}' \
//!     --server 'after=target/debug/rcp-bm25 serve --data-dir {data}'
//! ```

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ExitCode};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use rcp_bench::proc::Status;
use rcp_bench::quality::{Collection, cranfield_dir, percentile};
use rcp_bench::scratch::{Cleanup, copy_dir};
use rcp_bench::stdio::{await_answers, server_spec, spawn_quiet};
use rcp_server::exec::Scheduling;
use rcp_testkit::PeakSampler;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(name = "load", about = "Mixed pipelined load over stdio: latency per kind, peak RSS and threads")]
struct Args {
    /// A server command, `LABEL=COMMAND ARGS...` (split on whitespace; `{data}` is replaced by
    /// a fresh copy of `--data`); repeatable.
    #[arg(long = "server", value_name = "[LABEL=]COMMAND", required = true)]
    servers: Vec<String>,

    /// A data directory copied afresh for every run (writes never leak between runs).
    #[arg(long)]
    data: Option<PathBuf>,

    /// The Cranfield directory (BEIR layout) queries and documents come from; default
    /// `RCP_CRANFIELD` or ../shared/data/cranfield.
    #[arg(long)]
    cranfield: Option<PathBuf>,

    /// Seconds of traffic per concurrency level.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,

    /// Seconds of traffic before each run's measurement starts: every run starts a fresh
    /// server, whose first requests pay for cold caches and thread start-up (at 256 in flight
    /// the first window's pings waited 12-24 ms, which alone made the ping p99).
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,

    /// Requests kept in flight, one run per value.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    inflight: Vec<usize>,

    /// Shares of retrieve k=10, retrieve k=100, index/add and ping (relative weights).
    #[arg(long, value_delimiter = ',', default_value = "45,30,10,15")]
    mix: Vec<u32>,

    /// Transports measured, each with every server and level.
    #[arg(long, value_delimiter = ',', default_value = "stdio")]
    transport: Vec<Transport>,

    /// Milliseconds between the probe's pings (0: no probe).
    #[arg(long, value_name = "MS", default_value_t = 10)]
    probe_ms: u64,

    /// Niceness of the generator's reading and writing threads (and the probe's), as `serve
    /// --io-nice` for a server's (below 0 needs CAP_SYS_NICE). 0 by default: what is measured
    /// is the server's priority, not the generator's.
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
    io_nice: i32,
}

/// How the load reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    /// One stdio session, requests pipelined.
    Stdio,
    /// `--http 127.0.0.1:PORT`, one keep-alive connection per request in flight.
    Http,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Retrieve10,
    Retrieve100,
    Add,
    Ping,
    /// The probe's pings, outside the mix.
    Probe,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::Retrieve10, Kind::Retrieve100, Kind::Add, Kind::Ping, Kind::Probe];

    fn name(self) -> &'static str {
        match self {
            Kind::Retrieve10 => "retrieve k=10",
            Kind::Retrieve100 => "retrieve k=100",
            Kind::Add => "index/add",
            Kind::Ping => "ping",
            Kind::Probe => "ping (probe)",
        }
    }
}

/// What one kind of request got.
#[derive(Debug, Default)]
struct PerKind {
    latencies_ms: Vec<f64>,
    refused: usize,
    errors: usize,
}

impl PerKind {
    /// The answer to a request sent at `sent`: `None` when it could not be read, else its
    /// error code if any. Requests sent before `from` (the warm-up) are not counted.
    fn record(&mut self, sent: Instant, from: Instant, answer: Option<Option<i64>>) {
        if sent < from {
            return;
        }
        match answer {
            Some(None) => self.latencies_ms.push(sent.elapsed().as_secs_f64() * 1e3),
            Some(Some(-32011)) => self.refused += 1,
            _ => self.errors += 1,
        }
    }
}

/// What one run measured.
#[derive(Debug, Default)]
struct Run {
    kinds: HashMap<Kind, PerKind>,
    elapsed: f64,
    idle_rss_kb: u64,
    peak_rss_kb: u64,
    idle_threads: u64,
    max_threads: u64,
}

impl Run {
    /// A run from its answers, its measured seconds, the server's status when idle and at the
    /// end, and the most threads the sampler saw.
    fn new(kinds: HashMap<Kind, PerKind>, elapsed: f64, idle: Status, end: Status, sampled_threads: u64) -> Self {
        Self {
            kinds,
            elapsed,
            idle_rss_kb: idle.rss_kb,
            peak_rss_kb: end.hwm_kb.max(idle.rss_kb),
            idle_threads: idle.threads,
            max_threads: sampled_threads.max(end.threads),
        }
    }
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    if args.mix.len() != 4 || args.mix.iter().sum::<u32>() == 0 {
        bail!("--mix takes four weights: retrieve k=10, retrieve k=100, index/add, ping");
    }
    let cranfield = args.cranfield.clone().unwrap_or_else(cranfield_dir);
    let collection = Collection::load(&cranfield)
        .with_context(|| format!("load the Cranfield collection in {}", cranfield.display()))?;
    let corpus: Vec<Value> = std::fs::read_to_string(&collection.corpus)
        .with_context(|| format!("read {}", collection.corpus.display()))?
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let queries: Vec<String> = collection.queries.iter().map(|(_, q)| q.clone()).collect();
    if corpus.is_empty() || queries.is_empty() {
        bail!("the collection has no documents or no queries");
    }
    let (corpus, queries) = (Arc::new(corpus), Arc::new(queries));
    let work = std::env::temp_dir().join(format!("rcp-load-{}", std::process::id()));
    let _cleanup = Cleanup(work.clone());
    println!(
        "mixed load over {}: {:.0} s per level after {:.0} s of warm-up; mix retrieve k=10/k=100/index/add/ping = {:?}; {} cores",
        args.transport.iter().map(|t| format!("{t:?}").to_lowercase()).collect::<Vec<_>>().join(" and "),
        args.seconds,
        args.warmup,
        args.mix,
        std::thread::available_parallelism().map(usize::from).unwrap_or(1)
    );
    println!(
        "{:<10} {:>5} {:<15} {:>8} {:>9} {:>9} {:>9} {:>8} {:>6}",
        "server", "in", "kind", "req/s", "p50 ms", "p99 ms", "p999 ms", "refused", "errors"
    );
    let mut summaries = Vec::new();
    for &transport in &args.transport {
        for (si, spec) in args.servers.iter().enumerate() {
            let (label, command) = server_spec(spec, si);
            let label = match (transport, args.transport.len()) {
                (_, 1) => label,
                (Transport::Stdio, _) => format!("{label}/stdio"),
                (Transport::Http, _) => format!("{label}/http"),
            };
            for &inflight in &args.inflight {
                let data = match &args.data {
                    Some(src) => {
                        let dst = work.join(format!("{si}-{inflight}"));
                        copy_dir(src, &dst).with_context(|| format!("copy {}", src.display()))?;
                        Some(dst)
                    }
                    None => None,
                };
                let argv: Vec<String> = command
                    .split_whitespace()
                    .map(|a| match &data {
                        Some(d) => a.replace("{data}", &d.to_string_lossy()),
                        None => a.to_owned(),
                    })
                    .collect();
                let mix = Mix::new(&args.mix, &queries, &corpus);
                let mut run = match transport {
                    Transport::Stdio => drive(&argv, inflight.max(1), args, mix),
                    Transport::Http => drive_http(argv, inflight.max(1), args, mix),
                }
                .with_context(|| format!("{label} at {inflight} in flight"))?;
                let mut total = 0usize;
                for kind in Kind::ALL {
                    let Some(k) = run.kinds.get_mut(&kind) else { continue };
                    total += k.latencies_ms.len();
                    let n = k.latencies_ms.len() as f64 / run.elapsed;
                    println!(
                        "{:<10} {:>5} {:<15} {:>8.0} {:>9.2} {:>9.2} {:>9.2} {:>8} {:>6}",
                        label,
                        inflight,
                        kind.name(),
                        n,
                        percentile(&mut k.latencies_ms, 50.0),
                        percentile(&mut k.latencies_ms, 99.0),
                        percentile(&mut k.latencies_ms, 99.9),
                        k.refused,
                        k.errors
                    );
                }
                summaries.push(format!(
                    "{:<10} {:>5} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7}",
                    label,
                    inflight,
                    total as f64 / run.elapsed,
                    run.idle_rss_kb as f64 / 1024.0,
                    run.peak_rss_kb as f64 / 1024.0,
                    run.peak_rss_kb.saturating_sub(run.idle_rss_kb) as f64 / 1024.0,
                    run.idle_threads,
                    run.max_threads
                ));
            }
        }
    }
    println!();
    println!(
        "{:<10} {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "server", "in", "answers/s", "idle MB", "peak MB", "grown MB", "thr idle", "thr max"
    );
    for s in summaries {
        println!("{s}");
    }
    Ok(())
}

/// Starts `argv`, initialises it, keeps `window` requests in flight for `--seconds`.
fn drive(argv: &[String], window: usize, args: &Args, mix: Mix) -> anyhow::Result<Run> {
    let mut child = spawn_quiet(argv)?;
    let result = drive_child(&mut child, window, args, mix);
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// What the generator's reading and writing threads (and the probe's) run first: `--io-nice`,
/// as a server's I/O threads get `serve --io-nice`. Never the main thread, which starts the
/// servers: they would inherit its niceness.
fn io_thread_start(args: &Args) -> Arc<dyn Fn() + Send + Sync> {
    match (Scheduling { io_nice: args.io_nice, event_interval: None }).io_thread_start() {
        Some(start) => Arc::new(start),
        None => Arc::new(|| {}),
    }
}

fn drive_child(child: &mut Child, window: usize, args: &Args, mix: Mix) -> anyhow::Result<Run> {
    let pid = child.id();
    let start = io_thread_start(args);
    let stdin = Arc::new(Mutex::new(BufWriter::new(child.stdin.take().context("no stdin")?)));
    let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    locked(&stdin).and_then(|mut w| writeln!(w, "{hello}").and_then(|_| w.flush())).context("initialize: write")?;
    let mut line = String::new();
    if stdout.read_line(&mut line).context("initialize: read")? == 0 {
        bail!("initialize: server closed stdout");
    }
    if !line.contains("\"result\"") {
        bail!("initialize failed: {line}");
    }
    std::thread::sleep(Duration::from_millis(200));
    let idle = rcp_bench::proc::status(pid);

    let sampler = thread_sampler(pid, idle.threads);

    let in_flight: Arc<Mutex<HashMap<u64, (Kind, Instant)>>> = Arc::default();
    let (permits_tx, permits_rx) = mpsc::sync_channel::<()>(window);
    for _ in 0..window {
        let _ = permits_tx.send(());
    }
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(args.warmup);
    let stop = measure_from + Duration::from_secs_f64(args.seconds);
    let reader = {
        let (in_flight, start) = (Arc::clone(&in_flight), Arc::clone(&start));
        std::thread::spawn(move || {
            start();
            let mut kinds: HashMap<Kind, PerKind> = HashMap::new();
            let mut line = String::new();
            loop {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let Some((id, code)) = envelope(&line) else { continue };
                let Some((kind, sent)) = in_flight.lock().ok().and_then(|mut m| m.remove(&id)) else { continue };
                kinds.entry(kind).or_default().record(sent, measure_from, Some(code));
                // The probe's pings hold no place in the window.
                if kind != Kind::Probe {
                    let _ = permits_tx.send(());
                    let _ = done_tx.send(());
                }
            }
            kinds
        })
    };

    let probe = (args.probe_ms > 0).then(|| {
        let (stdin, in_flight, every) =
            (Arc::clone(&stdin), Arc::clone(&in_flight), Duration::from_millis(args.probe_ms));
        let start = Arc::clone(&start);
        std::thread::spawn(move || {
            start();
            let mut id = PROBE_IDS;
            while Instant::now() < stop {
                id += 1;
                if let Ok(mut m) = in_flight.lock() {
                    m.insert(id, (Kind::Probe, Instant::now()));
                }
                let frame = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
                if locked(&stdin).and_then(|mut w| writeln!(w, "{frame}").and_then(|_| w.flush())).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        })
    });
    // The writer runs on a thread of its own, which takes `--io-nice`.
    let writer = {
        let (stdin, in_flight) = (Arc::clone(&stdin), Arc::clone(&in_flight));
        let mut mix = mix;
        std::thread::spawn(move || -> anyhow::Result<u64> {
            start();
            let mut sent = 0u64;
            let mut unflushed = 0;
            while Instant::now() < stop {
                // Frames go out in one flush whenever the window is full, so requests are pipelined,
                // and at least every FLUSH_EVERY frames: while answers keep freeing places a frame
                // would otherwise wait in the buffer for several milliseconds, its clock running.
                if unflushed >= FLUSH_EVERY {
                    locked(&stdin).and_then(|mut w| w.flush()).context("write")?;
                    unflushed = 0;
                }
                if permits_rx.try_recv().is_err() {
                    locked(&stdin).and_then(|mut w| w.flush()).context("write")?;
                    unflushed = 0;
                    if permits_rx.recv_timeout(Duration::from_secs(60)).is_err() {
                        bail!("no answer for 60 s");
                    }
                }
                unflushed += 1;
                sent += 1;
                let (kind, frame) = mix.next(sent);
                if let Ok(mut m) = in_flight.lock() {
                    m.insert(sent, (kind, Instant::now()));
                }
                locked(&stdin).and_then(|mut w| writeln!(w, "{frame}")).context("write")?;
            }
            locked(&stdin).and_then(|mut w| w.flush()).context("write")?;
            Ok(sent)
        })
    };
    let sent = writer.join().map_err(|_| anyhow!("writer thread panicked"))??;
    if let Some(probe) = probe {
        let _ = probe.join();
    }
    await_answers(&done_rx, sent, Duration::from_secs(120))?;
    let elapsed = measure_from.elapsed().as_secs_f64();
    let sampled_threads = sampler.stop();
    let end = rcp_bench::proc::status(pid);
    drop(stdin);
    let _ = child.kill();
    let kinds = reader.join().map_err(|_| anyhow!("reader thread panicked"))?;
    Ok(Run::new(kinds, elapsed, idle, end, sampled_threads))
}

/// Frames the stdio generator buffers at most before it flushes.
const FLUSH_EVERY: usize = 16;

/// Ids of the probe's pings start above this (the mix counts up from 1).
const PROBE_IDS: u64 = 1 << 48;

/// Samples the server's thread count every 5 ms until stopped, keeping the largest.
fn thread_sampler(pid: u32, idle: u64) -> PeakSampler {
    PeakSampler::start(idle, Duration::from_millis(5), move || rcp_bench::proc::status(pid).threads)
}

/// The generator's end of the server's stdin, shared by the mix and the probe.
fn locked<W>(w: &Mutex<W>) -> std::io::Result<std::sync::MutexGuard<'_, W>> {
    w.lock().map_err(|_| std::io::Error::other("a writer panicked"))
}

/// The request mix: which kind comes next (seeded, the same sequence for every server) and
/// its frame.
#[derive(Clone)]
struct Mix {
    weights: Vec<u32>,
    total: u32,
    rng: u64,
    queries: Arc<Vec<String>>,
    corpus: Arc<Vec<Value>>,
}

impl Mix {
    fn new(weights: &[u32], queries: &Arc<Vec<String>>, corpus: &Arc<Vec<Value>>) -> Self {
        Self {
            weights: weights.to_vec(),
            total: weights.iter().sum(),
            rng: 0x2545_F491_4F6C_DD1D,
            queries: Arc::clone(queries),
            corpus: Arc::clone(corpus),
        }
    }

    /// The same mix on another seeded sequence (one per HTTP client).
    fn reseeded(&self, stream: u64) -> Self {
        Self { rng: self.rng ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, ..self.clone() }
    }

    /// The kind and frame of request `id`.
    fn next(&mut self, id: u64) -> (Kind, Value) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let mut pick = (self.rng % u64::from(self.total.max(1))) as u32;
        let kind = Kind::ALL
            .into_iter()
            .zip(self.weights.iter())
            .find(|(_, w)| {
                if pick < **w {
                    true
                } else {
                    pick -= **w;
                    false
                }
            })
            .map_or(Kind::Ping, |(k, _)| k);
        let r = (self.rng >> 20) as usize;
        let frame = match kind {
            Kind::Retrieve10 | Kind::Retrieve100 => {
                let k = if kind == Kind::Retrieve10 { 10 } else { 100 };
                let query = &self.queries[r % self.queries.len()];
                json!({"jsonrpc": "2.0", "id": id, "method": "retrieve", "params": {"query": query, "k": k}})
            }
            Kind::Add => {
                let src = &self.corpus[r % self.corpus.len()];
                let doc = json!({"id": format!("load-{id}"), "text": src["text"], "meta": {"title": src["title"]}});
                json!({"jsonrpc": "2.0", "id": id, "method": "index/add", "params": {"documents": [doc]}})
            }
            Kind::Ping | Kind::Probe => json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
        };
        (kind, frame)
    }
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("find a free port on 127.0.0.1")?;
    l.local_addr().map(|a| a.port()).context("find a free port on 127.0.0.1")
}

/// Over HTTP: the server started with `--http`, `window` clients each with its own keep-alive
/// connection sending one request at a time (stateless requests, no session).
fn drive_http(mut argv: Vec<String>, window: usize, args: &Args, mix: Mix) -> anyhow::Result<Run> {
    let port = free_port()?;
    argv.extend(["--http".to_owned(), format!("127.0.0.1:{port}")]);
    let mut child = spawn_quiet(&argv)?;
    let result = drive_http_child(&mut child, port, window, args, mix);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn drive_http_child(child: &mut Child, port: u16, window: usize, args: &Args, mix: Mix) -> anyhow::Result<Run> {
    let pid = child.id();
    let url = format!("http://127.0.0.1:{port}/rcp");
    let started_at = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started_at.elapsed() > Duration::from_secs(60) {
            bail!("nothing listens on port {port} after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The clients' runtime looks at its sockets as often as the server's does (every 8 tasks,
    // tokio's default is 61), so an answer that arrived is not left waiting behind the
    // generator's own queue and measured as the server's latency.
    let start = io_thread_start(args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .event_interval(8)
        .enable_all()
        .on_thread_start({
            let start = Arc::clone(&start);
            move || start()
        })
        .build()
        .context("build the clients' runtime")?;
    std::thread::sleep(Duration::from_millis(200));
    let idle = rcp_bench::proc::status(pid);
    let sampler = thread_sampler(pid, idle.threads);
    let measure_from = Instant::now() + Duration::from_secs_f64(args.warmup);
    let stop = measure_from + Duration::from_secs_f64(args.seconds);
    let probe = (args.probe_ms > 0).then(|| {
        let (url, every) = (url.clone(), Duration::from_millis(args.probe_ms));
        std::thread::spawn(move || http_probe(&url, every, measure_from, stop, &*start))
    });
    let results: Vec<HashMap<Kind, PerKind>> = runtime.block_on(async move {
        let tasks: Vec<_> = (0..window as u64)
            .map(|c| {
                let url = url.clone();
                let mut mix = mix.reseeded(c + 1);
                tokio::spawn(async move {
                    let client = rcp_client::TlsOptions::default()
                        .http_client_builder()
                        .expect("a TLS configuration without files")
                        .pool_max_idle_per_host(1)
                        .build()
                        .expect("HTTP client");
                    let mut kinds: HashMap<Kind, PerKind> = HashMap::new();
                    let mut n = 0u64;
                    while Instant::now() < stop {
                        n += 1;
                        let (kind, frame) = mix.next((c + 1) * 1_000_000_000 + n);
                        let body = frame.to_string();
                        let sent = Instant::now();
                        let answer = client
                            .post(url.as_str())
                            .header("content-type", "application/json")
                            .body(body)
                            .send()
                            .await;
                        let text = match answer {
                            Ok(r) => r.text().await.unwrap_or_default(),
                            Err(_) => String::new(),
                        };
                        let answer = envelope(&text).map(|(_, code)| code);
                        kinds.entry(kind).or_default().record(sent, measure_from, answer);
                    }
                    kinds
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap_or_default());
        }
        all
    });
    let elapsed = measure_from.elapsed().as_secs_f64();
    let sampled_threads = sampler.stop();
    let end = rcp_bench::proc::status(pid);
    let mut kinds: HashMap<Kind, PerKind> = HashMap::new();
    if let Some(probe) = probe {
        kinds.insert(Kind::Probe, probe.join().map_err(|_| anyhow!("the probe panicked"))?);
    }
    for r in results {
        for (kind, k) in r {
            let all = kinds.entry(kind).or_default();
            all.latencies_ms.extend(k.latencies_ms);
            all.refused += k.refused;
            all.errors += k.errors;
        }
    }
    Ok(Run::new(kinds, elapsed, idle, end, sampled_threads))
}

/// The HTTP probe: one ping every `every` on a connection of its own, from this thread, until
/// `stop`; counted from `from`.
fn http_probe(url: &str, every: Duration, from: Instant, stop: Instant, start: &dyn Fn()) -> PerKind {
    start();
    let mut k = PerKind::default();
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return k };
    runtime.block_on(async {
        let client = rcp_client::TlsOptions::default()
            .http_client_builder()
            .expect("a TLS configuration without files")
            .build()
            .expect("HTTP client");
        let mut id = PROBE_IDS;
        while Instant::now() < stop {
            id += 1;
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
            let sent = Instant::now();
            let answer = client.post(url).header("content-type", "application/json").body(body).send().await;
            let text = match answer {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            k.record(sent, from, envelope(&text).map(|(_, code)| code));
            tokio::time::sleep(every).await;
        }
    });
    k
}

/// The id and error code of an answer frame, read from its envelope without parsing the
/// result (a debug-built client parsing k=100 hits would otherwise be the bottleneck). The
/// framework writes `{"jsonrpc":"2.0","id":...` first; a frame in another shape is parsed.
fn envelope(line: &str) -> Option<(u64, Option<i64>)> {
    const HEAD: &str = "{\"jsonrpc\":\"2.0\",\"id\":";
    if let Some(rest) = line.strip_prefix(HEAD) {
        let end = rest.find(|c: char| !c.is_ascii_digit())?;
        let id = rest[..end].parse().ok()?;
        let rest = &rest[end..];
        if rest.starts_with(",\"result\"") {
            return Some((id, None));
        }
        if let Some(err) = rest.strip_prefix(",\"error\":{\"code\":") {
            let end = err.find(|c: char| c != '-' && !c.is_ascii_digit())?;
            return Some((id, err[..end].parse().ok()));
        }
    }
    let v: Value = serde_json::from_str(line).ok()?;
    Some((v.get("id")?.as_u64()?, v.pointer("/error/code").and_then(Value::as_i64)))
}
