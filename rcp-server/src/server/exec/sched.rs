//! Scheduling that an embedding binary may ask for, one server at a time: the niceness of the
//! threads that read requests and write answers, and how often the async runtime's workers look
//! at their sockets. Nothing here runs unless asked: a [`Server`](crate::Server) built without
//! [`ServerBuilder::on_io_thread_start`](crate::ServerBuilder::on_io_thread_start) and served on
//! a runtime the embedder built itself leaves every thread as the host scheduled it.
//!
//! Why a binary would ask (measured in `docs/scheduling.md`): with searches holding every core,
//! a thread that only reads a `ping` and writes its answer still waits for a core behind them.
//! At niceness -5 (three times a normal thread's weight) such a thread runs the moment it has
//! work; it uses little CPU, so over time it takes no larger share. Raising a thread's priority
//! needs `CAP_SYS_NICE` or an `RLIMIT_NICE` that allows it (systemd: `LimitNICE=`); where neither
//! does, the thread stays as it was and the server's log says so once.
//!
//! Threads inherit their creator's niceness. So that a search never runs at the I/O threads'
//! priority, a server whose I/O threads are raised asks its CPU workers
//! ([`ExecOptions::process_niceness`](super::ExecOptions)) and the runtime's blocking threads
//! to set themselves back to the process's niceness (the main thread's) when they start;
//! otherwise they keep what they inherit.
//!
//! Niceness is set through the `thread-priority` crate (feature `tuning`). It cannot ask Linux's
//! EEVDF scheduler for a shorter time slice (`sched_setattr` with `sched_runtime` under
//! `SCHED_OTHER`), which this module once did through a raw system call; that knob is gone.

#[cfg(feature = "tuning")]
use std::io;
#[cfg(feature = "tuning")]
use std::sync::Arc;
#[cfg(feature = "tuning")]
use std::sync::atomic::{AtomicBool, Ordering};

/// The scheduling one server's threads get, as its binary asks. The default asks for nothing.
#[cfg(feature = "tuning")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scheduling {
    /// Niceness of the threads that read requests and write answers (-20..=0): the stdio
    /// transport's reader and writer, and, over HTTP, the runtime's workers. `0` leaves them
    /// as they are.
    pub io_nice: i32,
    /// Tasks a runtime worker runs between two looks at its sockets (tokio's default: 61).
    /// Fewer keeps a newly arrived `ping` from waiting behind that many answer writes.
    /// `None`: tokio's default.
    pub event_interval: Option<u32>,
}

#[cfg(feature = "tuning")]
impl Scheduling {
    /// The hook that gives one I/O thread [`Scheduling::io_nice`], for
    /// [`ServerBuilder::on_io_thread_start`](crate::ServerBuilder::on_io_thread_start); `None`
    /// when there is nothing to ask for. A refusal is logged once per hook (once per server).
    pub fn io_thread_start(&self) -> Option<impl Fn() + Send + Sync + 'static> {
        let nice = self.io_nice.clamp(-20, 19);
        if nice == 0 {
            return None;
        }
        let refusal_logged = Arc::new(AtomicBool::new(false));
        Some(move || {
            let Err(e) = niceness::set(nice) else { return };
            if refusal_logged.swap(true, Ordering::Relaxed) {
                tracing::debug!(error = ?e, nice, "could not set an I/O thread's niceness");
            } else {
                tracing::info!(
                    error = ?e,
                    nice,
                    "I/O threads stay at the process's niceness: below 0 needs CAP_SYS_NICE or RLIMIT_NICE \
                     (systemd: LimitNICE=); --io-nice 0 asks for nothing"
                );
            }
        })
    }

    /// A multi-threaded tokio runtime with every driver enabled and [`Scheduling::event_interval`]
    /// applied. With `io_workers` (a server whose runtime workers read and write, as over HTTP)
    /// each worker also takes [`Scheduling::io_nice`] when it first waits for work; the blocking
    /// pool's threads stay at the process's niceness.
    pub fn runtime(&self, io_workers: bool) -> io::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all();
        if let Some(interval) = self.event_interval {
            builder.event_interval(interval.max(1));
        }
        if self.io_nice != 0 {
            // Blocking threads are started by the worker that needs one, whose niceness they
            // would inherit.
            let process = niceness::process();
            builder.on_thread_start(move || niceness::restore(process));
        }
        if io_workers && let Some(start) = self.io_thread_start() {
            thread_local! {
                static MARKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
            }
            // Called on worker threads only, first when a worker has nothing to do yet.
            builder.on_thread_park(move || {
                if !MARKED.replace(true) {
                    start();
                }
            });
        }
        builder.build()
    }
}

/// Sets the calling CPU worker's niceness to `nice` ([`ExecOptions::nice`](super::ExecOptions)):
/// a search or an embedding then yields the core at once to the I/O threads, and to every
/// other busy process. With `nice` 0 the worker keeps the niceness it inherited, or, when
/// `process` asks for it ([`ExecOptions::process_niceness`](super::ExecOptions)), returns to
/// the process's own (a worker started from a raised I/O thread).
#[cfg(feature = "tuning")]
pub(super) fn lower_priority(nice: u8, process: bool) {
    if nice == 0 {
        if process {
            niceness::restore(niceness::process());
        }
    } else if let Err(e) = niceness::set(i32::from(nice)) {
        tracing::debug!(error = ?e, "could not lower the CPU worker's priority");
    }
}

