//! Resident memory and throughput of `embed` on long inputs, per server, in one run: the idle
//! RSS after `initialize`, the RSS after `--rounds` calls embedding `--texts` Cranfield
//! abstracts each, and the best round's texts/s. Written for the ONNX Runtime arena setting of
//! the engines that embed (`--onnx-arena true|false`), but any server with `embed` works.
//!
//! ```sh
//! cargo build --release -p rcp-dense --bins && cargo build --release -p rcp-bench --bin embed_rss
//! target/release/embed_rss --server 'arena=target/release/rcp-dense serve --onnx-arena true' \
//!                          --server 'no-arena=target/release/rcp-dense serve'
//! ```

use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::proc::status;
use rcp_bench::quality::{Collection, cranfield_dir};
use rcp_bench::stdio::{StdioServer, server_spec};
use serde_json::json;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "RSS and throughput of large embed calls, per server, in one run")]
struct Args {
    /// `LABEL=COMMAND ARGS...` (repeatable; run in the order given, `--repeat` times).
    #[arg(long = "server", required = true)]
    servers: Vec<String>,
    /// Texts per `embed` call (Cranfield abstracts).
    #[arg(long, default_value_t = 256)]
    texts: usize,
    /// `embed` calls per server.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Passes over the server list (interleaves them to spread machine noise).
    #[arg(long, default_value_t = 2)]
    repeat: usize,
}

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let dir = cranfield_dir();
    let collection =
        Collection::load(&dir).with_context(|| format!("load the Cranfield collection in {}", dir.display()))?;
    let texts: Vec<String> = rcp_corpus::read_jsonl(&collection.corpus)
        .context("read the Cranfield corpus")?
        .filter_map(Result::ok)
        .map(|d| d.text)
        .take(args.texts)
        .collect();
    println!("{} texts per embed, {} calls per server", texts.len(), args.rounds);
    println!("{:<12} {:>9} {:>9} {:>9} {:>9} {:>10}", "server", "idle MB", "after MB", "+MB", "peak MB", "texts/s");
    for _ in 0..args.repeat {
        for (i, spec) in args.servers.iter().enumerate() {
            let (label, command) = server_spec(spec, i);
            let argv: Vec<&str> = command.split_whitespace().collect();
            let (program, rest) = argv.split_first().with_context(|| format!("--server {spec:?}: empty command"))?;
            let mut cmd = Command::new(program);
            cmd.args(rest).stderr(Stdio::null());
            let mut server = StdioServer::spawn(cmd).with_context(|| format!("server {label}"))?;
            let idle = status(server.pid());
            let mut best = 0.0_f64;
            for _ in 0..args.rounds {
                let started = Instant::now();
                server.call("embed", json!({"inputs": texts})).with_context(|| format!("server {label}"))?;
                best = best.max(texts.len() as f64 / started.elapsed().as_secs_f64());
            }
            let after = status(server.pid());
            let mb = |kb: u64| kb as f64 / 1024.0;
            println!(
                "{label:<12} {:>9.0} {:>9.0} {:>+9.0} {:>9.0} {best:>10.1}",
                mb(idle.rss_kb),
                mb(after.rss_kb),
                mb(after.rss_kb) - mb(idle.rss_kb),
                mb(after.hwm_kb)
            );
            server.shutdown().with_context(|| format!("server {label}"))?;
        }
    }
    Ok(())
}
