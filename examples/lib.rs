//! Runnable examples of RCP engines and clients built on `rcp-server`.
//!
//! Each example is a file beside this one; run one with `cargo run --example <name>`.
//! - `tiny_engine`: an in-memory engine over a dozen documents, the smallest complete
//!   engine on the framework (retrieve with filters and pagination, index add/delete).
//! - `graph_engine`: the agentic capabilities over a fixed twelve-document graph: every `graph`
//!   op, `memory/build` and `memory/recall`, `feedback`, chunk units and `tokenBudget` (the
//!   fixture of the `rcpctl graph|feedback|memory` tests, the inspector's Graph panel and the
//!   conformance suite's graph checks).
//! - `example_federation`: one query fanned out to a BM25 and a dense engine and fused; the
//!   engines run as child processes of the example's own executable ([`engines`]).

#![forbid(unsafe_code)]

pub mod engines;

#[cfg(doctest)]
pub mod doc_blocks;
