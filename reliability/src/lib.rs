//! The reliability suite of rcp-rs. Everything lives under `tests/`:
//!
//! - `fuzz.rs`: property-based fuzzing of frame decoding, params parsing and filter
//!   validation through the real dispatcher; every input must yield a well-formed JSON-RPC
//!   answer (or none, for notifications) and never a panic. `RCP_FUZZ_CASES` sets the number
//!   of cases per property (default 2,500, with a fixed seed; `RCP_FUZZ_SEED` changes it).
//! - `bm25.rs`: `rcp-bm25` under kill -9 during pipelined writes and deletes (`RCP_KILL_CYCLES`
//!   cycles, default 3): every acknowledged write and delete survives each restart; and a
//!   corruption matrix (missing `meta.json` or configuration, flipped bytes in `.term`, `.idx`
//!   and `.store`, truncated and zeroed files): each is refused at start, naming the file, and
//!   repaired by `rcp-bm25 repair` with an exact count of what was kept; never served as less
//!   data. Also: a mistyped `--data-dir`, an aborted `index` run, and group commit.
//!
//! - `hostile_engine.rs`: a real `rcp-gateway` in front of the `hostile_engine` fixture
//!   (`src/bin/hostile_engine.rs`: endless lines and bodies, endless and stalled SSE events,
//!   stalled stdin, log floods, non-UTF-8 stderr, a crash loop): precise errors, other
//!   requests served, peak RSS within 64 MB of idle, crash loops backed off.
//!
//! Short runs are part of `cargo test --workspace`; long runs raise the environment knobs.

#![forbid(unsafe_code)]
