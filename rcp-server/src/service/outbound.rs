//! Where frames the server sends on its own initiative (responses, progress, logs) go.

use std::fmt;
use std::sync::Arc;

/// A sink for serialised frames (one JSON text each, without a trailing newline).
///
/// Transports own the other end: the stdio transport writes each frame as one NDJSON line;
/// the HTTP transport turns progress frames into SSE events of the request they belong to.
#[derive(Clone)]
pub(crate) struct Outbound(Arc<dyn Fn(Vec<u8>) + Send + Sync>);

impl Outbound {
    /// An outbound sink calling `f` for every frame.
    pub(crate) fn new(f: impl Fn(Vec<u8>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// A sink that drops every frame.
    #[cfg(any(test, feature = "http"))]
    pub(crate) fn discard() -> Self {
        Self::new(|_| {})
    }

    /// Sends one frame.
    pub(crate) fn send(&self, frame: Vec<u8>) {
        (self.0)(frame)
    }
}

impl fmt::Debug for Outbound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Outbound")
    }
}
