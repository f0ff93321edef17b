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

use std::sync::Mutex;

use ort::session::Session;
use rcp_embedder::ModelFiles;
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::onnx::{self, EncoderError, EncoderOptions};

/// The longest pair the model was trained on, in tokens.
pub const MAX_LENGTH: usize = 512;

/// The shortest window [`CrossEncoder::load_window`] accepts, in tokens: room for a query and
/// the start of a passage.
pub const MIN_WINDOW: usize = 64;

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

fn tokenizer_with(base: &Tokenizer, strategy: TruncationStrategy, window: usize) -> Result<Tokenizer, EncoderError> {
    let mut t = base.clone();
    t.with_padding(None)
        .with_truncation(Some(TruncationParams {
            max_length: window,
            strategy,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| EncoderError::Tokenizer(e.to_string()))?;
    Ok(t)
}

impl CrossEncoder {
    /// Its `rerank` method name (§7.6).
    pub const METHOD: &str = "cross-encoder";

    /// Loads the model from verified files (see [`rcp_embedder::Model::locate`]), each pair
    /// cut to the model's whole window, [`MAX_LENGTH`] tokens.
    pub fn load(files: &ModelFiles, options: EncoderOptions) -> Result<Self, EncoderError> {
        Self::load_window(files, options, MAX_LENGTH)
    }

    /// [`CrossEncoder::load`] with each pair cut to `window` tokens (clamped to
    /// [`MIN_WINDOW`]..=[`MAX_LENGTH`]): a shorter window costs less per long passage and
    /// scores only its beginning.
    pub fn load_window(files: &ModelFiles, options: EncoderOptions, window: usize) -> Result<Self, EncoderError> {
        let window = window.clamp(MIN_WINDOW, MAX_LENGTH);
        let base = onnx::tokenizer(files)?;
        let tokenizer = tokenizer_with(&base, TruncationStrategy::OnlySecond, window)?;
        let fallback = tokenizer_with(&base, TruncationStrategy::LongestFirst, window)?;
        Ok(Self { sessions: onnx::sessions(files, options)?, tokenizer, fallback })
    }

    /// Sessions that score side by side.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The tokens of the pair (query, passage) as the model sees them, truncated to the
    /// window (by default [`MAX_LENGTH`]).
    pub fn encode(&self, query: &str, passage: &str) -> Result<Encoding, EncoderError> {
        match self.tokenizer.encode((query, passage), true) {
            Ok(e) => Ok(e),
            // OnlySecond refuses a query that leaves the passage no room.
            Err(_) => self.fallback.encode((query, passage), true).map_err(|e| EncoderError::Tokenizer(e.to_string())),
        }
    }

    /// One logit per passage, in passage order; higher is more relevant. Empty texts are
    /// scored like any other. `cancelled` is polled between pairs.
    pub fn score<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        passages: &[S],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<f32>, EncoderError> {
        onnx::each(&self.sessions, passages.len(), cancelled, |session, i| {
            let encoding = self.encode(query, passages[i].as_ref())?;
            run(session, &encoding)
        })
    }
}

/// Runs one pair, unpadded; returns its logit.
fn run(session: &mut Session, encoding: &Encoding) -> Result<f32, EncoderError> {
    let column = |values: &[u32]| onnx::row(values.iter().map(|&v| i64::from(v)));
    let inputs = ort::inputs![
        "input_ids" => column(encoding.get_ids())?,
        "attention_mask" => column(encoding.get_attention_mask())?,
        "token_type_ids" => column(encoding.get_type_ids())?,
    ];
    let outputs = session.run(inputs).map_err(EncoderError::Session)?;
    let output = outputs.get("logits").ok_or(EncoderError::MissingOutput("logits"))?;
    let (_, logits) = output.try_extract_tensor::<f32>().map_err(EncoderError::Session)?;
    match logits {
        [logit] => Ok(*logit),
        other => Err(EncoderError::Output { expected: 1, got: other.len() }),
    }
}
