//! HTTP load generator: requests/s and p50/p99 latency of no-op `retrieve` over keep-alive
//! connections at several concurrency levels, measured side by side in one run.
//!
//! ```sh
//! cargo run --release -p rcp-bench --bin http_load -- --concurrency 1,16,64 --seconds 5
//! cargo run --release -p rcp-bench --bin http_load -- --url http://127.0.0.1:8080/rcp
//! ```
//! Without `--url` it serves a no-op engine in-process on 127.0.0.1 (its own runtime, so the
//! server and the load share the machine's cores as they would with an external server).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::quality::percentile;
use rcp_server::http::HttpOptions;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Requests/s and p50/p99 latency of no-op retrieve over HTTP keep-alive")]
struct Args {
    /// Target base URL (e.g. http://127.0.0.1:8080/rcp); default: an in-process no-op engine.
    #[arg(long)]
    url: Option<String>,
    /// Concurrent clients, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Seconds per concurrency level.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Server worker threads for the in-process engine.
    #[arg(long, default_value_t = 2)]
    server_threads: usize,
}

/// A retrieve handler that does nothing but return one hit.
struct Noop;

impl Retrieve for Noop {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult::from_hits(vec![Hit::new("noop", 1.0)]))
    }
}

/// Serves the no-op engine on 127.0.0.1 from a thread of its own (with its own runtime of
/// `threads` workers); its base URL.
fn start_in_process(threads: usize) -> anyhow::Result<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let started = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build();
        let rt = match started.context("build the server's runtime") {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            let server = Server::builder("noop", "0").retrieve(Noop).build();
            let bound = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .and_then(|listener| listener.local_addr().map(|addr| (listener, addr)))
                .context("listen on 127.0.0.1");
            let listener = match bound {
                Ok((listener, addr)) => {
                    let _ = tx.send(Ok(format!("http://{addr}/rcp")));
                    listener
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let _ = rcp_server::http::serve_on(&server, listener, HttpOptions::default(), std::future::pending()).await;
        });
    });
    rx.recv().context("the server thread ended before it listened")?
}

async fn level(url: &str, clients: usize, seconds: f64) -> (usize, usize, Vec<f64>) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let endpoint = Arc::new(format!("{url}/retrieve"));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let endpoint = Arc::clone(&endpoint);
        tasks.push(tokio::spawn(async move {
            let client = rcp_client::TlsOptions::default()
                .http_client_builder()
                .expect("a TLS configuration without files")
                .pool_max_idle_per_host(1)
                .build()
                .expect("HTTP client");
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut i = 0u64;
            while Instant::now() < end {
                i += 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"retrieve","params":{{"query":"noop {c}","k":1}}}}"#
                );
                let t = Instant::now();
                let ok = match client
                    .post(endpoint.as_str())
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => {
                        r.bytes().await.is_ok_and(|b| b.windows(8).any(|w| w == b"\"result\""))
                    }
                    _ => false,
                };
                if ok {
                    lat.push(t.elapsed().as_secs_f64() * 1e3);
                } else {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((lat, e)) = t.await {
            all.extend(lat);
            errors += e;
        }
    }
    (all.len(), errors, all)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(Args::parse()).await)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let url = match args.url.clone() {
        Some(url) => url,
        None => start_in_process(args.server_threads).context("could not start the in-process server")?,
    };
    if url.is_empty() {
        bail!("--url is empty");
    }
    // Warm up connections and code paths.
    let _ = level(&url, 4, 0.5).await;
    println!("no-op retrieve over HTTP keep-alive at {url}, {:.1} s per level", args.seconds);
    println!(
        "{:>8} {:>12} {:>10} {:>10} {:>10} {:>8}",
        "clients", "requests/s", "p50 ms", "p99 ms", "max ms", "errors"
    );
    for &c in &args.concurrency {
        let (n, errors, mut lat) = level(&url, c, args.seconds).await;
        let rps = n as f64 / args.seconds;
        let p50 = percentile(&mut lat, 50.0);
        let p99 = percentile(&mut lat, 99.0);
        let max = lat.iter().copied().fold(0.0, f64::max);
        println!("{c:>8} {rps:>12.0} {p50:>10.3} {p99:>10.3} {max:>10.3} {errors:>8}");
    }
    Ok(())
}