/// Without the `tuning` feature the CPU workers run at the server's niceness.
#[cfg(not(feature = "tuning"))]
pub(super) fn lower_priority(nice: u8, process: bool) {
    if nice != 0 || process {
        tracing::warn!(
            nice,
            process,
            "ExecOptions::nice and process_niceness need rcp-server's `tuning` feature; the CPU worker keeps its niceness"
        );
    }
}

/// A thread's niceness: set through `thread-priority`, read from `/proc` (Linux).
#[cfg(feature = "tuning")]
mod niceness {
    use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};

    /// Sets the calling thread's niceness (-20..=19).
    pub(super) fn set(nice: i32) -> Result<(), thread_priority::Error> {
        // thread-priority maps its cross-platform scale 0..=99 linearly onto niceness 19..=-20
        // (truncating); take the first value that lands on `nice`.
        let niceness = |p: u8| (39.0 * (1.0 - f32::from(p) / 99.0)) as i32 - 20;
        let p = (0..=99u8).find(|&p| niceness(p) == nice.clamp(-20, 19));
        let value = p.and_then(|p| ThreadPriorityValue::try_from(p).ok());
        let value = value.ok_or(thread_priority::Error::Priority("no priority value maps to this niceness"))?;
        set_current_thread_priority(ThreadPriority::Crossplatform(value))
    }

    /// Brings the calling thread to `target` when it has another niceness (one inherited from
    /// a raised I/O thread). Without `/proc` nothing is known and nothing changes.
    pub(super) fn restore(target: Option<i32>) {
        let Some(target) = target else { return };
        if current().is_some_and(|now| now != target)
            && let Err(e) = set(target)
        {
            tracing::debug!(error = ?e, target, "could not restore a thread's niceness");
        }
    }

    /// The calling thread's niceness.
    pub(super) fn current() -> Option<i32> {
        stat_nice(&std::fs::read_to_string("/proc/thread-self/stat").ok()?)
    }

    /// The process's niceness: its main thread's (`/proc/self/stat` reports the thread group
    /// leader's).
    pub(super) fn process() -> Option<i32> {
        stat_nice(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    /// Field 19 (`nice`) of a `stat` line; the command name before it may hold spaces and `)`.
    pub(super) fn stat_nice(stat: &str) -> Option<i32> {
        stat.rsplit_once(')')?.1.split_whitespace().nth(16)?.parse().ok()
    }
}

#[cfg(all(test, feature = "tuning", target_os = "linux"))]
mod tests {
    use super::*;

    /// Whether this process may lower a thread's niceness below 0.
    fn may_raise() -> bool {
        std::thread::spawn(|| niceness::set(-1).is_ok()).join().expect("thread")
    }

    #[test]
    fn the_nice_field_is_read_past_a_command_name_with_spaces() {
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 -5 3 0 9 1 2 3";
        assert_eq!(niceness::stat_nice(stat), Some(-5));
        assert!(niceness::current().is_some() && niceness::process().is_some());
    }

    #[test]
    fn nothing_is_asked_by_default() {
        assert!(Scheduling::default().io_thread_start().is_none());
    }

    #[test]
    fn the_hook_raises_its_thread_where_permitted_and_leaves_it_otherwise() {
        let start = Scheduling { io_nice: -3, ..Scheduling::default() }.io_thread_start().expect("a hook");
        let (before, after) = std::thread::spawn(move || {
            let before = niceness::current();
            start();
            (before, niceness::current())
        })
        .join()
        .expect("thread");
        assert_eq!(after, if may_raise() { Some(-3) } else { before });
    }

    #[test]
    fn a_cpu_worker_started_from_a_raised_thread_returns_to_the_process_niceness() {
        if !may_raise() {
            return; // neither CAP_SYS_NICE nor an RLIMIT_NICE that allows it
        }
        let (inherited, worker) = std::thread::spawn(|| {
            niceness::set(-4).expect("permitted");
            std::thread::spawn(|| {
                let inherited = niceness::current();
                lower_priority(0, true);
                (inherited, niceness::current())
            })
            .join()
            .expect("worker")
        })
        .join()
        .expect("thread");
        assert_eq!(inherited, Some(-4));
        assert_eq!(worker, niceness::process());
    }

    #[test]
    fn a_cpu_worker_keeps_what_it_inherits_unless_asked() {
        // Raising niceness is always permitted: a host thread at 3 starts a worker.
        let worker = std::thread::spawn(|| {
            niceness::set(3).expect("lowering a thread's priority is always permitted");
            std::thread::spawn(|| {
                lower_priority(0, false);
                niceness::current()
            })
            .join()
            .expect("worker")
        })
        .join()
        .expect("thread");
        assert_eq!(worker, Some(3), "nothing asked: the worker keeps its host's niceness");
    }

    #[test]
    fn the_runtimes_blocking_threads_do_not_keep_a_raised_workers_niceness() {
        if !may_raise() {
            return;
        }
        let scheduling = Scheduling { io_nice: -4, event_interval: Some(8) };
        let runtime = scheduling.runtime(true).expect("runtime");
        let (worker, blocking) = runtime.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await; // every worker has parked
            tokio::spawn(async {
                tokio::task::yield_now().await;
                let worker = niceness::current();
                let blocking = tokio::task::spawn_blocking(niceness::current).await.expect("blocking");
                (worker, blocking)
            })
            .await
            .expect("task")
        });
        assert_eq!(worker, Some(-4), "a worker that has parked once is an I/O thread");
        assert_eq!(blocking, niceness::process());
    }
}
