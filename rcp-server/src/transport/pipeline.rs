//! One session's request pipeline, shared by the stdio and byte-stream transports: lines in,
//! answers out, with a bounded number of requests running and waiting.
//!
//! A pipe has one peer, so the pipe itself is the flow control: the session is
//! [`Session::piped`], its requests wait for room in a full CPU lane instead of being refused
//! with `-32011`, and the transport reads no further line while any does
//! ([`Pipeline::lanes_full`], [`Pipeline::lanes_drained`]), as a language server does. Every
//! request is answered, and what is held is bounded by what was read before the lanes filled.
//!
//! Each line goes through the dispatcher. What it answers at once (`ping`, `info`, errors,
//! notifications) is appended to the caller's `ready` buffer and written by the caller without
//! any hand-off to another thread. A request is polled once right here, when a running slot
//! is free: a handler that finishes without waiting (a cached or trivial answer) is answered
//! on this thread too; one that waits (CPU work on the executor, I/O, a timer) is moved to the
//! runtime as it stands, and runs on from there.
//!
//! Polling on the reader's thread is only worth it while handlers get to their first wait
//! quickly. A handler that does its CPU work inline instead of on the executor would hold up
//! the reading of every line behind it, so [`SLOW_STREAK`] polls in a row longer than
//! [`INLINE_LIMIT`] turn the fast path off for the session (one slow poll may just be this
//! thread being preempted).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rcp_wire::RcpError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use super::connection::Connection;
use super::lines::Line;
use super::queue::FrameQueue;
use crate::handler::BoxFuture;
use crate::operations::observe::{self, Rejection};
use crate::server::exec::Executor;
use crate::service::dispatch::{Dispatcher, Processed, error_frame};
use crate::service::session::Session;

/// A first poll longer than this on the reader's thread is slow.
pub(crate) const INLINE_LIMIT: Duration = Duration::from_millis(1);

/// Slow first polls in a row after which a session stops polling on the reader's thread.
pub(crate) const SLOW_STREAK: u8 = 3;

/// What the caller does after a line.
pub(crate) enum Admit {
    /// Nothing more to do for this line.
    Done,
    /// The request must wait for a place in the queue: acquire [`Pipeline::place`], then
    /// hand both to [`Pipeline::spawn_waiting`].
    Wait(BoxFuture<Option<Vec<u8>>>),
    /// An answer that must follow frames already queued (its request's progress or logs):
    /// send it with [`FrameQueue::send`], within the byte budget.
    Queue(Vec<u8>),
    /// `shutdown` (or a batch holding it) was read: stop reading, then [`Pipeline::finish`].
    Stop,
}

/// A session's pipeline.
pub(crate) struct Pipeline {
    /// The session; handlers' progress and log frames go into `queue`.
    connection: Connection,
    /// The session's own handle on the CPU pool: its requests wait for room in a full lane,
    /// and while they do this pipeline stops reading.
    paced: Executor,
    queue: FrameQueue,
    tracker: TaskTracker,
    running: Arc<Semaphore>,
    queued: Arc<Semaphore>,
    inline: bool,
    slow_streak: u8,
    shutdown_answer: Option<Vec<u8>>,
    /// A batch holding `shutdown` whose other members still run: answered after the drain.
    shutdown_batch: Option<BoxFuture<Option<Vec<u8>>>>,
}

/// Appends one NDJSON line.
pub(crate) fn push_line(buf: &mut Vec<u8>, frame: &[u8]) {
    buf.extend_from_slice(frame);
    buf.push(b'\n');
}

impl Pipeline {
    /// A pipeline for a new session whose answers go to `queue`.
    ///
    /// At most `max_in_flight` handlers run at once; up to four times that may wait for a
    /// slot while the reader keeps going (so pings and cancels are still read and answered).
    /// Past that the reader stops, which pushes back on a sender flooding slow requests. The
    /// reader also stops while a request waits for room in a full CPU lane
    /// ([`Pipeline::lanes_full`]); a cancel or ping sent then is read once the lanes drain
    /// (a request's deadline still ends it while it waits).
    pub(crate) fn new(dispatcher: Arc<Dispatcher>, queue: FrameQueue) -> Self {
        let max = dispatcher.options.max_in_flight.max(1);
        let paced = dispatcher.executor.waiting();
        Self {
            paced: paced.clone(),
            connection: Connection::new(dispatcher, Arc::new(Session::piped(paced)), queue.outbound()),
            queue,
            tracker: TaskTracker::new(),
            running: Arc::new(Semaphore::new(max)),
            queued: Arc::new(Semaphore::new(max.saturating_mul(4))),
            inline: true,
            slow_streak: 0,
            shutdown_answer: None,
            shutdown_batch: None,
        }
    }

    /// What the session is served from.
    pub(crate) fn dispatcher(&self) -> &Dispatcher {
        self.connection.dispatcher()
    }

    /// Whether this session's requests wait for room in a full CPU lane: the caller must stop
    /// reading until [`Pipeline::lanes_drained`] (the pipe's backpressure, instead of
    /// `-32011`). Another session's waiting requests do not stop this one's reading.
    pub(crate) fn lanes_full(&self) -> bool {
        self.paced.has_waiting()
    }

