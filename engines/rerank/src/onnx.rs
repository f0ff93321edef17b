//! What the engine's two models share: their ONNX Runtime sessions (one per core by default),
//! the tunables of those sessions, the errors of loading and running them, and the int64
//! input rows BERT graphs take.

use std::path::PathBuf;
use std::sync::Mutex;

use ort::session::Session;
use ort::value::Tensor;
use rcp_embedder::ModelFiles;
use rcp_embedder::runtime::{self, RuntimeError};
use tokenizers::Tokenizer;

/// Why a model could not load or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncoderError {
    /// A model file could not be read.
    #[error("could not read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        cause: std::io::Error,
    },
    /// ONNX Runtime is not available.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// `tokenizer.json` could not be loaded, lacks a token the model needs, or a text could
    /// not be tokenised.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// ONNX Runtime failed to build a session or to run the graph.
    #[error("model session failed")]
    Session(#[source] ort::Error),
    /// The graph answered a shape other than the one expected.
    #[error("the model returned {got} values, expected {expected}")]
    Output {
        /// Values expected.
        expected: usize,
        /// Values returned.
        got: usize,
    },
    /// The graph lacks the named output.
    #[error("the model has no `{0}` output")]
    MissingOutput(&'static str),
    /// The caller stopped the run between texts.
    #[error("cancelled between texts")]
    Cancelled,
    /// A ColBERT matrix could not be kept in its store.
    #[error("storing a ColBERT matrix")]
    Store(#[from] crate::matrices::MatrixStoreError),
}

/// Tunables of a model's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderOptions {
    /// Sessions run side by side, each on its own texts (`None`: one per core). Each holds its
    /// own copy of the optimised graph.
    pub sessions: Option<usize>,
    /// ONNX Runtime intra-op threads per session (`None`: the cores divided among the sessions).
    pub threads: Option<usize>,
    /// Keep ONNX Runtime's CPU memory arena (bounded by one 512-token input per session).
    pub arena: bool,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        Self { sessions: None, threads: None, arena: true }
    }
}

/// Reads the model file `name`.
pub(crate) fn read(files: &ModelFiles, name: &str) -> Result<Vec<u8>, EncoderError> {
    let path = files.file(name);
    std::fs::read(&path).map_err(|cause| EncoderError::Io { path, cause })
}

/// The model's `tokenizer.json`, as shipped (its own truncation and padding still set).
pub(crate) fn tokenizer(files: &ModelFiles) -> Result<Tokenizer, EncoderError> {
    Tokenizer::from_bytes(read(files, "tokenizer.json")?)
        .map_err(|e| EncoderError::Tokenizer(format!("tokenizer.json: {e}")))
}

/// The sessions of `model.onnx`, as `options` asks, built side by side (graph optimisation
/// takes seconds per session); the ONNX Runtime of `files` is loaded first if the process has
/// none yet.
pub(crate) fn sessions(files: &ModelFiles, options: EncoderOptions) -> Result<Vec<Mutex<Session>>, EncoderError> {
    let env = runtime::environment(files)?;
    let onnx = read(files, "model.onnx")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sessions = options.sessions.unwrap_or(cores).clamp(1, 64);
    let threads = options.threads.unwrap_or(cores / sessions).max(1);
    let build = || {
        Session::builder(&env)
            .and_then(|b| {
                b.with_execution_providers([ort::ep::CPU::default().with_arena_allocator(options.arena).build()])
                    .map_err(Into::into)
            })
            .and_then(|b| b.with_intra_threads(threads).map_err(Into::into))
            // Idle workers sleep instead of spinning, so the cores stay available to the async
            // runtime between runs (as the embedder's sessions do).
            .and_then(|b| b.with_config_entry("session.intra_op.allow_spinning", "0").map_err(Into::into))
            .and_then(|b| b.with_config_entry("session.inter_op.allow_spinning", "0").map_err(Into::into))
            .and_then(|mut b| b.commit_from_memory(&onnx))
            .map(Mutex::new)
            .map_err(EncoderError::Session)
    };
    std::thread::scope(|s| {
        let built: Vec<_> = (0..sessions).map(|_| s.spawn(build)).collect();
        built.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

/// Runs `job` for each of `jobs` inputs across `sessions` (see
/// [`rcp_embedder::sessions::run_jobs`]), checking `cancelled` before each: the first input
/// that finds it set ends the run with [`EncoderError::Cancelled`].
pub(crate) fn each<T: Send>(
    sessions: &[Mutex<Session>],
    jobs: usize,
    cancelled: &(dyn Fn() -> bool + Sync),
    job: impl Fn(&mut Session, usize) -> Result<T, EncoderError> + Sync,
) -> Result<Vec<T>, EncoderError> {
    rcp_embedder::sessions::run_jobs(sessions, jobs, |session, i| {
        if cancelled() {
            return Err(EncoderError::Cancelled);
        }
        job(session, i)
    })
}

/// One input row of a batch of one, `[1, len]` int64.
pub(crate) fn row(values: impl IntoIterator<Item = i64>) -> Result<Tensor<i64>, EncoderError> {
    let data: Vec<i64> = values.into_iter().collect();
    Tensor::from_array(([1usize, data.len()], data)).map_err(EncoderError::Session)
}
