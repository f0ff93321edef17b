//! The reliability suite of rcp-rs. Everything lives under `tests/`:
//!
//! - `fuzz.rs`: property-based fuzzing of frame decoding, params parsing and filter
//!   validation through the real dispatcher; every input must yield a well-formed JSON-RPC
//!   answer (or none, for notifications) and never a panic. `RCP_FUZZ_CASES` sets the number
//!   of cases per property (default 2,500, with a fixed seed; `RCP_FUZZ_SEED` changes it).
//!
//! Short runs are part of `cargo test --workspace`; long runs raise the environment knobs.
