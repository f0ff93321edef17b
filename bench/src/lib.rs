//! Benchmarks and the retrieval-quality harness (binaries in `src/bin`).
//!
//! The library part is what several binaries share: loading a BEIR-layout test collection
//! (Cranfield in `../shared/data/cranfield`), the metrics reported everywhere (nDCG@k with gain
//! `2^g - 1` and a log2 discount, Recall@k, MRR@k), latency percentiles, and a minimal blocking
//! stdio client for measuring through the full RCP path, and how a binary reports a failure
//! ([`exit`]). It is binary support, not a library for other crates: its helpers return `anyhow`
//! errors as the binaries do.

#![forbid(unsafe_code)]

pub mod chart;
pub mod embedded;
pub mod encoder_speed;
pub mod exit;
pub mod proc;
pub mod quality;
pub mod scratch;
pub mod stdio;
pub mod synthetic;
