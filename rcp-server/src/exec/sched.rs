//! Scheduling hints for the server's threads: short time slices for the threads that read
//! requests and write answers, the CPU workers' niceness.
//!
//! The I/O threads (the stdio reader and writer, the async runtime's workers) do little per
//! wake-up, and what they do is on every request's path: a `ping` is answered the moment the
//! reader runs. The CPU workers run searches for milliseconds at a time. With both cores busy,
//! Linux's EEVDF scheduler lets a waking thread preempt the running one only when the waking
//! thread's virtual deadline is earlier, and that deadline lies one slice ahead: with the
//! default slice (a few milliseconds, scaled with the core count) a reader can wait that long
//! behind a search before it reads the `ping`. A short slice ([`DEFAULT_IO_SLICE`]) puts the
//! I/O thread first when it wakes without changing its share of the CPU, which stays its
//! nice value's. Linux 6.12 and later honour the request for normal threads; older kernels
//! and other systems ignore it, and so does this module when the call fails.
//!
//! A short slice does not help a thread that has used more than its share: under EEVDF it
//! waits until the others catch up, and with two search threads, an engine's indexing thread
//! and a client on two cores the runtime's workers waited up to 10 ms for a core after waking
//! (`perf sched latency`, 256 HTTP clients). So I/O threads also ask for niceness
//! [`DEFAULT_IO_NICE`] (-5, three times a normal thread's weight) where the process may take
//! it. They use little CPU, so this gives them the CPU the moment they have work without
//! taking a larger share over time; where the process may not (no `CAP_SYS_NICE`, no
//! `RLIMIT_NICE`), they stay at its niceness and it is said once in the log.
//!
//! Both are requested with `SCHED_FLAG_RESET_ON_FORK`: threads that a marked thread spawns
//! (CPU workers started on demand by the reader, an engine's own threads) start with the
//! kernel's default slice and no negative niceness.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

/// The slice I/O threads ask for unless [`set_io_slice`] says otherwise.
pub const DEFAULT_IO_SLICE: Duration = Duration::from_micros(100);

/// The configured slice in nanoseconds; 0 leaves I/O threads at the kernel's default.
static IO_SLICE_NS: AtomicU64 = AtomicU64::new(100_000);

/// The niceness I/O threads ask for unless [`set_io_nice`] says otherwise.
///
/// At 256 HTTP clients on Cranfield (2 cores, client on the same machine) the probe's `ping`
/// p99 was 3.8-4.2 ms with it and 4.4-6.3 ms without, at 0-8% fewer answers/s
/// (`bench/src/bin/load.rs`).
pub const DEFAULT_IO_NICE: i32 = -5;

/// The niceness I/O threads ask for; 0 leaves them at the process's own.
static IO_NICE: AtomicI32 = AtomicI32::new(DEFAULT_IO_NICE);

/// Whether a refused niceness has been logged (once per process).
static NICE_REFUSAL_LOGGED: AtomicBool = AtomicBool::new(false);

/// Sets the niceness that [`mark_io_thread`] asks for from now on, for the whole process (0:
/// the process's own; clamped to -20..=19; default [`DEFAULT_IO_NICE`]). A negative value
/// needs `CAP_SYS_NICE` or an `RLIMIT_NICE` that allows it (systemd: `LimitNICE=`); where
/// neither does, the threads stay at the process's niceness. With it the I/O threads run ahead
/// of searches whenever they have work, as nginx's `worker_priority` does for its workers.
pub fn set_io_nice(nice: i32) {
    IO_NICE.store(nice.clamp(-20, 19), Ordering::Relaxed);
}

/// The niceness I/O threads ask for (0: the process's own).
pub fn io_nice() -> i32 {
    IO_NICE.load(Ordering::Relaxed)
}

/// Sets the slice that [`mark_io_thread`] asks for from now on, for the whole process (`None`:
/// the kernel's default). Threads already marked keep what they got.
pub fn set_io_slice(slice: Option<Duration>) {
    let ns = slice.map_or(0, |s| u64::try_from(s.as_nanos()).unwrap_or(u64::MAX));
    IO_SLICE_NS.store(ns, Ordering::Relaxed);
}

