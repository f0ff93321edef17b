//! The worker pool: per-lane FIFO queues under one lock, workers spawned on demand up to the
//! configured count and retired after a while idle, and ahead of both lanes a queue of
//! finishing jobs (serialising a large answer whose search already ran).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rcp_wire::RcpError;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::lane::{ExecOptions, Lane};

/// How long a worker waits for work before it exits (it is respawned on demand).
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// Job duration assumed for `retryAfterMs` before any job of the lane has run.
const DEFAULT_COST_US: f64 = 10_000.0;

/// The longest `retryAfterMs` the executor suggests.
const MAX_RETRY_AFTER_MS: u64 = 60_000;

type Task = Box<dyn FnOnce() + Send>;

/// The queue of finishing jobs, after the lanes' ([`Lane::slot`]).
const FINISH: usize = 2;

/// Which queue a job waits in: a lane's, or the finishing queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Lane(Lane),
    Finish,
}

impl Queue {
    fn slot(self) -> usize {
        match self {
            Queue::Lane(lane) => lane.slot(),
            Queue::Finish => FINISH,
        }
    }
}

struct Job {
    id: u64,
    cancel: CancellationToken,
    task: Task,
}

#[derive(Default)]
struct State {
    queues: [VecDeque<Job>; 3],
    running: [usize; 3],
    /// Live worker threads.
    threads: usize,
    /// Workers waiting for work.
    idle: usize,
    next_id: u64,
    last_was_write: bool,
    /// Moving average of each queue's job duration, in microseconds.
    cost_us: [Option<f64>; 3],
    closed: bool,
}

impl State {
    fn queued(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// The oldest finishing job, else the oldest job of the lane whose turn it is: lanes
    /// alternate while both have work a worker may take, and writes never occupy more than
    /// `write_slots` workers.
    fn pick(&mut self, write_slots: usize) -> Option<(Queue, Job)> {
        if let Some(job) = self.queues[FINISH].pop_front() {
            return Some((Queue::Finish, job));
        }
        let read = !self.queues[Lane::Read.slot()].is_empty();
        let write = !self.queues[Lane::Write.slot()].is_empty() && self.running[Lane::Write.slot()] < write_slots;
        let lane = match (read, write) {
            (true, true) if self.last_was_write => Lane::Read,
            (true, true) => Lane::Write,
            (true, false) => Lane::Read,
            (false, true) => Lane::Write,
            (false, false) => return None,
        };
        self.last_was_write = lane == Lane::Write;
        self.queues[lane.slot()].pop_front().map(|job| (Queue::Lane(lane), job))
    }
}

struct Inner {
    state: Mutex<State>,
    ready: Condvar,
    /// Per lane: a place in the queue may have opened (a job left it, or a worker freed up).
    /// Wakes one job waiting for room ([`Executor::waiting`]).
    room: [Notify; 2],
    /// Jobs waiting for room in a full lane, instead of being refused.
    waiting: AtomicUsize,
    /// Fires when `waiting` falls back to zero: the lanes have room again.
    drained: Notify,
    threads: usize,
    write_slots: usize,
    queue: usize,
    nice: u8,
    process_niceness: bool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and catch their own panics, so a poisoned lock still
        // guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many more jobs of `lane` workers could start now: jobs queued within this many
    /// are about to run (their worker may still be starting), not waiting.
    fn free(&self, s: &State, lane: Lane) -> usize {
        let idle = self.threads.saturating_sub(s.running.iter().sum());
        match lane {
            Lane::Read => idle,
            Lane::Write => idle.min(self.write_slots.saturating_sub(s.running[Lane::Write.slot()])),
        }
    }

    /// Whether a new job of `lane` finds its queue full.
    fn full(&self, s: &State, lane: Lane) -> bool {
        s.queues[lane.slot()].len() >= self.queue + self.free(s, lane)
    }

    /// Tells one job waiting for room in `queue` (a lane) to look again.
    fn opened(&self, queue: Queue) {
        if let Queue::Lane(lane) = queue {
            self.room[lane.slot()].notify_one();
        }
    }

