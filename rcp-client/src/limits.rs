//! [`Limits`]: how much a server can make this client hold. Every byte a peer sends, and
//! every frame waiting for a peer that does not read, counts against one of them in the
//! transport (stdio lines, HTTP bodies, SSE events, the outbound queue, stderr and log
//! forwarding); going over fails the call or the connection with
//! [`crate::LimitExceeded`], never grows. The gateway, the `rcpctl` CLI, the inspector and
//! the MCP bridge share these transports, so they share these bounds.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bounds on what one connection may hold; [`Limits::default`] documents each default.
/// Set them through [`crate::ClientOptions::limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest frame accepted from the server: one NDJSON line (stdio), one HTTP response
    /// body, one SSE event. Default 16 MiB, the framework's own cap on what it reads
    /// ([`rcp_wire::ndjson::DEFAULT_MAX_LINE_BYTES`]). An over-long stdio line is
    /// discarded as it streams (never held) and closes the connection; an over-long HTTP body
    /// or SSE event fails its call.
    pub max_frame_bytes: usize,
    /// Longest time one frame may take once its first byte arrived: a stdio line, an HTTP
    /// body after its headers, an SSE event. Default 30 s. A frame that never completes
    /// cannot hold memory or a deadline longer than this.
    pub frame_timeout: Duration,
    /// Bytes of frames queued to a server that is not reading them (stdio). Default 8 MiB;
    /// a call over it fails at once with [`crate::LimitExceeded::QueueFull`].
    pub max_queued_bytes: usize,
    /// Frames queued to a server that is not reading them (stdio). Default 1,024.
    pub max_queued_frames: usize,
    /// Longest stderr line (or `notifications/log` message) kept or forwarded to `tracing`;
    /// the rest of the line is dropped. Default 4 KiB.
    pub max_log_line_bytes: usize,
    /// stderr lines and `notifications/log` messages forwarded to `tracing` per second per
    /// connection (a token bucket holding one second's worth); the others are counted and
    /// reported as one "suppressed N lines" event. Default 200.
    pub log_lines_per_sec: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: rcp_wire::ndjson::DEFAULT_MAX_LINE_BYTES,
            frame_timeout: Duration::from_secs(30),
            max_queued_bytes: 8 * 1024 * 1024,
            max_queued_frames: 1024,
            max_log_line_bytes: 4 * 1024,
            log_lines_per_sec: 200,
        }
    }
}

impl Limits {
    /// These limits with `max_frame_bytes` set (at least 1).
    pub fn with_max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes.max(1);
        self
    }

    /// These limits with `frame_timeout` set.
    pub fn with_frame_timeout(mut self, timeout: Duration) -> Self {
        self.frame_timeout = timeout;
        self
    }

    /// These limits with the outbound queue bounds set (each at least 1).
    pub fn with_queue(mut self, max_frames: usize, max_bytes: usize) -> Self {
        self.max_queued_frames = max_frames.max(1);
        self.max_queued_bytes = max_bytes.max(1);
        self
    }

    /// These limits with the log forwarding bounds set.
    pub fn with_logs(mut self, lines_per_sec: u32, max_line_bytes: usize) -> Self {
        self.log_lines_per_sec = lines_per_sec;
        self.max_log_line_bytes = max_line_bytes.max(1);
        self
    }
}

/// The token bucket that rate-limits what one connection forwards to `tracing` (its stderr
/// lines, its `notifications/log`): one second's worth of lines as the burst, refilled
/// continuously; lines over it are counted, and the count is reported once a token is free.
#[derive(Debug)]
pub(crate) struct LogBudget {
    rate: f64,
    max_line: usize,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

impl LogBudget {
    /// A budget of `limits.log_lines_per_sec` lines per second.
    pub(crate) fn new(limits: &Limits) -> Self {
        let rate = f64::from(limits.log_lines_per_sec);
        Self {
            rate,
            max_line: limits.max_log_line_bytes,
            state: Mutex::new(Bucket { tokens: rate, at: Instant::now(), suppressed: 0 }),
        }
    }

    /// Whether one more line may be forwarded now: `Some(n)` where `n` lines were suppressed
    /// since the last one forwarded (report them first), `None` when this one is suppressed.
    pub(crate) fn admit(&self) -> Option<u64> {
        let Ok(mut b) = self.state.lock() else { return None };
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * self.rate).min(self.rate.max(1.0));
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            None
        }
    }

    /// Lines suppressed and not yet reported (taken: reported once).
    pub(crate) fn take_suppressed(&self) -> u64 {
        self.state.lock().map(|mut b| std::mem::take(&mut b.suppressed)).unwrap_or(0)
    }

    /// `line` cut to the longest line forwarded (on a character boundary).
    pub(crate) fn cap<'a>(&self, line: &'a str) -> &'a str {
        if line.len() <= self.max_line {
            return line;
        }
        let mut end = self.max_line;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        &line[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_admits_a_burst_then_counts_what_it_suppresses() {
        let budget = LogBudget::new(&Limits::default().with_logs(3, 4));
        assert_eq!((0..3).map(|_| budget.admit()).collect::<Vec<_>>(), [Some(0), Some(0), Some(0)]);
        assert_eq!(budget.admit(), None);
        assert_eq!(budget.admit(), None);
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(budget.admit(), Some(2), "the next line admitted reports the two suppressed");
        assert_eq!(budget.cap("héllo"), "hél");
        assert_eq!(budget.cap("hé"), "hé");
        assert_eq!(LogBudget::new(&Limits::default().with_logs(1, 2)).cap("hé"), "h");
        assert_eq!(budget.cap("ok"), "ok");
    }
}
