//! What the kernel reports about a process's resources (Linux `/proc/PID/status`).

/// Resident memory and thread count of a process; zero where unreadable (e.g. not Linux).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// `VmRSS`: resident set size now, in kB.
    pub rss_kb: u64,
    /// `VmHWM`: peak resident set size, in kB.
    pub hwm_kb: u64,
    /// `RssFile`: the part of the resident set that maps files (page cache the kernel can
    /// drop and read again), in kB.
    pub rss_file_kb: u64,
    /// `Threads`.
    pub threads: u64,
}

/// Reads `/proc/PID/status`.
pub fn status(pid: u32) -> Status {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Status {
        rss_kb: field("VmRSS:"),
        hwm_kb: field("VmHWM:"),
        rss_file_kb: field("RssFile:"),
        threads: field("Threads:"),
    }
}