    fn retry_after_ms(&self, s: &State, lane: Lane) -> u64 {
        let cost = s.cost_us[lane.slot()].unwrap_or(DEFAULT_COST_US);
        let slots = if lane == Lane::Write { self.write_slots } else { self.threads };
        let waiting = s.queues[lane.slot()].len() as f64 + 1.0;
        let ms = (waiting * cost / slots.max(1) as f64 / 1000.0).ceil();
        (ms as u64).clamp(1, MAX_RETRY_AFTER_MS)
    }
}

/// Closes the pool when the last [`Executor`] handle is dropped (workers hold only `Inner`).
struct Closer(Arc<Inner>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_all();
    }
}

/// A bounded pool of CPU worker threads with a read and a write [`Lane`].
///
/// Cheap to clone; clones share the pool. The server owns one and hands it to handlers
/// through [`crate::RequestContext::run_cpu`].
///
/// A lane whose queue is full refuses new jobs with `-32011`, which suits transports shared by
/// many clients (HTTP). A handle from [`Executor::waiting`] makes them wait for room instead:
/// a transport with one peer (stdio, one byte stream) stops reading while jobs wait
/// ([`Executor::has_waiting`], [`Executor::drained`]), so the pipe pushes back on its client.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
    _closer: Arc<Closer>,
    /// A waiting handle's own count of its jobs waiting for room ([`Executor::waiting`]);
    /// `None`: jobs finding their lane full are refused.
    gauge: Option<Arc<Gauge>>,
}

/// Jobs of one waiting handle waiting for room, and when they drain.
#[derive(Default)]
struct Gauge {
    waiting: AtomicUsize,
    drained: Notify,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("threads", &self.inner.threads)
            .field("write_slots", &self.inner.write_slots)
            .field("queue", &self.inner.queue)
            .field("wait_for_room", &self.gauge.is_some())
            .finish()
    }
}

/// A snapshot of the executor's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecStats {
    /// Live worker threads (spawned on demand, at most the configured count).
    pub threads: usize,
    running: [usize; 2],
    queued: [usize; 2],
    finishing: usize,
}

impl ExecStats {
    /// Jobs of `lane` running now.
    pub fn running(&self, lane: Lane) -> usize {
        self.running[lane.slot()]
    }

    /// Jobs of `lane` waiting for a worker.
    pub fn queued(&self, lane: Lane) -> usize {
        self.queued[lane.slot()]
    }

    /// Finishing jobs (large answers being serialised) running or waiting.
    pub fn finishing(&self) -> usize {
        self.finishing
    }
}

/// Removes a job from its queue if the future awaiting it is dropped first (its request was
/// cancelled, timed out or its connection closed): such a job never runs.
struct Queued<'a> {
    inner: &'a Inner,
    queue: Queue,
    id: u64,
    armed: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut s = self.inner.lock();
            let queue = &mut s.queues[self.queue.slot()];
            if let Some(at) = queue.iter().position(|j| j.id == self.id) {
                queue.remove(at);
                drop(s);
                self.inner.opened(self.queue);
            }
        }
    }
}

/// Counts one job waiting for room for as long as it waits: in the pool, and in its handle's
/// gauge.
struct Waiting<'a>(&'a Inner, &'a Gauge);

