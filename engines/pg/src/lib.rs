//! `rcp-pg`: an RCP engine whose index lives in PostgreSQL + pgvector (§7.3, §7.7, §7.10,
//! §7.11), so any number of stateless engine processes serve one consistent index.
//!
//! - [`db`]: the connection pool (TLS-capable URLs, credentials only from the URL) and the
//!   mapping of outages to `-32010` with `retryAfterMs`;
//! - [`migrate`]: versioned schema migrations compiled in from `migrations/`;
//! - [`store`]: BM25 in SQL over a GIN-indexed `tsvector`, cosine over pgvector's HNSW, both
//!   lists in one round trip, and writes as one transaction each, a chunked document's chunks
//!   (§7.10 `chunk: true`, [`rcp_corpus::chunking`]) with it;
//! - [`query`]: a search, its statement and its rows, over whole documents and chunks in the
//!   requested unit (§7.7.2: one hit per chunk, or per document scored by its best chunk);
//! - [`filter`]: §8 filters compiled to parameterised SQL over the JSONB metadata;
//! - [`input`]: client input PostgreSQL would refuse (U+0000, more than 65,535 bind
//!   parameters), refused first as `-32602` naming the field;
//! - [`cursor`]: stable-or-refused pagination (§10);
//! - [`feedback`]: `feedback` (§7.16) and its quarantine, stored in PostgreSQL;
//! - [`service`]: `retrieve` in `sparse`, `dense` and `hybrid` modes (fusion §16.3), `embed`,
//!   `index/*`;
//! - [`local`]: `rcp-pg postgres start|stop|status`, a local PostgreSQL + pgvector from the
//!   pinned `pgserver` wheel (the mechanism is the `rcp-pg-local` crate);
//! - [`cli`]: the `rcp-pg` command line (`migrate`, `index`, `serve`, `fetch-model`, `postgres`).
//!
//! ```sh
//! export DATABASE_URL=postgres://rcp:secret@db.internal:5432/rcp
//! rcp-pg migrate                           # create or upgrade the schema
//! rcp-pg index corpus.jsonl                # embed and upsert a JSONL corpus
//! rcp-pg serve --http 0.0.0.0:8080         # serve it; start as many as you like
//! ```
//!
//! # Cargo features
//!
//! - `jemalloc` (default): the `rcp-pg` binary allocates with jemalloc, which under load is
//!   faster here than glibc's malloc and returns freed memory to the OS sooner; without it the
//!   system allocator is used. The library never sets an allocator.
//! - `rerank` (default): `--rerank cross-encoder|colbert` on `serve`: reranking inside
//!   `retrieve` (`retrieve.rerankBuiltin`) with rcp-rerank's models on ONNX Runtime, loaded at
//!   run time and provisioned from pinned wheels. Without it `serve` has no `--rerank` flag.

#![forbid(unsafe_code)]

pub mod cli;
pub mod cursor;
pub mod db;
pub mod feedback;
pub mod filter;
pub mod input;
pub mod local;
pub mod migrate;
pub mod query;
pub mod service;
pub mod store;

pub use db::{Database, DbError, PoolOptions};
pub use service::{PgEngine, PgOptions};
pub use store::Store;
