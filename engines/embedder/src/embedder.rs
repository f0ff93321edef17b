//! The text encoder: all-MiniLM-L6-v2 (int8 ONNX) through fastembed, with ONNX Runtime loaded
//! from the provisioned shared library (§7.3).
//!
//! The model is symmetric, so `kind` (`query`/`document`) selects nothing; vectors are
//! mean-pooled and L2-normalised, which makes the dot product the cosine.

use std::sync::{Mutex, OnceLock};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

use crate::model::{DIMENSION, ModelFiles};

/// Why the encoder could not load or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A model file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// ONNX Runtime could not be loaded from the provisioned library.
    #[error("could not load ONNX Runtime from {path}: {detail}")]
    Runtime {
        /// The library.
        path: std::path::PathBuf,
        /// The loader's message.
        detail: String,
    },
    /// fastembed / ONNX Runtime failed.
    #[error("embedding failed: {0}")]
    Model(String),
}

/// Tunables of the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Longest input in tokens; longer inputs are truncated (MiniLM was trained at 256).
    pub max_length: usize,
    /// ONNX Runtime intra-op threads (`None`: every core).
    pub threads: Option<usize>,
    /// Keep ONNX Runtime's CPU memory arena. The arena grows to the largest batch ever run and
    /// never gives the memory back; without it, buffers are freed after each run, so the
    /// resident size returns close to the model's after a large `embed`.
    pub arena: bool,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        Self { max_length: 256, threads: None, arena: false }
    }
}

/// A loaded encoder. `embed` is blocking CPU work: call it off the async runtime.
pub struct Embedder {
    model: Mutex<TextEmbedding>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").finish_non_exhaustive()
    }
}

/// Points `ort` at the provisioned library, once per process (it cannot be changed later).
fn init_runtime(files: &ModelFiles) -> Result<(), EmbedError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    let path = files.onnxruntime();
    INIT.get_or_init(|| ort::init_from(&path).map(drop).map_err(|e| e.to_string()))
        .clone()
        .map_err(|detail| EmbedError::Runtime { path, detail })
}

impl Embedder {
    /// Loads the model from verified files (see [`crate::model::locate`]).
    pub fn load(files: &ModelFiles, options: EmbedderOptions) -> Result<Self, EmbedError> {
        init_runtime(files)?;
        let read = |name: &str| {
            let path = files.file(name);
            std::fs::read(&path).map_err(|source| EmbedError::Io { path, source })
        };
        let tokenizer = TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        };
        let model = UserDefinedEmbeddingModel::new(read("model.onnx")?, tokenizer).with_pooling(Pooling::Mean);
        let mut init = InitOptionsUserDefined::default().with_max_length(options.max_length);
        // Idle ONNX Runtime workers sleep instead of spinning, so the cores stay available to
        // the async runtime (pings, retrieves) between encoder batches.
        init.session_config = vec![
            ("session.intra_op.allow_spinning".to_owned(), "0".to_owned()),
            ("session.inter_op.allow_spinning".to_owned(), "0".to_owned()),
        ];
        init.execution_providers = vec![ort::ep::CPU::default().with_arena_allocator(options.arena).build()];
        if let Some(t) = options.threads {
            init = init.with_intra_threads(t.max(1));
        }
        let model =
            TextEmbedding::try_new_from_user_defined(model, init).map_err(|e| EmbedError::Model(e.to_string()))?;
        Ok(Self { model: Mutex::new(model) })
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
        let mut model = self.model.lock().map_err(|_| EmbedError::Model("encoder lock poisoned".into()))?;
        let vectors = model.embed(&sorted, Some(ENCODER_BATCH)).map_err(|e| EmbedError::Model(e.to_string()))?;
        drop(model);
        if vectors.len() != texts.len() {
            return Err(EmbedError::Model(format!("{} vectors for {} inputs", vectors.len(), texts.len())));
        }
        let mut out = vec![Vec::new(); texts.len()];
        for (mut v, i) in vectors.into_iter().zip(order) {
            if v.len() != DIMENSION {
                return Err(EmbedError::Model(format!("vector of {} components, expected {DIMENSION}", v.len())));
            }
            normalize(&mut v);
            out[i] = v;
        }
        Ok(out)
    }
}

/// Inputs per encoder run: small enough that length-sorted batches pad little.
const ENCODER_BATCH: usize = 16;

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
    fn normalize_unit_and_degenerate() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0, f32::NAN];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
