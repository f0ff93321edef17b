//! The executor's bounds, ordering, lane isolation, refusals and cancellation.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcp_wire::ErrorCode;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{ExecOptions, Executor, Lane};

fn pool(threads: usize, queue: usize) -> Executor {
    Executor::new(ExecOptions { threads, queue, ..ExecOptions::default() })
}

/// A gate jobs block on until the test opens it.
#[derive(Clone, Default)]
struct Gate(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, cv) = &*self.0;
        let mut o = open.lock().expect("gate");
        while !*o {
            o = cv.wait(o).expect("gate");
        }
    }
    fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().expect("gate") = true;
        cv.notify_all();
    }
}

/// Starts a job of `lane` that blocks on `gate`.
fn blocked(exec: &Executor, lane: Lane, gate: &Gate) -> JoinHandle<Result<(), rcp_wire::RcpError>> {
    let (exec, gate) = (exec.clone(), gate.clone());
    tokio::spawn(async move { exec.run(lane, &CancellationToken::new(), move || gate.wait()).await })
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_lane_refuses_with_32011_and_retry_after() {
    let exec = pool(1, 2);
    let gate = Gate::default();
    let running = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;
    let waiting: Vec<_> = (0..2).map(|_| blocked(&exec, Lane::Read, &gate)).collect();
    until("two jobs wait", || exec.stats().queued(Lane::Read) == 2).await;

    let refused = exec.run(Lane::Read, &CancellationToken::new(), || ()).await.expect_err("queue is full");
    assert_eq!(refused.code, ErrorCode::RATE_LIMITED);
    let data = refused.data.expect("error.data");
    assert!(data.retry_after_ms.is_some_and(|ms| ms >= 1), "{data:?}");
    assert_eq!(data.retryable, Some(true));

    gate.open();
    running.await.expect("join").expect("ran");
    for w in waiting {
        w.await.expect("join").expect("queued jobs run once a worker frees up");
    }
    exec.run(Lane::Read, &CancellationToken::new(), || ()).await.expect("room again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_run_in_submission_order() {
    let exec = pool(1, 16);
    let gate = Gate::default();
    let first = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut jobs = Vec::new();
    for i in 0..8 {
        let (exec2, order) = (exec.clone(), Arc::clone(&order));
        jobs.push(tokio::spawn(async move {
            exec2.run(Lane::Read, &CancellationToken::new(), move || order.lock().expect("order").push(i)).await
        }));
        until("the job is queued", || exec.stats().queued(Lane::Read) == i + 1).await;
    }
    gate.open();
    first.await.expect("join").expect("ran");
    for j in jobs {
        j.await.expect("join").expect("ran");
    }
    assert_eq!(*order.lock().expect("order"), (0..8).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_run_while_writes_fill_their_lane() {
    // Two threads: writes may hold one, so a read finds the other even with a full write queue.
    let exec = pool(2, 2);
    let gate = Gate::default();
    let writing = blocked(&exec, Lane::Write, &gate);
    until("a write runs", || exec.stats().running(Lane::Write) == 1).await;
    let queued: Vec<_> = (0..2).map(|_| blocked(&exec, Lane::Write, &gate)).collect();
    until("writes wait", || exec.stats().queued(Lane::Write) == 2).await;
    let refused = exec.run(Lane::Write, &CancellationToken::new(), || ()).await.expect_err("write lane full");
    assert_eq!(refused.code, ErrorCode::RATE_LIMITED);

    for _ in 0..20 {
        let value = tokio::time::timeout(Duration::from_secs(2), exec.run(Lane::Read, &CancellationToken::new(), || 7))
            .await
            .expect("a read is not starved by queued writes")
            .expect("read admitted");
        assert_eq!(value, 7);
    }
    assert_eq!(exec.stats().running(Lane::Write), 1, "writes never take more than half the threads");
    gate.open();
    writing.await.expect("join").expect("ran");
    for q in queued {
        q.await.expect("join").expect("ran");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_or_abandoned_queued_job_never_runs() {
    let exec = pool(1, 8);
    let gate = Gate::default();
    let first = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;

    let ran = Arc::new(AtomicBool::new(false));
    let cancel = CancellationToken::new();
    let cancelled = {
        let (exec, ran, cancel) = (exec.clone(), Arc::clone(&ran), cancel.clone());
        tokio::spawn(async move { exec.run(Lane::Read, &cancel, move || ran.store(true, Ordering::SeqCst)).await })
    };
    let abandoned_ran = Arc::new(AtomicBool::new(false));
    let abandoned = {
        let (exec, ran) = (exec.clone(), Arc::clone(&abandoned_ran));
        tokio::spawn(async move {
            exec.run(Lane::Read, &CancellationToken::new(), move || ran.store(true, Ordering::SeqCst)).await
        })
    };
    until("both wait", || exec.stats().queued(Lane::Read) == 2).await;
    cancel.cancel();
    abandoned.abort();
    until("the abandoned job leaves the queue", || exec.stats().queued(Lane::Read) == 1).await;

    gate.open();
    first.await.expect("join").expect("ran");
    let err = cancelled.await.expect("join").expect_err("a cancelled job is not run");
    assert_eq!(err.code, ErrorCode::CANCELLED);
    exec.run(Lane::Read, &CancellationToken::new(), || ()).await.expect("the pool goes on");
    assert!(!ran.load(Ordering::SeqCst), "the cancelled job ran");
    assert!(!abandoned_ran.load(Ordering::SeqCst), "the abandoned job ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finishing_jobs_run_before_queued_reads_and_are_never_refused() {
    // One thread and no queue: any read that finds the worker busy is refused.
    let exec = pool(1, 0);
    let gate = Gate::default();
    let first = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;
    let refused = exec.run(Lane::Read, &CancellationToken::new(), || ()).await.expect_err("no queue");
    assert_eq!(refused.code, ErrorCode::RATE_LIMITED);
    let finishing: Vec<_> = (0..3)
        .map(|i| {
            let exec = exec.clone();
            tokio::spawn(async move { exec.finish(move || i).await })
        })
        .collect();
    until("three finishing jobs wait", || exec.stats().finishing() == 3).await;
    gate.open();
    first.await.expect("join").expect("ran");
    for (i, f) in finishing.into_iter().enumerate() {
        assert_eq!(f.await.expect("join").expect("finishing jobs are admitted whatever the lanes hold"), i);
    }
    // A job's value is sent before its worker counts it done.
    until("no finishing job is left", || exec.stats().finishing() == 0).await;

    // With reads queued too, the finishing job goes first.
    let exec = pool(1, 8);
    let gate = Gate::default();
    let first = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let read = {
        let (exec, order) = (exec.clone(), Arc::clone(&order));
        tokio::spawn(async move {
            exec.run(Lane::Read, &CancellationToken::new(), move || order.lock().expect("order").push("read")).await
        })
    };
    until("a read waits", || exec.stats().queued(Lane::Read) == 1).await;
    let finish = {
        let (exec, order) = (exec.clone(), Arc::clone(&order));
        tokio::spawn(async move { exec.finish(move || order.lock().expect("order").push("finish")).await })
    };
    until("the finishing job waits", || exec.stats().finishing() == 1).await;
    gate.open();
    first.await.expect("join").expect("ran");
    read.await.expect("join").expect("ran");
    finish.await.expect("join").expect("ran");
    assert_eq!(*order.lock().expect("order"), ["finish", "read"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_finishing_job_leaves_the_queue() {
    let exec = pool(1, 4);
    let gate = Gate::default();
    let first = blocked(&exec, Lane::Write, &gate);
    until("the first job runs", || exec.stats().running(Lane::Write) == 1).await;
    let ran = Arc::new(AtomicBool::new(false));
    let abandoned = {
        let (exec, ran) = (exec.clone(), Arc::clone(&ran));
        tokio::spawn(async move { exec.finish(move || ran.store(true, Ordering::SeqCst)).await })
    };
    until("it waits", || exec.stats().finishing() == 1).await;
    abandoned.abort();
    until("it leaves the queue", || exec.stats().finishing() == 0).await;
    gate.open();
    first.await.expect("join").expect("ran");
    exec.finish(|| ()).await.expect("the pool goes on");
    assert!(!ran.load(Ordering::SeqCst), "the abandoned finishing job ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_threads_than_configured() {
    let exec = pool(3, 1000);
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let jobs: Vec<_> = (0..200)
        .map(|_| {
            let (exec, now, peak) = (exec.clone(), Arc::clone(&now), Arc::clone(&peak));
            tokio::spawn(async move {
                exec.run(Lane::Read, &CancellationToken::new(), move || {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            })
        })
        .collect();
    for j in jobs {
        j.await.expect("join").expect("ran");
    }
    assert!(peak.load(Ordering::SeqCst) <= 3, "peak concurrency {}", peak.load(Ordering::SeqCst));
    assert!(exec.stats().threads <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_handle_waits_for_room_instead_of_refusing() {
    let exec = pool(1, 1);
    let gate = Gate::default();
    let running = blocked(&exec, Lane::Read, &gate);
    until("the first job runs", || exec.stats().running(Lane::Read) == 1).await;
    let queued = blocked(&exec, Lane::Read, &gate);
    until("one job waits", || exec.stats().queued(Lane::Read) == 1).await;
    // The shared handle refuses; the waiting handle's jobs wait, and are counted as waiting.
    let refused = exec.run(Lane::Read, &CancellationToken::new(), || ()).await.expect_err("full");
    assert_eq!(refused.code, ErrorCode::RATE_LIMITED);
    let waiting = exec.waiting();
    assert!(waiting.waits_for_room() && !exec.waits_for_room());
    let waiters: Vec<_> = (0..3u32)
        .map(|i| {
            let waiting = waiting.clone();
            tokio::spawn(async move { waiting.run(Lane::Read, &CancellationToken::new(), move || i).await })
        })
        .collect();
    until("three jobs wait for room", || exec.has_waiting()).await;
    // A cancelled waiter leaves with -32006 and takes no place.
    let cancel = CancellationToken::new();
    let gone = {
        let (waiting, cancel) = (waiting.clone(), cancel.clone());
        tokio::spawn(async move { waiting.run(Lane::Read, &cancel, || 9).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    cancel.cancel();
    assert_eq!(gone.await.expect("join").expect_err("cancelled").code, ErrorCode::CANCELLED);
    gate.open();
    running.await.expect("join").expect("ran");
    queued.await.expect("join").expect("ran");
    let mut got = Vec::new();
    for w in waiters {
        got.push(w.await.expect("join").expect("every waiter runs"));
    }
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2]);
    tokio::time::timeout(Duration::from_secs(5), exec.drained()).await.expect("drained");
    assert!(!exec.has_waiting());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_job_fails_only_itself() {
    let exec = pool(1, 4);
    let err = exec.run(Lane::Write, &CancellationToken::new(), || panic!("boom")).await.expect_err("panic");
    assert_eq!(err.code, ErrorCode::INTERNAL_ERROR);
    assert!(err.to_string().contains("boom"), "{err}");
    assert_eq!(exec.run(Lane::Write, &CancellationToken::new(), || 1).await.expect("next job"), 1);
}

#[cfg(all(target_os = "linux", feature = "tuning"))]
#[tokio::test]
async fn workers_run_at_the_configured_niceness() {
    /// Field 19 of /proc/thread-self/stat: the calling thread's niceness.
    fn own_niceness() -> Option<i64> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        after_name.split_whitespace().nth(16)?.parse().ok()
    }
    for nice in [0u8, 5, 10, 19] {
        let exec = Executor::new(ExecOptions { threads: 1, queue: 4, nice, ..ExecOptions::default() });
        let got = exec.run(Lane::Read, &CancellationToken::new(), own_niceness).await.expect("job");
        let base = own_niceness().expect("readable");
        let want = if nice == 0 { base } else { i64::from(nice) };
        assert_eq!(got, Some(want), "nice {nice}");
    }
}
