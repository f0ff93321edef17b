//! The lanes of the executor and its sizing options.

/// Which queue a CPU-bound job waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Reads: `retrieve`, `embed`, `rerank` and other requests that do not change the index.
    Read,
    /// Writes: `index/add`, `index/delete`, index builds.
    Write,
}

impl Lane {
    /// Both lanes, in slot order.
    pub const ALL: [Lane; 2] = [Lane::Read, Lane::Write];

    pub(crate) fn slot(self) -> usize {
        match self {
            Lane::Read => 0,
            Lane::Write => 1,
        }
    }

    /// The lane's name in diagnostics (`read`, `write`).
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Read => "read",
            Lane::Write => "write",
        }
    }
}

impl std::fmt::Display for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How large the executor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecOptions {
    /// Worker threads; `0` means one per available core.
    pub threads: usize,
    /// Jobs that may wait in each lane's queue for a busy worker (jobs a free worker is
    /// about to take do not count); more are refused with `-32011` on transports shared by
    /// many clients (HTTP), or wait for room on a pipe's one peer (stdio, one byte stream),
    /// whose transport stops reading meanwhile. `0`: no job waits for a busy worker.
    pub queue: usize,
    /// Niceness of the worker threads (0..=19; Linux and other Unixes). `0` leaves them at the
    /// server's priority. Higher lets the async runtime's threads (pings, cancels, `info`,
    /// writing responses) take a core at once while searches saturate the pool, at the cost
    /// of yielding to every other busy process on the machine too.
    pub nice: u8,
    /// Workers with `nice` 0 take the process's niceness (its main thread's) when they start,
    /// instead of the niceness of the thread that started them. A server whose I/O threads were
    /// raised ([`crate::ServerBuilder::on_io_thread_start`]) starts its workers from those
    /// threads and wants this, so that searches never run at the I/O threads' priority. Off by
    /// default: the library leaves its host's scheduling alone. Needs the `tuning` feature.
    pub process_niceness: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self { threads: 0, queue: 256, nice: 0, process_niceness: false }
    }
}

impl ExecOptions {
    /// The worker count these options resolve to on this machine (at least one).
    pub fn resolved_threads(&self) -> usize {
        if self.threads > 0 { self.threads } else { std::thread::available_parallelism().map(usize::from).unwrap_or(1) }
    }

    /// How many workers may run writes at once: half of them, at least one.
    pub fn write_slots(&self) -> usize {
        (self.resolved_threads() / 2).max(1)
    }
}
