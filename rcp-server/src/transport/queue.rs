//! The bounded queue of answers on their way to a stream transport's writer.
//!
//! A finished request waits for room in a byte budget before its answer is queued, and the
//! writer gives the room back once the bytes are written. So a client that stops reading
//! stalls the requests that finish after the budget is full (and, through the pipeline's
//! bounded places, the reading of new ones) instead of growing an ever longer queue in memory.
//! Progress and log frames, which a handler emits without waiting, are queued at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Semaphore, mpsc};

use crate::service::outbound::Outbound;

/// Bytes of queued answers a writer gathers into one write (a larger answer goes alone).
pub(crate) const WRITE_GATHER: usize = 64 * 1024;

/// One queued item.
pub(crate) enum Item {
    /// A frame (without its newline) and the budget it holds.
    Frame {
        /// The serialised frame.
        bytes: Vec<u8>,
        /// Bytes of budget to give back once it is written.
        held: usize,
    },
    /// Nothing follows: flush and stop.
    Close,
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub(crate) struct FrameQueue {
    tx: mpsc::UnboundedSender<Item>,
    budget: Arc<Semaphore>,
    limit: usize,
    /// Frames queued without waiting so far (see [`FrameQueue::unbudgeted`]).
    unbudgeted: Arc<AtomicU64>,
}

/// The writer's side.
pub(crate) struct FrameReceiver {
    rx: mpsc::UnboundedReceiver<Item>,
    budget: Arc<Semaphore>,
}

impl FrameQueue {
    /// A queue that holds at most about `limit` bytes of answers (a larger answer still
    /// passes, alone).
    pub(crate) fn new(limit: usize) -> (Self, FrameReceiver) {
        let limit = limit.clamp(1, u32::MAX as usize);
        let budget = Arc::new(Semaphore::new(limit));
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, budget: Arc::clone(&budget), limit, unbudgeted: Arc::default() }, FrameReceiver { rx, budget })
    }

    /// Queues an answer once the budget has room for it.
    pub(crate) async fn send(&self, bytes: Vec<u8>) {
        let held = bytes.len().clamp(1, self.limit);
        // `held <= limit <= u32::MAX`; the semaphore is never closed.
        if let Ok(permit) = self.budget.acquire_many(held as u32).await {
            permit.forget();
            let _ = self.tx.send(Item::Frame { bytes, held });
        }
    }

    /// Queues a frame without waiting (progress, logs, the final `shutdown` answer).
    pub(crate) fn send_now(&self, bytes: Vec<u8>) {
        self.unbudgeted.fetch_add(1, Ordering::AcqRel);
        let _ = self.tx.send(Item::Frame { bytes, held: 0 });
    }

    /// How many frames [`FrameQueue::send_now`] has queued. A request whose progress or log
    /// frames went through the queue must send its answer after them, through the queue too.
    pub(crate) fn unbudgeted(&self) -> u64 {
        self.unbudgeted.load(Ordering::Acquire)
    }

    /// Tells the writer that nothing follows.
    pub(crate) fn close(&self) {
        let _ = self.tx.send(Item::Close);
    }

    /// An [`Outbound`] for handlers' progress and log frames.
    pub(crate) fn outbound(&self) -> Outbound {
        let queue = self.clone();
        Outbound::new(move |f| queue.send_now(f))
    }
}

impl FrameReceiver {
    /// The next item, waiting on the async side.
    pub(crate) async fn recv(&mut self) -> Option<Item> {
        self.rx.recv().await
    }

    /// The next item, blocking this (non-runtime) thread.
    pub(crate) fn blocking_recv(&mut self) -> Option<Item> {
        self.rx.blocking_recv()
    }

    /// The next item if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Item> {
        self.rx.try_recv().ok()
    }

    /// Gives back the budget of written frames.
    pub(crate) fn release(&self, held: usize) {
        if held > 0 {
            self.budget.add_permits(held);
        }
    }
}

/// Takes queued frames, after `first`, until about `max_bytes` are gathered (a larger frame
/// comes alone) or the queue is empty. Returns whether `Close` was seen.
pub(crate) fn gather(rx: &mut FrameReceiver, first: Item, max_bytes: usize, out: &mut Vec<(Vec<u8>, usize)>) -> bool {
    let mut total = 0;
    let mut next = Some(first);
    while let Some(item) = next.take() {
        match item {
            Item::Close => return true,
            Item::Frame { bytes, held } => {
                total += bytes.len() + 1;
                out.push((bytes, held));
            }
        }
        if total < max_bytes {
            next = rx.try_recv();
        }
    }
    false
}