impl<'a> Waiting<'a> {
    fn enter(inner: &'a Inner, gauge: &'a Gauge) -> Self {
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        gauge.waiting.fetch_add(1, Ordering::SeqCst);
        Self(inner, gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.1.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.1.drained.notify_waiters();
        }
        if self.0.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

impl Executor {
    /// A pool sized by `options`; no thread starts until the first job.
    pub fn new(options: ExecOptions) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            threads: options.resolved_threads(),
            write_slots: options.write_slots(),
            queue: options.queue,
            nice: options.nice.min(19),
            process_niceness: options.process_niceness,
            room: [Notify::new(), Notify::new()],
            waiting: AtomicUsize::new(0),
            drained: Notify::new(),
        });
        Self { _closer: Arc::new(Closer(Arc::clone(&inner))), inner, gauge: None }
    }

    /// A handle on the same pool whose jobs, finding their lane full, wait for room instead of
    /// being refused with `-32011`, counted apart from every other handle's. For a transport
    /// with one peer, which stops reading while its own jobs wait ([`Executor::has_waiting`]
    /// on this handle and its clones): its requests are then all answered, with the memory
    /// they take bounded by what it has read, and another peer's reading is not held up.
    pub fn waiting(&self) -> Self {
        Self { gauge: Some(Arc::new(Gauge::default())), ..self.clone() }
    }

    /// Whether jobs of this handle wait for room in a full lane ([`Executor::waiting`]).
    pub fn waits_for_room(&self) -> bool {
        self.gauge.is_some()
    }

    /// Whether a job is waiting for room in a full lane now: one of this waiting handle's (and
    /// its clones'), or, on any other handle, one of any handle's.
    pub fn has_waiting(&self) -> bool {
        let waiting = self.gauge.as_ref().map_or(&self.inner.waiting, |g| &g.waiting);
        waiting.load(Ordering::SeqCst) > 0
    }

    /// Resolves once no job counted by [`Executor::has_waiting`] waits for room.
    pub async fn drained(&self) {
        let drained_notify = self.gauge.as_ref().map_or(&self.inner.drained, |g| &g.drained);
        loop {
            let drained = drained_notify.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if !self.has_waiting() {
                return;
            }
            drained.await;
        }
    }

    /// The process-wide pool of detached contexts ([`crate::RequestContext::detached`]),
    /// sized to the cores.
    pub(crate) fn shared_default() -> Self {
        static DEFAULT: std::sync::OnceLock<Executor> = std::sync::OnceLock::new();
        DEFAULT.get_or_init(|| Executor::new(ExecOptions::default())).clone()
    }

    /// The configured worker count.
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// The current load.
    pub fn stats(&self) -> ExecStats {
        let s = self.inner.lock();
        ExecStats {
            threads: s.threads,
            running: [s.running[0], s.running[1]],
            queued: [s.queues[0].len(), s.queues[1].len()],
            finishing: s.running[FINISH] + s.queues[FINISH].len(),
        }
    }

    /// Runs `job` on a worker of `lane` and returns its value.
    ///
    /// Fails at once with `-32011` (`retryAfterMs` set) when the lane's queue is full, unless
    /// this handle waits for room ([`Executor::waiting`]); a job waiting for room whose
    /// `cancel` fires is `-32006`. A job
    /// still queued when `cancel` fires, or when this future is dropped, never runs (`-32006`
    /// if awaited). A panicking job is `-32603`. The job runs inside the caller's Tokio
    /// runtime context, so it may use `Handle::current()` like `spawn_blocking` code does.
    pub async fn run<T, F>(&self, lane: Lane, cancel: &CancellationToken, job: F) -> Result<T, RcpError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.run_in(Queue::Lane(lane), cancel.clone(), job).await
    }

    /// Runs `job` ahead of every queued lane job, and never refuses it: the last step of a
    /// request whose CPU work already ran (serialising a large answer), so that step neither
    /// waits behind new searches nor takes the async runtime's threads from pings and I/O.
    /// Its number is bounded by the requests in flight. Dropping the future before the job
    /// starts removes it from the queue.
    pub(crate) async fn finish<T, F>(&self, job: F) -> Result<T, RcpError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.run_in(Queue::Finish, CancellationToken::new(), job).await
    }

    async fn run_in<T, F>(&self, queue: Queue, cancel: CancellationToken, job: F) -> Result<T, RcpError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let task: Task = Box::new(move || {
            let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
            let _ = tx.send(catch_unwind(AssertUnwindSafe(job)));
        });
        let id = self.admit(queue, cancel, task).await?;
        let mut queued = Queued { inner: &self.inner, queue, id, armed: true };
        let outcome = rx.await;
        queued.armed = false;
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(panic)) => {
                Err(RcpError::internal(format!("CPU job panicked: {}", crate::service::panic::message(panic.as_ref()))))
            }
            Err(_) => Err(RcpError::cancelled(Some("cancelled before it ran"))),
        }
    }

    /// Queues `task`: at once, or, when its lane is full, after waiting for room (a waiting
    /// handle) or never (`-32011`).
    async fn admit(&self, queue: Queue, cancel: CancellationToken, task: Task) -> Result<u64, RcpError> {
        let mut task = task;
        let mut waiting = None;
        loop {
            let room = match queue {
                Queue::Lane(lane) => Some(self.inner.room[lane.slot()].notified()),
                Queue::Finish => None,
            };
            let mut room = std::pin::pin!(room);
            if let Some(room) = room.as_mut().as_pin_mut() {
                // Registered before the lane is looked at, so room made meanwhile is not missed.
                room.enable();
            }
            match self.submit(queue, &cancel, task) {
                Ok(id) => {
                    if waiting.is_some() {
                        // Whoever wakes next finds the lane as it is now.
                        self.inner.opened(queue);
                    }
                    return Ok(id);
                }
                Err(Full { task: back, error }) => {
                    let Some(gauge) = self.gauge.as_deref() else { return Err(error) };
                    task = back;
                    waiting.get_or_insert_with(|| Waiting::enter(&self.inner, gauge));
                }
            }
            let Some(room) = room.as_pin_mut() else { continue };
            tokio::select! {
                () = room => {}
                () = cancel.cancelled() => return Err(RcpError::cancelled(Some("cancelled while waiting for a CPU worker"))),
            }
        }
    }

    fn submit(&self, queue: Queue, cancel: &CancellationToken, task: Task) -> Result<u64, Full> {
        let inner = &self.inner;
        let mut s = inner.lock();
        if let Queue::Lane(lane) = queue
            && inner.full(&s, lane)
        {
            let retry_after = inner.retry_after_ms(&s, lane);
            let error = RcpError::rate_limited(retry_after).with_detail(format!(
                "the {lane} queue is full ({} waiting for {} CPU threads); retry after {retry_after} ms",
                s.queues[lane.slot()].len(),
                inner.threads
            ));
            return Err(Full { task, error });
        }
        let cancel = cancel.clone();
        let id = s.next_id;
        s.next_id += 1;
        s.queues[queue.slot()].push_back(Job { id, cancel, task });
        if s.idle < s.queued() && s.threads < inner.threads {
            s.threads += 1;
            drop(s);
            self.spawn_worker();
        } else {
            drop(s);
            inner.ready.notify_one();
        }
        Ok(id)
    }

    fn spawn_worker(&self) {
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new().name("rcp-cpu".into()).spawn(move || {
            super::sched::lower_priority(inner.nice, inner.process_niceness);
            work(&inner)
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a CPU worker thread");
            self.inner.lock().threads -= 1;
        }
    }
}

