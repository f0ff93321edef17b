//! Runnable examples of RCP engines and clients built on `rcp-server`.
//!
//! Each example is a file beside this one; run one with `cargo run --example <name>`.
//! - `tiny_engine`: an in-memory engine over a dozen documents, the smallest complete
//!   engine on the framework (retrieve with filters and pagination, index add/delete).

#[cfg(doctest)]
pub mod doc_blocks;
