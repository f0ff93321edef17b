//! The text encoder: all-MiniLM-L6-v2 (int8 ONNX) through fastembed, with ONNX Runtime loaded
//! from the provisioned shared library (§7.3).
//!
//! The model is symmetric, so `kind` (`query`/`document`) selects nothing; vectors are
//! mean-pooled and L2-normalised, which makes the dot product the cosine.

use std::sync::{Arc, Mutex};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

use crate::model::{DIMENSION, ModelFiles};

/// Why the encoder could not load or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A model file could not be read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error, printed in this message (so not also its `source`: a cause chain
        /// would print it twice).
        cause: std::io::Error,
    },
    /// ONNX Runtime could not be loaded from the provisioned library.
    #[error("could not load ONNX Runtime from {}: {cause}", path.display())]
    Runtime {
        /// The library.
        path: std::path::PathBuf,
        /// The loader's error (shared: the library is loaded once per process), printed in
        /// this error's message, so not also its `source`.
        cause: Arc<ort::LoadDynamicError>,
    },
    /// fastembed / ONNX Runtime failed.
    #[error("embedding failed: {0}")]
    Model(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Tunables of the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Longest input in tokens; longer inputs are truncated (MiniLM was trained at 256).
    pub max_length: usize,
    /// Encoder sessions run side by side (`None`: one per core). Each holds its own copy of
    /// the optimised model (ONNX Runtime folds the int8 weights into ~100 MB of `f32`) and
    /// encodes its own batches, so inputs too short to keep several threads busy inside one
    /// run still use every core. One session saves that memory at about 0.75x the throughput.
    pub sessions: Option<usize>,
    /// ONNX Runtime intra-op threads per session (`None`: the cores divided among the
    /// sessions, at least one).
    pub threads: Option<usize>,
    /// Keep ONNX Runtime's CPU memory arena. The arena grows to the largest run and keeps it,
    /// so it is bounded by `batch_tokens`; without it every run allocates and frees its
    /// tensors (slower, and glibc keeps more of the freed memory than the arena holds).
    pub arena: bool,
    /// Padded tokens per encoder run: length-sorted inputs are batched until the batch's
    /// longest input times its size reaches this (at most 64 inputs a run). Short queries so go
    /// many to a run and long abstracts one at a time (no padding; the attention tensors stay
    /// in cache), which also bounds the largest tensors, and so the arena, whatever the input.
    pub batch_tokens: usize,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        Self { max_length: 256, sessions: None, threads: None, arena: true, batch_tokens: 256 }
    }
}

/// A loaded encoder. `embed` is blocking CPU work: call it off the async runtime.
pub struct Embedder {
    sessions: Vec<Mutex<TextEmbedding>>,
    max_length: usize,
    batch_tokens: usize,
    /// The model's own WordPiece tokenizer (`tokenizer.json`), untruncated: what
    /// [`Embedder::count_tokens`] counts with.
    tokenizer: tokenizers::Tokenizer,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").finish_non_exhaustive()
    }
}

/// Points `ort` at the provisioned library, once per process (it cannot be changed later).
fn init_runtime(files: &ModelFiles) -> Result<(), EmbedError> {
    let path = files.onnxruntime();
    crate::runtime::load_library(&path).clone().map_err(|cause| EmbedError::Runtime { path, cause })
}

impl Embedder {
    /// Loads the model from verified files (see [`crate::model::locate`]).
    pub fn load(files: &ModelFiles, options: EmbedderOptions) -> Result<Self, EmbedError> {
        init_runtime(files)?;
        // The process's one ONNX Runtime environment, shared with every other model's sessions
        // (a reranker in the same process): fastembed would otherwise create its own, and
        // ONNX Runtime allows one per process.
        let environment = crate::runtime::environment(files).map_err(|e| EmbedError::Model(Box::new(e)))?;
        let read = |name: &str| {
            let path = files.file(name);
            std::fs::read(&path).map_err(|cause| EmbedError::Io { path, cause })
        };
        let tokenizer = TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        };
        let mut counter = tokenizers::Tokenizer::from_bytes(&tokenizer.tokenizer_file).map_err(EmbedError::Model)?;
        counter.with_truncation(None).map_err(EmbedError::Model)?;
        counter.with_padding(None);
        let onnx = read("model.onnx")?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sessions = options.sessions.unwrap_or(cores).clamp(1, 64);
        let threads = options.threads.unwrap_or(cores / sessions).max(1);
        let sessions = (0..sessions)
            .map(|_| {
                let model = UserDefinedEmbeddingModel::new(onnx.clone(), tokenizer.clone()).with_pooling(Pooling::Mean);
                let mut init = InitOptionsUserDefined::default()
                    .with_max_length(options.max_length)
                    .with_intra_threads(threads)
                    .with_environment(environment.clone());
                // Idle ONNX Runtime workers sleep instead of spinning, so the cores stay
                // available to the async runtime (pings, retrieves) between encoder batches.
                init.session_config = vec![
                    ("session.intra_op.allow_spinning".to_owned(), "0".to_owned()),
                    ("session.inter_op.allow_spinning".to_owned(), "0".to_owned()),
                ];
                init.execution_providers = vec![ort::ep::CPU::default().with_arena_allocator(options.arena).build()];
                TextEmbedding::try_new_from_user_defined(model, init)
                    .map(Mutex::new)
                    .map_err(|e| EmbedError::Model(e.into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            sessions,
            max_length: options.max_length,
            batch_tokens: options.batch_tokens.max(1),
            tokenizer: counter,
        })
    }

    /// The vector dimension.
    pub fn dimension(&self) -> usize {
        DIMENSION
    }

    /// Embeds `texts` in order; every vector is finite and unit-norm (an input whose pooled
    /// vector is degenerate gets a zero vector rather than NaNs).
    ///
    /// Inputs are encoded in batches of similar length (the encoder pads a batch to its
    /// longest input), then returned in the caller's order.
    pub fn embed<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].as_ref().len());
        let sorted: Vec<&str> = order.iter().map(|&i| texts[i].as_ref()).collect();
        let batches = length_batches(&sorted, self.max_length, self.batch_tokens);
        let vectors = self.encode(&batches)?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Model(format!("{} vectors for {} inputs", vectors.len(), texts.len()).into()));
        }
        let mut out = vec![Vec::new(); texts.len()];
        for (mut v, i) in vectors.into_iter().zip(order) {
            if v.len() != DIMENSION {
                return Err(EmbedError::Model(
                    format!("vector of {} components, expected {DIMENSION}", v.len()).into(),
                ));
            }
            normalize(&mut v);
            out[i] = v;
        }
        Ok(out)
    }
}

