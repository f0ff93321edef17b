//! The BERT masked-language model behind SPLADE, on the CPU: the encoder (embeddings, then
//! self-attention and feed-forward blocks with post-LayerNorm) and the MLM head (dense, GELU,
//! LayerNorm, then the decoder tied to the word embeddings). Weights come from
//! `model.safetensors` (little-endian `f32`), every tensor checked against the shape
//! `config.json` implies; matrix products run on `ndarray` (`matrixmultiply`'s SGEMM).

use std::collections::HashSet;

use ndarray::{Array1, Array2, ArrayView2, Axis, Slice};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use super::SpladeError;

/// Rows of the decoder's output computed at once: the logits of a chunk are
/// `ROWS × vocabulary` floats (31 MB for BERT's 30,522 word pieces), so a 512-token text never
/// holds its whole 62 MB logit matrix. Each chunk's product packs the whole decoder matrix
/// again (4 M floats), so chunks are large: at 64 rows the packing took a quarter of the time.
const ROWS: usize = 256;

/// What the forward pass needs from `config.json`.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Config {
    pub(super) vocab_size: usize,
    pub(super) hidden_size: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) num_attention_heads: usize,
    pub(super) intermediate_size: usize,
    pub(super) max_position_embeddings: usize,
    pub(super) type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub(super) layer_norm_eps: f32,
    #[serde(default = "default_act")]
    pub(super) hidden_act: String,
}

fn default_eps() -> f32 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

/// A dense layer: `y = x · Wᵀ + b`, with `W` as stored (`[out, in]`).
#[derive(Debug)]
struct Linear {
    weight: Array2<f32>,
    bias: Array1<f32>,
}

impl Linear {
    fn forward(&self, x: &Array2<f32>) -> Array2<f32> {
        x.dot(&self.weight.t()) + &self.bias
    }
}

/// LayerNorm over the last axis.
#[derive(Debug)]
struct LayerNorm {
    gamma: Array1<f32>,
    beta: Array1<f32>,
    eps: f32,
}

impl LayerNorm {
    fn forward(&self, mut x: Array2<f32>) -> Array2<f32> {
        let n = x.ncols() as f32;
        for mut row in x.rows_mut() {
            let mean = row.sum() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
        x
    }
}

#[derive(Debug)]
struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// BERT with its MLM head, weights loaded.
#[derive(Debug)]
pub(super) struct BertMlm {
    config: Config,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Array2<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    transform: Linear,
    transform_norm: LayerNorm,
    decoder_bias: Array1<f32>,
}

/// The tensors of a safetensors file, by name, each taken once.
struct Tensors<'a> {
    file: SafeTensors<'a>,
    taken: HashSet<String>,
}