/// The slice I/O threads ask for (`None`: the kernel's default).
pub fn io_slice() -> Option<Duration> {
    match IO_SLICE_NS.load(Ordering::Relaxed) {
        0 => None,
        ns => Some(Duration::from_nanos(ns)),
    }
}

/// Marks the calling thread as an I/O thread: asks the kernel for the configured short slice
/// ([`io_slice`]), so that when it wakes with a request to read or an answer to write it
/// preempts a running search at once, without a larger share of the CPU than its nice value
/// gives it. Linux 6.12 and later honour this for normal threads (`sched_setattr(2)`,
/// `sched_runtime`); elsewhere, and where the kernel refuses, the thread runs on as it was.
/// Then the configured niceness ([`io_nice`]), where the process may take it. Threads it
/// spawns afterwards start with the kernel's default slice and no negative niceness.
pub fn mark_io_thread() {
    let (slice, nice) = (io_slice(), io_nice());
    // Both in one call; where the niceness is refused, the slice alone.
    if nice != 0 {
        let Err(e) = set_sched(slice, Some(nice)) else { return };
        if NICE_REFUSAL_LOGGED.swap(true, Ordering::Relaxed) {
            tracing::debug!(error = %e, nice, "could not set an I/O thread's niceness");
        } else {
            tracing::info!(
                error = %e,
                nice,
                "I/O threads stay at the process's niceness: below 0 needs CAP_SYS_NICE or RLIMIT_NICE \
                 (systemd: LimitNICE=); --io-nice 0 asks for nothing"
            );
        }
    }
    if slice.is_some()
        && let Err(e) = set_sched(slice, None)
    {
        tracing::debug!(error = %e, "could not shorten an I/O thread's time slice");
    }
}

/// Tasks a worker of [`runtime`] runs between two looks at the sockets (tokio's default: 61).
/// With 256 HTTP clients each finished search wakes a task that writes an answer, and a
/// `ping` that had just arrived waited for 61 of them: 256 in flight on Cranfield, ping p99
/// 33-35 ms with 61, 17-20 ms with 8, at the same answers/s (`bench/src/bin/load.rs`).
const EVENT_INTERVAL: u32 = 8;

/// A multi-threaded tokio runtime with every driver enabled whose worker threads are I/O
/// threads ([`mark_io_thread`]) and look at the sockets every 8 tasks (tokio: 61); the
/// blocking pool's threads are left as they are. Engine binaries serving HTTP build their
/// runtime with this instead of `tokio::runtime::Runtime::new()`.
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    thread_local! {
        static MARKED: Cell<bool> = const { Cell::new(false) };
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .event_interval(EVENT_INTERVAL)
        // Called on worker threads only, first when a worker has nothing to do yet.
        .on_thread_park(|| {
            if !MARKED.replace(true) {
                mark_io_thread();
            }
        })
        .build()
}

/// Sets the calling CPU worker's niceness to `nice` ([`ExecOptions::nice`](super::ExecOptions)):
/// a search or an embedding then yields the core at once to the I/O threads, and to every
/// other busy process.
pub(super) fn lower_priority(nice: u8) {
    if nice == 0 {
        return;
    }
    use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};
    // thread-priority maps its cross-platform scale 0..=99 linearly onto niceness 19..=-20
    // (truncating); take the first value that lands on `nice`.
    let niceness = |p: u8| (39.0 * (1.0 - f32::from(p) / 99.0)) as i32 - 20;
    let Some(p) = (0..=99u8).find(|&p| niceness(p) == i32::from(nice)) else { return };
    if let Ok(value) = ThreadPriorityValue::try_from(p)
        && let Err(e) = set_current_thread_priority(ThreadPriority::Crossplatform(value))
    {
        tracing::debug!(error = ?e, "could not lower the CPU worker's priority");
    }
}

