//! What an engine reports about itself to operators: readiness (`/readyz`), the gauges of
//! `/metrics` (documents, index version, write-ahead-log size) and the start-up line.
//!
//! An engine registers one [`Status`] implementation with [`crate::ServerBuilder::status`];
//! the framework asks it when a probe or a scrape comes in, so nothing is pushed from the
//! engine's write path. Draining after shutdown starts is the framework's own state.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Figures an engine reports about its index; every field is optional (`None`: not known).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Live documents in the index.
    pub documents: Option<u64>,
    /// A monotonically increasing version of the index (a commit or sequence number).
    pub index_version: Option<u64>,
    /// Bytes in the write-ahead log not yet folded into a snapshot.
    pub wal_bytes: Option<u64>,
    /// Where the index lives on disk (`None`: in memory).
    pub data_dir: Option<PathBuf>,
}

/// Why an engine cannot serve: any error, with its sources (`/readyz` reports the whole chain).
/// A plain message converts with `.into()`.
pub type ReadyError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An engine's report to the operations surface: readiness and index figures.
///
/// Both methods are called from request handlers of the operations endpoints, so they should
/// answer from memory in microseconds (read a counter, not the disk).
pub trait Status: Send + Sync + 'static {
    /// `Ok` when the engine can serve (its index is open, its model loaded); `Err` says why
    /// not, and `/readyz` answers `503` with that reason.
    fn ready(&self) -> Result<(), ReadyError> {
        Ok(())
    }

    /// The engine's current figures, exported as gauges on `/metrics`.
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
}

impl<T: Status> Status for Arc<T> {
    fn ready(&self) -> Result<(), ReadyError> {
        (**self).ready()
    }

    fn stats(&self) -> EngineStats {
        (**self).stats()
    }
}

/// Why a server is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Shutdown has started: in-flight requests are draining and new work should go elsewhere.
    Draining,
    /// The engine reported that it cannot serve, for this reason.
    Engine(String),
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Draining => f.write_str("draining: shutdown in progress"),
            Self::Engine(why) => write!(f, "engine not ready: {why}"),
        }
    }
}

/// The readiness side of a server: the engine's [`Status`] (if it registered one) and the
/// framework's own draining flag.
pub(crate) struct Health {
    status: Option<Arc<dyn Status>>,
    draining: AtomicBool,
}

impl Health {
    pub(crate) fn new(status: Option<Arc<dyn Status>>) -> Self {
        Self { status, draining: AtomicBool::new(false) }
    }

    /// Not draining, and the engine's [`Status::ready`] (if any) says it can serve.
    pub(crate) fn readiness(&self) -> Result<(), NotReady> {
        if self.draining.load(Ordering::Acquire) {
            return Err(NotReady::Draining);
        }
        match &self.status {
            Some(status) => status.ready().map_err(|e| NotReady::Engine(with_sources(&*e))),
            None => Ok(()),
        }
    }

    /// Starts draining; `true` the first time.
    pub(crate) fn begin_drain(&self) -> bool {
        !self.draining.swap(true, Ordering::AcqRel)
    }

    /// The engine's figures, or all-`None` without a [`Status`].
    pub(crate) fn stats(&self) -> EngineStats {
        self.status.as_ref().map(|s| s.stats()).unwrap_or_default()
    }
}

/// An error's message followed by those of its sources, `": "`-separated.
fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}