impl Tensors<'_> {
    /// The tensor `name` of exactly `shape`, as `f32`.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, SpladeError> {
        let bad = |detail: String| SpladeError::Weights(format!("{name}: {detail}"));
        let view = self.file.tensor(name).map_err(|_| bad("missing from model.safetensors".into()))?;
        if view.dtype() != Dtype::F32 {
            return Err(bad(format!("dtype {:?}, expected F32", view.dtype())));
        }
        if view.shape() != shape {
            return Err(bad(format!("shape {:?}, expected {shape:?}", view.shape())));
        }
        self.taken.insert(name.to_owned());
        Ok(view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, SpladeError> {
        let data = self.take(name, &[rows, cols])?;
        Array2::from_shape_vec((rows, cols), data).map_err(|e| SpladeError::Weights(format!("{name}: {e}")))
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Array1<f32>, SpladeError> {
        Ok(Array1::from(self.take(name, &[len])?))
    }

    fn linear(&mut self, prefix: &str, out: usize, inp: usize) -> Result<Linear, SpladeError> {
        Ok(Linear {
            weight: self.matrix(&format!("{prefix}.weight"), out, inp)?,
            bias: self.vector(&format!("{prefix}.bias"), out)?,
        })
    }

    /// A LayerNorm, under the names of either era of BERT checkpoints (`gamma`/`beta` or
    /// `weight`/`bias`).
    fn norm(&mut self, prefix: &str, len: usize, eps: f32) -> Result<LayerNorm, SpladeError> {
        let (g, b) = if self.file.tensor(&format!("{prefix}.gamma")).is_ok() {
            (format!("{prefix}.gamma"), format!("{prefix}.beta"))
        } else {
            (format!("{prefix}.weight"), format!("{prefix}.bias"))
        };
        Ok(LayerNorm { gamma: self.vector(&g, len)?, beta: self.vector(&b, len)?, eps })
    }
}

impl BertMlm {
    /// Loads every tensor of the encoder and the MLM head from `bytes` (a safetensors file)
    /// and checks that none is left over: a file with other tensors is another model.
    pub(super) fn load(config: Config, bytes: &[u8]) -> Result<Self, SpladeError> {
        if config.hidden_act != "gelu" {
            return Err(SpladeError::Weights(format!("hidden_act '{}' is not supported (gelu)", config.hidden_act)));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err(SpladeError::Weights(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            )));
        }
        let file = SafeTensors::deserialize(bytes).map_err(|e| SpladeError::Weights(e.to_string()))?;
        let mut t = Tensors { file, taken: HashSet::new() };
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let word = t.matrix("bert.embeddings.word_embeddings.weight", config.vocab_size, h)?;
        let position = t.matrix("bert.embeddings.position_embeddings.weight", config.max_position_embeddings, h)?;
        let token_type = t.matrix("bert.embeddings.token_type_embeddings.weight", config.type_vocab_size, h)?;
        let embeddings_norm = t.norm("bert.embeddings.LayerNorm", h, eps)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("bert.encoder.layer.{l}");
            layers.push(Layer {
                query: t.linear(&format!("{p}.attention.self.query"), h, h)?,
                key: t.linear(&format!("{p}.attention.self.key"), h, h)?,
                value: t.linear(&format!("{p}.attention.self.value"), h, h)?,
                attention_out: t.linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: t.norm(&format!("{p}.attention.output.LayerNorm"), h, eps)?,
                intermediate: t.linear(&format!("{p}.intermediate.dense"), config.intermediate_size, h)?,
                output: t.linear(&format!("{p}.output.dense"), h, config.intermediate_size)?,
                output_norm: t.norm(&format!("{p}.output.LayerNorm"), h, eps)?,
            });
        }
        let transform = t.linear("cls.predictions.transform.dense", h, h)?;
        let transform_norm = t.norm("cls.predictions.transform.LayerNorm", h, eps)?;
        let decoder_bias = t.vector("cls.predictions.bias", config.vocab_size)?;
        // The decoder is tied to the word embeddings (`tie_word_embeddings`): the file has no
        // matrix of its own for it, and any tensor not taken above means another layout.
        let extra: Vec<String> =
            t.file.names().into_iter().filter(|n| !t.taken.contains(*n)).map(str::to_owned).collect();
        if !extra.is_empty() {
            return Err(SpladeError::Weights(format!(
                "unexpected tensors {extra:?}: not a BERT masked-language model"
            )));
        }
        Ok(Self {
            config,
            word,
            position,
            token_type,
            embeddings_norm,
            layers,
            transform,
            transform_norm,
            decoder_bias,
        })
    }

    /// The vocabulary size.
    pub(super) fn vocabulary(&self) -> usize {
        self.config.vocab_size
    }

    /// The most tokens a text may have (the position embeddings).
    pub(super) fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// The encoder's last hidden states of one unpadded sequence (`[tokens, hidden]`).
    fn encode(&self, ids: &[u32]) -> Array2<f32> {
        let (n, h) = (ids.len(), self.config.hidden_size);
        let mut x = Array2::<f32>::zeros((n, h));
        for (i, &id) in ids.iter().enumerate() {
            let mut row = x.row_mut(i);
            row += &self.word.row(id as usize);
            row += &self.position.row(i);
            row += &self.token_type.row(0);
        }
        let mut x = self.embeddings_norm.forward(x);
        let heads = self.config.num_attention_heads;
        let dh = h / heads;
        let scale = 1.0 / (dh as f32).sqrt();
        for layer in &self.layers {
            let (q, k, v) = (layer.query.forward(&x), layer.key.forward(&x), layer.value.forward(&x));
            let mut context = Array2::<f32>::zeros((n, h));
            for head in 0..heads {
                let cols = || Slice::from(head * dh..(head + 1) * dh);
                let part = |m: &Array2<f32>| m.slice_axis(Axis(1), cols()).to_owned();
                let mut scores = part(&q).dot(&part(&k).t()) * scale;
                softmax_rows(&mut scores);
                context.slice_axis_mut(Axis(1), cols()).assign(&scores.dot(&part(&v)));
            }
            x = layer.attention_norm.forward(layer.attention_out.forward(&context) + &x);
            let mut inner = layer.intermediate.forward(&x);
            inner.mapv_inplace(gelu);
            x = layer.output_norm.forward(layer.output.forward(&inner) + &x);
        }
        x
    }

    /// The SPLADE weights of one sequence: for every vocabulary entry `v`,
    /// `max over tokens of log(1 + relu(logit[token, v]))`. `ids` must be in the vocabulary
    /// and at most [`BertMlm::max_positions`] long (the caller's tokenizer guarantees both).
    pub(super) fn splade(&self, ids: &[u32]) -> Vec<f32> {
        let vocab = self.config.vocab_size;
        if ids.is_empty() {
            return vec![0.0; vocab];
        }
        let hidden = self.encode(ids);
        let mut t = self.transform.forward(&hidden);
        t.mapv_inplace(gelu);
        let t = self.transform_norm.forward(t);
        // log1p(relu(·)) is monotonic: take the max logit per entry, transform once.
        let mut best = vec![f32::NEG_INFINITY; vocab];
        let decoder: ArrayView2<'_, f32> = self.word.t();
        for chunk in t.axis_chunks_iter(Axis(0), ROWS) {
            let logits = chunk.dot(&decoder);
            for row in logits.rows() {
                match row.as_slice() {
                    Some(row) => max_into(&mut best, row.iter().copied()),
                    None => max_into(&mut best, row.iter().copied()),
                }
            }
        }
        best.iter().zip(&self.decoder_bias).map(|(l, bias)| (l + bias).max(0.0).ln_1p()).collect()
    }
}

