//! Peaks of a reading taken while something runs (a process's thread count under a flood).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Takes a reading every `every` on a thread of its own until stopped, and keeps the largest.
/// The sampling thread is one thread more in the process it runs in.
#[derive(Debug)]
pub struct PeakSampler {
    running: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

impl PeakSampler {
    /// Starts sampling `read`, with `initial` as the largest value so far.
    pub fn start(initial: u64, every: Duration, read: impl Fn() -> u64 + Send + 'static) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let peak = Arc::new(AtomicU64::new(initial));
        let thread = {
            let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
            std::thread::spawn(move || {
                while running.load(Ordering::SeqCst) {
                    peak.fetch_max(read(), Ordering::SeqCst);
                    std::thread::sleep(every);
                }
            })
        };
        Self { running, peak, thread }
    }

    /// Stops sampling; the largest value seen.
    pub fn stop(self) -> u64 {
        self.running.store(false, Ordering::SeqCst);
        let _ = self.thread.join();
        self.peak.load(Ordering::SeqCst)
    }
}

/// A memory reading of process `pid` from `/proc/PID/status`, in kB: `VmRSS` (resident now) or
/// `VmHWM` (its peak since start). 0 when the process or the field is gone (Linux only).
pub fn status_kb(pid: u32, field: MemField) -> u64 {
    let key = match field {
        MemField::Rss => "VmRSS:",
        MemField::Peak => "VmHWM:",
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Which reading [`status_kb`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemField {
    /// `VmRSS`: the resident set now.
    Rss,
    /// `VmHWM`: the largest resident set since the process started.
    Peak,
}
