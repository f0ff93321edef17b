//! `rcp-embedder`: the text encoder the RCP engines share (§7.3).
//!
//! all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, unit vectors) runs through fastembed on an
//! ONNX Runtime library provisioned offline from pinned wheels ([`model`]). [`Embedder`] turns
//! texts into vectors; [`calibration::confidence`] maps this model's cosines to `hit.confidence`
//! (§7.7.2). `rcp-dense` serves the vectors from its own HNSW index, `rcp-pg` from pgvector;
//! both load the model through this crate, so their vectors and confidences agree.
//! With the `splade` feature, [`splade::Splade`] encodes learned-sparse term weights (§7.4).
//!
//! # Cargo features
//!
//! None is on by default; the encoder itself needs none of them.
//!
//! - `cli`: [`cli`], the model flags the engines share (`--model-dir`, `--fetch-model`,
//!   `--max-length`, `--threads`, `--onnx-arena`), on clap.
//! - `serve`: [`serve`], the `embed` capability of an RCP server (rcp-server), encoding on the
//!   server's CPU executor.
//! - `splade`: [`splade`], SPLADE-tiny learned-sparse encoding on the CPU (a BERT MLM forward on
//!   ndarray over the model's safetensors).

#![forbid(unsafe_code)]

pub mod calibration;
#[cfg(feature = "cli")]
pub mod cli;
pub mod embedder;
pub mod model;
pub mod models;
pub mod runtime;
#[cfg(feature = "serve")]
pub mod serve;
pub mod sessions;
#[cfg(feature = "splade")]
pub mod splade;

pub use embedder::{EmbedError, Embedder, EmbedderOptions, normalize};
pub use model::{DIMENSION, Model, ModelError, ModelFiles};
