//! `session_memory`: how much memory the framework's trajectory sessions (§7.7.3) hold.
//!
//! A server with `session` on and a stand-in engine (every query ranks a large pool of ids,
//! offset per session, so each trajectory sees its own documents) is driven in-process:
//! `--sessions` trajectories each run `--steps` retrieves of `--k` hits (the session cap and
//! the ids per session are set to hold them all). The resident memory grown over the run,
//! divided by the trajectories, is the cost of one; then the same number of further
//! trajectories shows that the cap (`--max-sessions`) holds memory flat.
//!
//! ```sh
//! cargo run --release -p rcp-bench --bin session_memory
//! cargo run --release -p rcp-bench --bin session_memory -- --sessions 1000 --steps 26 --k 10
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcp_server::transport::Connection;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, SessionOptions};
use rcp_testkit::{MemField, status_kb};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(name = "session_memory", about = "Memory held by trajectory sessions")]
struct Args {
    /// Trajectories to open.
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,

    /// Retrieves per trajectory.
    #[arg(long, default_value_t = 3)]
    steps: usize,

    /// Hits per retrieve.
    #[arg(long, default_value_t = 10)]
    k: usize,

    /// The session cap (`SessionOptions::max_sessions`; default: `--sessions`).
    #[arg(long)]
    max_sessions: Option<usize>,
}

/// Ranks `doc-<query>-0`, `doc-<query>-1`, ... for every query, honouring `k`.
struct Pool;

impl Retrieve for Pool {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(2_000), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let q = req.query.text();
        let hits = (0..req.k).map(|i| Hit::new(format!("doc-{q}-{i}").as_str(), 1.0 / (1.0 + i as f64))).collect();
        Ok(RetrieveResult::from_hits(hits))
    }
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn rss_kb() -> u64 {
    status_kb(std::process::id(), MemField::Rss)
}

async fn call(c: &Connection, id: u64, method: &str, params: Value) -> anyhow::Result<Value> {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.context("no answer")?;
    let v: Value = serde_json::from_slice(&bytes)?;
    if v.get("error").is_some() {
        bail!("{method} failed: {v}");
    }
    Ok(v)
}

/// Runs `steps` retrieves in each of the trajectories `from..to`.
async fn drive(c: &Connection, from: usize, to: usize, args: &Args) -> anyhow::Result<()> {
    let mut id = 1;
    for s in from..to {
        let session = format!("trajectory-{s:08}");
        for _ in 0..args.steps {
            id += 1;
            let params = json!({"query": s.to_string(), "k": args.k, "sessionId": session});
            let r = call(c, id, "retrieve", params).await?;
            if r["result"]["hits"].as_array().map(Vec::len) != Some(args.k) {
                bail!("expected {} hits: {r}", args.k);
            }
        }
    }
    Ok(())
}

fn run(args: &Args) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let max_sessions = args.max_sessions.unwrap_or(args.sessions);
        let options = SessionOptions {
            max_sessions,
            max_ids: args.steps * args.k,
            ttl: Duration::from_secs(3600),
            ..SessionOptions::default()
        };
        let server = Server::builder("pool", "0").retrieve(Pool).session(options).build();
        let c = server.connect(|_| {});
        call(&c, 0, "initialize", json!({"protocolVersion": 1})).await?;
        // Warm up the allocator and the dispatcher with one throwaway trajectory.
        drive(&c, args.sessions * 10, args.sessions * 10 + 1, args).await?;
        let before = rss_kb();
        let started = Instant::now();
        drive(&c, 0, args.sessions, args).await?;
        let secs = started.elapsed().as_secs_f64();
        let after = rss_kb();
        drive(&c, args.sessions, args.sessions * 2, args).await?;
        let again = rss_kb();
        let ids = args.steps * args.k;
        let grown = after.saturating_sub(before);
        println!();
        println!(
            "{} trajectories x {} retrieves x k={} ({ids} ids each), cap {} sessions",
            args.sessions, args.steps, args.k, max_sessions
        );
        println!("| measure                                   | value      |");
        println!("|-------------------------------------------|------------|");
        println!("| RSS grown by the trajectories (KiB)       | {grown:>10} |");
        println!(
            "| per trajectory (bytes)                    | {:>10.0} |",
            grown as f64 * 1024.0 / args.sessions as f64
        );
        println!(
            "| per remembered id (bytes)                 | {:>10.1} |",
            grown as f64 * 1024.0 / (args.sessions * ids) as f64
        );
        println!(
            "| retrieves/s (in-process, with dedup)      | {:>10.0} |",
            (args.sessions * args.steps) as f64 / secs
        );
        println!("| RSS grown by as many more (KiB)           | {:>10} |", again.saturating_sub(after));
        let cmd: Vec<String> = std::env::args().collect();
        println!("\ncommand: {}", cmd.join(" "));
        Ok(())
    })
}
