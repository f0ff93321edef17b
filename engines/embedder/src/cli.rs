//! The model flags every engine binary shares, and loading the encoder from them.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use crate::embedder::{EmbedError, Embedder, EmbedderOptions};
use crate::model::{self, ModelError};

/// Why [`ModelArgs::load`] could not produce an encoder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The model is missing (and could not or may not be fetched).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The encoder could not be loaded from the model files.
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

/// `--model-dir`, `--fetch-model`, `--max-length`, `--encoder-sessions`, `--threads`, `--onnx-arena`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model directory [default: $RCP_MODEL_DIR, else the user cache directory, e.g. ~/.cache/rcp/models/minilm-l6-v2-int8].
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
    /// Provision the model (as the `fetch-model` command does) when it is missing.
    #[arg(long)]
    pub fetch_model: bool,
    /// Longest input in tokens; longer texts are truncated.
    #[arg(long, default_value_t = 256)]
    pub max_length: usize,
    /// Encoder sessions run side by side, each with its own batches [default: one per core].
    #[arg(long, value_name = "N")]
    pub encoder_sessions: Option<usize>,
    /// ONNX Runtime threads per encoder session [default: the cores divided among the sessions].
    #[arg(long)]
    pub threads: Option<usize>,
    /// ONNX Runtime's CPU memory arena. It keeps the memory of the largest encoder run; runs
    /// are bounded by `EmbedderOptions::batch_tokens`, so that is about +85 MB after a large
    /// embed, less than glibc keeps without the arena (+130 MB). [default: true]
    #[arg(long, value_name = "BOOL")]
    pub onnx_arena: Option<bool>,
}

impl ModelArgs {
    /// Finds the model (fetching it when `--fetch-model` allows; progress goes to `say`) and
    /// loads the encoder; `arena` is the ONNX Runtime arena setting unless `--onnx-arena` says
    /// otherwise (one-shot bulk commands want it, long-running servers do not).
    pub fn load(&self, say: &mut dyn FnMut(&str)) -> Result<Embedder, LoadError> {
        let dir = self.model_dir.clone().unwrap_or_else(model::default_dir);
        let found = if self.fetch_model { model::locate_or_fetch(&dir, say) } else { model::locate(&dir) };
        let files = found?;
        let started = Instant::now();
        let embedder = Embedder::load(
            &files,
            EmbedderOptions {
                max_length: self.max_length,
                sessions: self.encoder_sessions,
                threads: self.threads,
                arena: self.onnx_arena.unwrap_or(EmbedderOptions::default().arena),
                ..EmbedderOptions::default()
            },
        )?;
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "model loaded");
        Ok(embedder)
    }
}

/// `fetch-model`: provisions the model into `dir` (default [`model::default_dir`]) and
/// reports what it did through `say` ([`crate::Model::fetch_reporting`]).
pub fn fetch_model(dir: Option<PathBuf>, say: &mut dyn FnMut(&str)) -> Result<(), ModelError> {
    crate::models::MINILM_L6.fetch_reporting(dir, say)
}