impl Embedder {
    /// Encodes length-sorted batches on as many sessions as there are batches (at most all of
    /// them); each worker takes the next batch when it is free. The caller's thread is one of
    /// the workers, so a single batch (a query) spawns nothing.
    fn encode(&self, batches: &[&[&str]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoded = crate::sessions::run_jobs(&self.sessions, batches.len(), |session, i| {
            let batch = batches[i];
            session.embed(batch, Some(batch.len())).map_err(|e| EmbedError::Model(e.into()))
        })?;
        Ok(encoded.into_iter().flatten().collect())
    }

    /// Encoder sessions.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Word pieces of `text` under the model's own tokenizer (`tokenizer.json`), without
    /// `[CLS]`/`[SEP]` and without truncation: the count `tokenBudget` packs by (§7.7.2). A
    /// text the tokenizer cannot encode counts its bytes, never fewer than its word pieces.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer.encode_fast(text, false).map_or(text.len(), |e| e.len())
    }

    /// What [`Embedder::count_tokens`] counts with, for `usage.notes`.
    pub fn tokenizer_name(&self) -> &'static str {
        "the all-MiniLM-L6-v2 WordPiece tokenizer (tokenizer.json, no special tokens)"
    }
}

/// Most inputs in one encoder run.
const MAX_BATCH: usize = 64;

/// Tokens a text is expected to take: about four bytes a word piece for English prose, plus
/// `[CLS]` and `[SEP]`, at most `max_length`. Only used to size batches.
fn estimated_tokens(text: &str, max_length: usize) -> usize {
    (text.len() / 4 + 2).min(max_length).max(1)
}

/// Splits length-sorted texts into runs of at most `budget` padded tokens (the longest input
/// of a run times its size) and [`MAX_BATCH`] inputs; every run holds at least one input.
fn length_batches<'a>(sorted: &'a [&'a str], max_length: usize, budget: usize) -> Vec<&'a [&'a str]> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < sorted.len() {
        let mut end = start + 1;
        while end < sorted.len()
            && end - start < MAX_BATCH
            && (end + 1 - start) * estimated_tokens(sorted[end], max_length) <= budget
        {
            end += 1;
        }
        batches.push(&sorted[start..end]);
        start = end;
    }
    batches
}

/// Scales `v` to unit L2 norm in place; a zero or non-finite vector becomes all zeros.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm.is_finite() && norm > 0.0 {
        let inv = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= inv);
    } else {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_a_token_budget_and_every_input_once() {
        let long = "x".repeat(2000); // past max_length: 256 tokens
        let mid = "y".repeat(200); // 52 tokens
        let short = "z".repeat(40); // 12 tokens
        let mut texts: Vec<&str> = [vec![short.as_str(); 100], vec![mid.as_str(); 9], vec![long.as_str(); 3]].concat();
        texts.sort_by_key(|t| t.len());
        let batches = length_batches(&texts, 256, 256);
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), texts.len());
        for b in &batches {
            let longest = b.iter().map(|t| estimated_tokens(t, 256)).max().unwrap_or(0);
            assert!(b.len() == 1 || b.len() * longest <= 256, "{} x {longest}", b.len());
            assert!(b.len() <= MAX_BATCH);
        }
        // Short inputs share runs (21 of 12 tokens fit 256), long ones run alone.
        assert_eq!(batches[0].len(), 21);
        assert!(batches.iter().rev().take(3).all(|b| b.len() == 1));
        assert_eq!(length_batches(&texts[..1], 256, 1).len(), 1, "an input over the budget still runs");
        assert!(length_batches(&[], 256, 256).is_empty());
    }

    #[test]
    fn normalize_unit_and_degenerate() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0, f32::NAN];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
