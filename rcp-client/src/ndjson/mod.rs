//! NDJSON to a child process or over any byte stream (§5.1): the one implementation that the
//! client's stdio transport, the inspector, the test kit and the benchmarks share.
//!
//! Three layers, each usable alone:
//! - framing: [`LineSplitter`] (rcp-wire's) cuts bytes into lines under a length cap;
//! - lines over a stream: [`LineWriter`] queues lines to a writer task and [`LineReader`] reads
//!   them back, over any `AsyncWrite`/`AsyncRead` (a child's stdio, a socket, an in-memory
//!   duplex); the raw layer, for callers that send malformed bytes on purpose or count frames
//!   themselves;
//! - processes: [`ChildProcess`] spawns an engine with piped stdio, keeps (or forwards, or
//!   discards) its stderr and kills it when dropped; [`blocking`] does the same for threads
//!   without a runtime (tests, measuring clients).
//!
//! The conformance suite keeps its own harness on purpose: it must not depend on the crates
//! it certifies.

pub mod blocking;
mod child;
mod stream;

pub use child::{ChildProcess, ExitHandle, Stderr, StderrHandle, strip_ansi};
pub use rcp_wire::ndjson::{DEFAULT_MAX_LINE_BYTES, Line, LineRef, LineSplitter};
pub use stream::{LineReader, LineWriter, SendError};

/// A generous cap on one line read from an engine, for harnesses that read what they are told
/// to (test kits, benchmarks). A client connection reads under [`crate::Limits`] instead.
pub const MAX_READ_LINE_BYTES: usize = 256 * 1024 * 1024;