/// A job refused by a full lane, handed back with the refusal.
struct Full {
    task: Task,
    error: RcpError,
}

/// A worker: takes jobs until the pool closes or it has been idle for [`IDLE_EXIT`].
fn work(inner: &Inner) {
    let mut s = inner.lock();
    loop {
        if let Some((queue, job)) = s.pick(inner.write_slots) {
            s.running[queue.slot()] += 1;
            drop(s);
            inner.opened(queue);
            let ran = !job.cancel.is_cancelled();
            let started = Instant::now();
            if ran {
                (job.task)();
            }
            let took = started.elapsed().as_micros() as f64;
            s = inner.lock();
            s.running[queue.slot()] -= 1;
            if ran {
                let cost = &mut s.cost_us[queue.slot()];
                *cost = Some(cost.map_or(took, |c| 0.8 * c + 0.2 * took));
            }
            // A worker is free: a lane's bound counts free workers, so room may have opened.
            drop(s);
            for lane in Lane::ALL {
                inner.opened(Queue::Lane(lane));
            }
            s = inner.lock();
            continue;
        }
        if s.closed {
            break;
        }
        s.idle += 1;
        let (guard, wait) = inner.ready.wait_timeout(s, IDLE_EXIT).unwrap_or_else(PoisonError::into_inner);
        s = guard;
        s.idle -= 1;
        if wait.timed_out() && s.queued() == 0 {
            break;
        }
    }
    s.threads -= 1;
}