/// `sched_setattr(2)` on the calling thread: the same policy, `slice` as its `sched_runtime`
/// (the EEVDF slice for normal threads; `None`: the default), `nice` as its niceness (`None`:
/// unchanged), both reset for the threads it spawns.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_sched(slice: Option<Duration>, nice: Option<i32>) -> io::Result<()> {
    /// `struct sched_attr` as of Linux 4.13 (`SCHED_ATTR_SIZE_VER1`, 56 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
    let size = std::mem::size_of::<SchedAttr>() as u32;
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a live, aligned `#[repr(C)]` value of the kernel's VER1 layout and
    // `size` is its size, so the kernel writes at most that many bytes into it; pid 0 is the
    // calling thread. No pointer outlives the call.
    let got = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut SchedAttr, size, 0) };
    if got != 0 {
        return Err(io::Error::last_os_error());
    }
    if attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH {
        return Ok(()); // real-time, deadline and idle threads keep their own scheduling
    }
    attr.size = size;
    attr.flags = SCHED_FLAG_RESET_ON_FORK;
    attr.runtime = slice.map_or(0, |s| u64::try_from(s.as_nanos()).unwrap_or(u64::MAX));
    if let Some(nice) = nice {
        attr.nice = nice;
    }
    attr.deadline = 0;
    attr.period = 0;
    // SAFETY: as above; the kernel reads `attr.size` bytes of `attr`, which is that long.
    let set = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_sched(_slice: Option<Duration>, _nice: Option<i32>) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's slice as `/proc` reports it, where the kernel reports one.
    fn slice_ns() -> Option<u64> {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = sched.lines().find(|l| l.starts_with("se.slice"))?;
        line.rsplit(':').next()?.trim().parse().ok()
    }

    /// The calling thread's niceness (`/proc/thread-self/stat`, field 19).
    fn nice() -> Option<i32> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(16)?.parse().ok()
    }

    #[test]
    fn a_negative_niceness_where_permitted_is_not_inherited() {
        let seen = std::thread::spawn(|| {
            if set_sched(None, Some(-3)).is_err() {
                return None; // neither CAP_SYS_NICE nor an RLIMIT_NICE that allows it
            }
            Some((nice(), std::thread::spawn(nice).join().expect("child")))
        })
        .join()
        .expect("thread");
        let Some((marked, child)) = seen else { return };
        assert_eq!(marked, Some(-3));
        assert!(
            child.is_some_and(|n| n >= 0),
            "RESET_ON_FORK: spawned threads drop a negative niceness, got {child:?}"
        );
    }

    #[test]
    fn io_threads_take_the_default_niceness_where_the_process_may() {
        let (base, marked) = std::thread::spawn(|| {
            let base = nice();
            mark_io_thread();
            (base, nice())
        })
        .join()
        .expect("thread");
        let permitted = std::thread::spawn(|| set_sched(None, Some(-1)).is_ok()).join().expect("thread");
        if permitted {
            assert_eq!(marked, Some(DEFAULT_IO_NICE));
        } else {
            assert_eq!(marked, base, "a refused niceness leaves the thread as it was");
        }
    }

    #[test]
    fn a_marked_thread_gets_the_short_slice_and_its_children_the_default() {
        let (default, marked, child) = std::thread::spawn(|| {
            let default = slice_ns();
            set_sched(Some(Duration::from_micros(150)), None).expect("sched_setattr");
            let marked = slice_ns();
            let child = std::thread::spawn(slice_ns).join().expect("child");
            (default, marked, child)
        })
        .join()
        .expect("thread");
        let Some(default) = default else { return }; // a kernel without EEVDF slices
        if marked == Some(default) && default != 150_000 {
            return; // a kernel before 6.12 ignores the slice for normal threads
        }
        assert_eq!(marked, Some(150_000));
        assert_eq!(child, Some(default), "RESET_ON_FORK: spawned threads start at the default");
    }
}
