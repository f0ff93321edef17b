//! `rcp-bm25`: a BM25 retrieval engine on tantivy, served over RCP (the Retrieval Context
//! Protocol) by the `rcp-server` framework.
//!
//! - [`analyzer`]: the English analyzer (lowercase, stopwords, Snowball stemming) used for
//!   both documents and queries; queries are tokenized, never parsed as syntax (§15.4).
//! - [`schema`]: the data-directory layout, the persisted filter-field schema and the tantivy
//!   schema derived from it.
//! - chunking (§7.10 `chunk:true`) is `rcp_corpus::chunking`, shared with rcp-pg: sentence-aware
//!   windows with overlap, byte offsets into the original text.
//! - [`filter`]: §8 filter trees compiled to typed tantivy queries.
//! - [`engine`]: the index, its snapshots (§7.7.1), search with pagination cursors (§10) and
//!   the durable write paths (§7.10, §7.11).
//! - [`service`]: the `Retrieve` and `Index` handlers.
//! - [`transform`]: the `Transform` handler (RM3 `rewrite` and `multi-query`) and
//!   `retrieve.rewrite` (§7.8).
//! - [`integrity`]: verification of a data directory at open, `verify` and `repair`.
//! - [`splade`]: the learned-sparse scorer (`--scorer splade`): SPLADE expansions stored as
//!   quantized impacts, ranked by dot product.
//! - [`cli`]: the `rcp-bm25` command line (`index`, `serve`, `verify`, `repair`).
//!
//! The engine is usable in-process without the protocol:
//!
//! ```
//! use rcp_bm25::engine::{Engine, EngineOptions, SearchRequest, TrustLevel, Hooks};
//! use rcp_corpus::builtin;
//!
//! let engine = Engine::in_ram(rcp_bm25::builtin_fields(), EngineOptions::default()).unwrap();
//! let docs = builtin().into_iter().map(Ok::<_, String>);
//! engine.load(docs, TrustLevel::Trusted, "builtin", true, |_| {}).unwrap();
//! let page = engine.search(&SearchRequest::new("inverted index", 3), &Hooks::default()).unwrap();
//! assert_eq!(page.hits[0].key(), "bm25-2");
//! ```
//!
//! # Cargo features
//!
//! - `jemalloc` (default): the `rcp-bm25` binary allocates with jemalloc, which under load is
//!   faster here than glibc's malloc and returns freed memory to the OS sooner; without it the
//!   system allocator is used. The library never sets an allocator.
//! - `rerank` (default): `--rerank cross-encoder|colbert` on `serve`: reranking inside
//!   `retrieve` (`retrieve.rerankBuiltin`) with rcp-rerank's models on ONNX Runtime, loaded at
//!   run time and provisioned from pinned wheels. Without it `serve` has no `--rerank` flag.
//! - `splade`: `--scorer splade`, learned-sparse ranking with SPLADE-tiny (rcp-embedder's CPU
//!   encoder); without it [`splade::load`] returns an error saying so.

#![forbid(unsafe_code)]

pub mod analyzer;
pub mod cli;
pub mod engine;
pub mod error;
pub mod filter;
pub mod integrity;
pub mod schema;
pub mod service;
pub mod splade;
pub mod transform;

use rcp_wire::filter::FieldType;

pub use engine::{Engine, EngineOptions};
pub use error::EngineError;
pub use service::{Bm25, ServiceOptions};

/// The filter fields of the built-in demo corpus: `topic` (keyword) and `year` (int).
pub fn builtin_fields() -> Vec<schema::FieldSpec> {
    vec![
        schema::FieldSpec { name: "topic".into(), ty: FieldType::Keyword },
        schema::FieldSpec { name: "year".into(), ty: FieldType::Int },
    ]
}
