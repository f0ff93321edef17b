//! NDJSON framing (§5.1): rcp-wire's [`rcp_wire::ndjson::LineSplitter`], the one
//! splitter servers and clients share (blank lines skipped, a trailing `\r` dropped, line
//! length capped without holding an over-long line in memory).

pub(crate) use rcp_wire::ndjson::{Line, LineSplitter};

/// Bytes a stream transport reads at once.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
