//! The cross-encoder: cross-encoder/ms-marco-MiniLM-L-12-v2 (int8 ONNX) scoring (query,
//! passage) pairs on ONNX Runtime sessions (§7.6: `method: "cross-encoder"`).
//!
//! A pair is tokenised as BERT was trained on it, `[CLS] query [SEP] passage [SEP]` with
//! `token_type_ids` 0 for the query part and 1 for the passage part, at most 512 tokens; a
//! longer pair loses the end of its passage only (the query is kept whole, unless the query
//! alone leaves no room, when both sides are cut, the longer first). The score is the model's
//! one logit.
//!
//! Each pair runs alone, unpadded. The int8 graph quantizes its activations with one scale
//! per tensor, computed over the whole batch, padding included: a pair batched with others
//! scores up to ±0.4 differently than alone (measured against Python onnxruntime), so a
//! passage's score would depend on its neighbours in the request. One pair per run keeps the
//! score a function of (query, passage); throughput comes from one session per core instead.

use std::path::PathBuf;
use std::sync::Mutex;

use ort::session::Session;
use ort::value::Tensor;
use rcp_embedder::ModelFiles;
use rcp_embedder::runtime::{self, RuntimeError};
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The longest pair the model was trained on, in tokens.
pub const MAX_LENGTH: usize = 512;

/// Why the cross-encoder could not load or score.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CrossEncoderError {
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
    /// `tokenizer.json` could not be loaded, or a pair could not be tokenised.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// ONNX Runtime failed to build a session or to run the graph.
    #[error("cross-encoder session failed")]
    Session(#[source] ort::Error),
    /// The graph answered something other than one logit per pair.
    #[error("the model returned {0} values for one pair, expected 1")]
    Output(usize),
    /// The graph has no `logits` output.
    #[error("the model has no `logits` output")]
    MissingLogits,
    /// The caller stopped the run between pairs.
    #[error("cancelled between pairs")]
    Cancelled,
}

/// Tunables of the cross-encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossEncoderOptions {
    /// Sessions run side by side, each scoring its own pairs (`None`: one per core). Each holds
    /// its own copy of the optimised graph.
    pub sessions: Option<usize>,
    /// ONNX Runtime intra-op threads per session (`None`: the cores divided among the sessions).
    pub threads: Option<usize>,
    /// Keep ONNX Runtime's CPU memory arena (bounded by one 512-token pair per session).
    pub arena: bool,
}

impl Default for CrossEncoderOptions {
    fn default() -> Self {
        Self { sessions: None, threads: None, arena: true }
    }
}

/// A loaded cross-encoder. `score` is blocking CPU work: call it off the async runtime.
pub struct CrossEncoder {
    sessions: Vec<Mutex<Session>>,
    /// Truncates the passage only.
    tokenizer: Tokenizer,
    /// Truncates the longer side first, for a query that alone exceeds [`MAX_LENGTH`].
    fallback: Tokenizer,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder").field("sessions", &self.sessions.len()).finish_non_exhaustive()
    }
}

fn tokenizer_with(base: &Tokenizer, strategy: TruncationStrategy) -> Result<Tokenizer, CrossEncoderError> {
    let mut t = base.clone();
    t.with_padding(None)
        .with_truncation(Some(TruncationParams {
            max_length: MAX_LENGTH,
            strategy,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| CrossEncoderError::Tokenizer(e.to_string()))?;
    Ok(t)
}

impl CrossEncoder {
    /// Loads the model from verified files (see [`rcp_embedder::Model::locate`]).
    pub fn load(files: &ModelFiles, options: CrossEncoderOptions) -> Result<Self, CrossEncoderError> {
        let env = runtime::environment(files)?;
        let read = |name: &str| {
            let path = files.file(name);
            std::fs::read(&path).map_err(|cause| CrossEncoderError::Io { path, cause })
        };
        let base = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| CrossEncoderError::Tokenizer(format!("tokenizer.json: {e}")))?;
        let tokenizer = tokenizer_with(&base, TruncationStrategy::OnlySecond)?;
        let fallback = tokenizer_with(&base, TruncationStrategy::LongestFirst)?;
        let onnx = read("model.onnx")?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sessions = options.sessions.unwrap_or(cores).clamp(1, 64);
        let threads = options.threads.unwrap_or(cores / sessions).max(1);
        let sessions = (0..sessions)
            .map(|_| {
                let builder = Session::builder(&env)
                    .and_then(|b| {
                        b.with_execution_providers([ort::ep::CPU::default()
                            .with_arena_allocator(options.arena)
                            .build()])
                            .map_err(Into::into)
                    })
                    .and_then(|b| b.with_intra_threads(threads).map_err(Into::into))
                    // Idle workers sleep instead of spinning, so the cores stay available to
                    // the async runtime between runs (as the embedder's sessions do).
                    .and_then(|b| b.with_config_entry("session.intra_op.allow_spinning", "0").map_err(Into::into))
                    .and_then(|b| b.with_config_entry("session.inter_op.allow_spinning", "0").map_err(Into::into));
                builder
                    .and_then(|mut b| b.commit_from_memory(&onnx))
                    .map(Mutex::new)
                    .map_err(CrossEncoderError::Session)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { sessions, tokenizer, fallback })
    }

    /// Sessions that score side by side.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The tokens of the pair (query, passage) as the model sees them, truncated to
    /// [`MAX_LENGTH`].
    pub fn encode(&self, query: &str, passage: &str) -> Result<Encoding, CrossEncoderError> {
        match self.tokenizer.encode((query, passage), true) {
            Ok(e) => Ok(e),
            // OnlySecond refuses a query that leaves the passage no room.
            Err(_) => {
                self.fallback.encode((query, passage), true).map_err(|e| CrossEncoderError::Tokenizer(e.to_string()))
            }
        }
    }

    /// One logit per passage, in passage order; higher is more relevant. Empty texts are
    /// scored like any other. `cancelled` is polled between pairs.
    pub fn score<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        passages: &[S],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<f32>, CrossEncoderError> {
        rcp_embedder::sessions::run_jobs(&self.sessions, passages.len(), |session, i| {
            if cancelled() {
                return Err(CrossEncoderError::Cancelled);
            }
            let encoding = self.encode(query, passages[i].as_ref())?;
            run(session, &encoding)
        })
    }
}

/// Runs one pair, unpadded; returns its logit.
fn run(session: &mut Session, encoding: &Encoding) -> Result<f32, CrossEncoderError> {
    let column = |values: &[u32]| -> Result<Tensor<i64>, CrossEncoderError> {
        let data: Vec<i64> = values.iter().map(|&v| i64::from(v)).collect();
        Tensor::from_array(([1usize, data.len()], data)).map_err(CrossEncoderError::Session)
    };
    let inputs = ort::inputs![
        "input_ids" => column(encoding.get_ids())?,
        "attention_mask" => column(encoding.get_attention_mask())?,
        "token_type_ids" => column(encoding.get_type_ids())?,
    ];
    let outputs = session.run(inputs).map_err(CrossEncoderError::Session)?;
    let output = outputs.get("logits").ok_or(CrossEncoderError::MissingLogits)?;
    let (_, logits) = output.try_extract_tensor::<f32>().map_err(CrossEncoderError::Session)?;
    match logits {
        [logit] => Ok(*logit),
        other => Err(CrossEncoderError::Output(other.len())),
    }
}