    /// Resolves once none of this session's requests waits for room in a CPU lane.
    pub(crate) fn lanes_drained(&self) -> impl Future<Output = ()> + Send + 'static {
        let executor = self.paced.clone();
        async move { executor.drained().await }
    }

    /// The semaphore of waiting places ([`Admit::Wait`]).
    pub(crate) fn place(&self) -> Arc<Semaphore> {
        Arc::clone(&self.queued)
    }

    /// Processes one line. Immediate answers are appended to `ready`. Must run inside the
    /// runtime's context (it may spawn).
    pub(crate) fn line(&mut self, line: Line, ready: &mut Vec<u8>) -> Admit {
        let processed = match line {
            Line::Frame(frame) => self.connection.process(&frame),
            Line::TooLong(n) => {
                observe::reject(Rejection::Size);
                let e = RcpError::payload_too_large(format!(
                    "line of {n} bytes exceeds the limit of {} bytes",
                    self.dispatcher().options.max_line_bytes
                ));
                Processed::Ready(error_frame(None, &e))
            }
        };
        let admit = match processed {
            Processed::Nothing => Admit::Done,
            // A batch that contained `shutdown` is answered after the drain, like a lone
            // `shutdown`.
            Processed::Ready(frame) if self.connection.is_shutting_down() => {
                self.shutdown_answer = Some(frame);
                return Admit::Stop;
            }
            Processed::Ready(frame) => {
                push_line(ready, &frame);
                Admit::Done
            }
            // A batch holding `shutdown` and requests that wait: it is answered (the whole
            // array, `shutdown`'s answer in it) once everything else has drained.
            Processed::Pending(fut) if self.connection.is_shutting_down() => {
                self.shutdown_batch = Some(fut);
                return Admit::Stop;
            }
            Processed::Pending(fut) if self.inline => self.try_inline(fut, ready),
            Processed::Pending(fut) => Admit::Wait(fut),
            Processed::Shutdown(frame) => {
                self.shutdown_answer = Some(frame);
                return Admit::Stop;
            }
        };
        if self.connection.is_shutting_down() { Admit::Stop } else { admit }
    }

    /// Polls a request once on this thread when a running slot is free: answered now if it
    /// finished, else spawned as it stands.
    fn try_inline(&mut self, mut fut: BoxFuture<Option<Vec<u8>>>, ready: &mut Vec<u8>) -> Admit {
        let Ok(slot) = Arc::clone(&self.running).try_acquire_owned() else { return Admit::Wait(fut) };
        let notes_before = self.queue.unbudgeted();
        let started = Instant::now();
        let polled = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        let spent = started.elapsed();
        if spent <= INLINE_LIMIT {
            self.slow_streak = 0;
        } else {
            self.slow_streak += 1;
            if self.slow_streak >= SLOW_STREAK {
                self.inline = false;
                tracing::debug!(
                    spent_us = spent.as_micros() as u64,
                    "handlers run long before their first wait; requests on this session are no longer polled on the reader's thread"
                );
            }
        }
        match polled {
            // Progress or log frames went to the queue meanwhile: the answer follows them.
            Poll::Ready(Some(frame)) if self.queue.unbudgeted() != notes_before => Admit::Queue(frame),
            Poll::Ready(Some(frame)) => {
                push_line(ready, &frame);
                Admit::Done
            }
            Poll::Ready(None) => Admit::Done,
            Poll::Pending => {
                self.spawn_running(fut, slot, None);
                Admit::Done
            }
        }
    }

    /// The queue the session's answers go through.
    pub(crate) fn queue(&self) -> &FrameQueue {
        &self.queue
    }

    /// Runs a request that holds a running slot; its answer goes to the queue.
    fn spawn_running(
        &self,
        fut: BoxFuture<Option<Vec<u8>>>,
        slot: OwnedSemaphorePermit,
        place: Option<OwnedSemaphorePermit>,
    ) {
        let queue = self.queue.clone();
        self.tracker.spawn(async move {
            if let Some(frame) = fut.await {
                queue.send(frame).await;
            }
            drop((slot, place));
        });
    }

    /// Spawns a request that has its waiting `place`: it runs once a running slot frees up.
    pub(crate) fn spawn_waiting(&self, fut: BoxFuture<Option<Vec<u8>>>, place: OwnedSemaphorePermit) {
        let running = Arc::clone(&self.running);
        let queue = self.queue.clone();
        self.tracker.spawn(async move {
            let Ok(slot) = running.acquire_owned().await else { return };
            if let Some(frame) = fut.await {
                queue.send(frame).await;
            }
            drop((slot, place));
        });
    }

    /// After the last line: waits for every request in flight, then queues the `shutdown`
    /// answer (or the batch holding it) behind all of their answers.
    pub(crate) fn finish(self) -> impl Future<Output = ()> + Send + 'static {
        let Self { tracker, queue, shutdown_answer, shutdown_batch, .. } = self;
        async move {
            tracker.close();
            tracker.wait().await;
            if let Some(batch) = shutdown_batch
                && let Some(frame) = batch.await
            {
                queue.send_now(frame);
            }
            if let Some(frame) = shutdown_answer {
                queue.send_now(frame);
            }
        }
    }
}
