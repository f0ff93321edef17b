//! [`ServerOptions`]: a server's limits, deadlines and the hook its own I/O threads run.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::server::exec::ExecOptions;

/// Tunable limits and defaults of a server.
#[derive(Clone)]
pub struct ServerOptions {
    /// Deadline applied to every request except writes; `_meta.deadlineMs` may only shorten
    /// it (§13.1).
    pub request_deadline: Duration,
    /// Deadline of `index/add`, `index/delete` and `memory/build`, which may embed or index
    /// large batches; `_meta.deadlineMs` may only shorten it.
    pub write_deadline: Duration,
    /// Longest accepted stdio line; longer lines are answered with `-32013` and skipped.
    pub max_line_bytes: usize,
    /// Largest accepted JSON-RPC batch (§11); larger batches are answered with `-32013`.
    pub max_batch: usize,
    /// How many `_meta.idempotencyKey` results of `index/add` are remembered (§7.10).
    pub idempotency_cache: usize,
    /// Most requests served at once on one stream session; up to four times as many more wait
    /// for a slot while the transport keeps reading (pings and cancels stay live). Past that it
    /// stops reading until one finishes, so a flood of slow requests pushes back on the sender
    /// instead of growing memory without bound.
    pub max_in_flight: usize,
    /// Bytes of finished answers a stream session (stdio, any byte stream) holds while the
    /// client has not read them yet. Past it, finished requests wait for the client to read
    /// (and, once the waiting places are full, the transport stops reading), so a slow reader
    /// gets backpressure instead of an ever-growing queue. One answer larger than this still
    /// passes, alone.
    pub max_queued_output: usize,
    /// The CPU executor handlers run blocking work on ([`crate::RequestContext::run_cpu`]):
    /// worker threads (default one per core) and the bound of each lane's queue.
    pub cpu: ExecOptions,
    /// Called first thing on each I/O thread the server spawns itself (the stdio transport's
    /// reader and writer). `None`, the default, runs nothing there: the library never changes
    /// its host's scheduling on its own. A binary that wants those threads tuned (a niceness,
    /// a time slice) does it here, for this server only.
    pub io_thread_start: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl ServerOptions {
    /// Runs [`ServerOptions::io_thread_start`], if set, on the calling thread.
    pub(crate) fn on_io_thread_start(&self) {
        if let Some(hook) = &self.io_thread_start {
            hook();
        }
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            request_deadline: Duration::from_secs(60),
            write_deadline: Duration::from_secs(3600),
            max_line_bytes: 16 * 1024 * 1024,
            max_batch: 1024,
            idempotency_cache: 4096,
            max_in_flight: 4096,
            max_queued_output: 4 * 1024 * 1024,
            cpu: ExecOptions::default(),
            io_thread_start: None,
        }
    }
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("request_deadline", &self.request_deadline)
            .field("write_deadline", &self.write_deadline)
            .field("max_line_bytes", &self.max_line_bytes)
            .field("max_batch", &self.max_batch)
            .field("idempotency_cache", &self.idempotency_cache)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_queued_output", &self.max_queued_output)
            .field("cpu", &self.cpu)
            .field("io_thread_start", &self.io_thread_start.as_ref().map(|_| "Fn()"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn the_io_thread_hook_runs_only_when_set() {
        ServerOptions::default().on_io_thread_start();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let opts = ServerOptions {
            io_thread_start: Some(Arc::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            })),
            ..ServerOptions::default()
        };
        opts.on_io_thread_start();
        opts.clone().on_io_thread_start();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(format!("{opts:?}").contains("io_thread_start: Some"));
    }
}
