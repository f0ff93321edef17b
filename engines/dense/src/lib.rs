//! `rcp-dense`: an RCP engine for dense retrieval (§7.3, §7.7, §7.10, §7.11).
//!
//! all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, unit vectors) runs through fastembed on an
//! ONNX Runtime library provisioned offline from pinned wheels ([`model`], from the shared
//! `rcp-embedder` crate); documents and
//! vectors live in a durable [`store`] (snapshot + write-ahead log) searched through an HNSW
//! graph ([`ann`]); [`engine`] serves `embed`, `retrieve` (`mode:"dense"`) and `index/*`;
//! [`cli`] is the `rcp-dense` command line.
//!
//! ```sh
//! rcp-dense fetch-model                                   # once: verify or fetch the model
//! rcp-dense index --data-dir idx corpus.jsonl             # embed a JSONL corpus
//! rcp-dense serve --data-dir idx                          # serve it over stdio
//! rcp-dense serve                                         # serve the built-in demo corpus
//! ```
//!
//! # Cargo features
//!
//! - `jemalloc` (default): the `rcp-dense` binary allocates with jemalloc, which under load is
//!   faster here than glibc's malloc and returns freed memory to the OS sooner; without it the
//!   system allocator is used. The library never sets an allocator.
//! - `usearch` (default): the `usearch` ANN backend (`--ann usearch`), a C++ library kept for
//!   comparison with the default rcp-hnsw graph; without it the crate compiles no C or C++ code
//!   of its own and `--ann usearch` is refused.
//! - `rerank` (default): `--rerank cross-encoder|colbert` on `serve`: reranking inside
//!   `retrieve` (`retrieve.rerankBuiltin`) with rcp-rerank's models on ONNX Runtime, loaded at
//!   run time and provisioned from pinned wheels. Without it `serve` has no `--rerank` flag.

#![forbid(unsafe_code)]

pub mod ann;
pub mod cli;
#[cfg(feature = "rerank")]
mod colbert;
pub mod cursor;
pub mod engine;
pub mod graph;
pub mod memory;
pub mod store;
pub mod wal;

pub use engine::{DenseEngine, EngineOptions};
/// The encoder and its provisioning, from the shared `rcp-embedder` crate.
pub use rcp_embedder::{embedder, model};

pub use rcp_corpus::fields::{infer_fields, parse_field, passage};

#[cfg(test)]
pub(crate) mod testutil {
    /// Deterministic pseudo-random unit vectors (xorshift), for tests without the model.
    pub(crate) fn random_unit(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let mut row: Vec<f32> = (0..dim)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    (s >> 11) as f32 / (1u64 << 53) as f32 - 0.5
                })
                .collect();
            crate::embedder::normalize(&mut row);
            out.extend(row);
        }
        out
    }
}