/// `best[v] = max(best[v], row[v])`, written as a plain comparison (no NaN rule, unlike
/// `f32::max`) so that a contiguous row compiles to vector maxima.
#[inline]
fn max_into(best: &mut [f32], row: impl Iterator<Item = f32>) {
    for (b, l) in best.iter_mut().zip(row) {
        *b = if l > *b { l } else { *b };
    }
}

fn softmax_rows(x: &mut Array2<f32>) {
    for mut row in x.rows_mut() {
        let max = row.fold(f32::NEG_INFINITY, |m, v| m.max(*v));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row /= sum;
    }
}

/// GELU as BERT defines it: `x · Φ(x)`, the Gaussian CDF through `erf`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7), computed in
/// `f64`.
fn erf(x: f32) -> f32 {
    let x = f64::from(x);
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-x * x).exp();
    (if x < 0.0 { -y } else { y }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_match_known_values() {
        for (x, want) in [(0.0f32, 0.0f64), (0.5, 0.520_499_877_8), (1.0, 0.842_700_792_9), (-2.0, -0.995_322_265)] {
            assert!((f64::from(erf(x)) - want).abs() < 2e-7, "erf({x})");
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert_eq!(gelu(0.0), 0.0);
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let mut x = Array2::from_shape_vec((2, 3), vec![1.0f32, 2.0, 3.0, 1000.0, 1000.0, 0.0]).expect("shape");
        softmax_rows(&mut x);
        for row in x.rows() {
            assert!((row.sum() - 1.0).abs() < 1e-6, "{row}");
        }
        assert!((x[[1, 0]] - 0.5).abs() < 1e-6, "large logits do not overflow");
    }
}
