//! The stdio transport (§5.1): NDJSON over this process's stdin/stdout.
//!
//! One thread reads, and answers what it can on the spot: lines are split
//! and dispatched on that thread ([`Pipeline`]), and the answers available at once (`ping`,
//! `info`, errors, handlers that finish without waiting) are written straight to stdout by it,
//! one write per read. A sequential client (one call at a time, the way an agent calls a tool)
//! is so answered with one `read` and one `write`, its request never crossing a thread, and a
//! pipelined one with one `write` per 64 KiB read. Requests that wait run on the async
//! runtime and the CPU executor; their answers go through a bounded queue ([`FrameQueue`]) to a
//! writer thread that gathers them into vectored writes. Requests are served concurrently and
//! answered as they finish (pipelining, §4.7).
//!
//! Backpressure: while requests wait for room in a full CPU lane, the reader reads no further
//! line (see `pipeline`); nothing is refused with `-32011`. A client that stops reading stdout
//! blocks the writes, then the queue's byte budget fills, finishing requests wait for it, new
//! ones wait for a place, and the reader stops reading stdin. Memory stays bounded by the
//! budget and the pipeline's places.

use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::lines::{LineSplitter, READ_CHUNK};
use super::pipeline::{Admit, Pipeline};
use super::queue::{FrameQueue, FrameReceiver, WRITE_GATHER, gather};
use crate::service::dispatch::Dispatcher;

/// stdout, shared by the reader's thread and the writer thread; each write is whole lines.
///
/// What the reader answers at once (pings, errors, inline answers) must not wait behind the
/// writer's queue, and a mutex is no help there: the writer, going from one batch to the next,
/// takes it again before a sleeping reader wakes. So the reader leaves its bytes in `urgent`
/// and writes them itself when stdout is free; while the writer holds it, the writer writes
/// them at its next batch boundary, before its own. A reader that has more than
/// [`URGENT_LIMIT`] waiting (the client is not reading) waits for stdout like the writer does.
struct Stdout {
    out: Mutex<Box<dyn Write + Send>>,
    urgent: Mutex<Vec<u8>>,
    pending: AtomicBool,
}

/// Bytes the reader may leave for the writer before it waits for stdout itself.
const URGENT_LIMIT: usize = 1 << 20;

fn locked<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Stdout {
    /// The process's stdout without std's line buffering: on Unix a second handle to fd 1,
    /// so the frames gathered here reach the pipe in one `write`/`writev`.
    fn open() -> Self {
        let out: Box<dyn Write + Send> = 'out: {
            #[cfg(unix)]
            {
                use std::os::fd::AsFd;
                if let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() {
                    break 'out Box::new(std::fs::File::from(fd));
                }
            }
            Box::new(io::stdout())
        };
        Self { out: Mutex::new(out), urgent: Mutex::new(Vec::new()), pending: AtomicBool::new(false) }
    }

    /// The reader's side: `bytes` (whole lines) go out now if stdout is free, else at the
    /// writer's next batch boundary.
    fn write_urgent(&self, bytes: &[u8]) -> io::Result<()> {
        let waiting = {
            let mut urgent = locked(&self.urgent);
            urgent.extend_from_slice(bytes);
            urgent.len()
        };
        self.pending.store(true, Ordering::SeqCst);
        // Pairs with the fence in `write_lines`: if the writer still holds stdout here, it
        // sees `pending` after it lets go.
        fence(Ordering::SeqCst);
        let mut out = match self.out.try_lock() {
            Ok(out) => out,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) if waiting <= URGENT_LIMIT => return Ok(()),
            Err(TryLockError::WouldBlock) => locked(&self.out),
        };
        self.drain_urgent(&mut **out)
    }

    /// Writes what the reader left, while holding stdout.
    fn drain_urgent(&self, out: &mut dyn Write) -> io::Result<()> {
        while self.pending.swap(false, Ordering::SeqCst) {
            let bytes = std::mem::take(&mut *locked(&self.urgent));
            if !bytes.is_empty() {
                write_fully(out, &mut [IoSlice::new(&bytes)])?;
            }
        }
        Ok(())
    }

    /// The writer's side: each frame followed by a newline, vectored, in as few calls as the
    /// OS allows, with the reader's bytes first and in between.
    fn write_lines(&self, frames: &[(Vec<u8>, usize)]) -> io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(frames.len() * 2);
        for (frame, _) in frames {
            slices.push(IoSlice::new(frame));
            slices.push(IoSlice::new(b"\n"));
        }
        {
            let mut out = locked(&self.out);
            self.drain_urgent(&mut **out)?;
            write_fully(&mut **out, &mut slices)?;
            self.drain_urgent(&mut **out)?;
        }
        // Bytes the reader left while stdout was still held here, after the last check (the
        // reader then found stdout taken and left them): checked again after each release.
        loop {
            fence(Ordering::SeqCst);
            if !self.pending.load(Ordering::SeqCst) {
                return Ok(());
            }
            let mut out = locked(&self.out);
            self.drain_urgent(&mut **out)?;
        }
    }
}

/// Writes all of `slices`, vectored. A stdout inherited in non-blocking mode answers
/// `WouldBlock` when the pipe is full: that waits and retries rather than dropping the rest
/// of a line.
fn write_fully(out: &mut dyn Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(e) => return Err(e),
        }
    }
    out.flush()
}

/// Serves one session over this process's stdin/stdout until EOF or `shutdown`.
///
/// In-flight requests are drained and every answer flushed before this returns, so a `main`
/// that returns afterwards exits 0 with nothing lost (§5.1, §13.1). Both threads run the
/// server's [`crate::ServerOptions::io_thread_start`] hook first, if it has one.
pub(super) async fn serve(dispatcher: Arc<Dispatcher>) -> io::Result<()> {
    let stdout = Arc::new(Stdout::open());
    let (queue, frames) = FrameQueue::new(dispatcher.options.max_queued_output);

    let writer = {
        let stdout = Arc::clone(&stdout);
        let dispatcher = Arc::clone(&dispatcher);
        std::thread::Builder::new().name("rcp-stdout".into()).spawn(move || {
            dispatcher.options.on_io_thread_start();
            write_queued(frames, &stdout)
        })?
    };

    // A plain thread, not tokio's stdin: its blocking read must never hold up shutdown.
    let (done_tx, done_rx) = oneshot::channel::<Pipeline>();
    let max = dispatcher.options.max_line_bytes;
    let pipeline = Pipeline::new(dispatcher, queue.clone());
    let handle = Handle::current();
    std::thread::Builder::new().name("rcp-stdin".into()).spawn(move || {
        let _runtime = handle.enter();
        pipeline.dispatcher().options.on_io_thread_start();
        let mut pipeline = pipeline;
        // A panic in dispatch (a bug) ends the reading, not the session: what is in
        // flight still drains and is answered.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_stdin(&mut pipeline, max, &handle, &stdout);
        }));
        if let Err(p) = read {
            tracing::error!(panic = %crate::service::panic::message(p.as_ref()), "the stdin reader panicked; draining");
        }
        let _ = done_tx.send(pipeline);
    })?;

    if let Ok(pipeline) = done_rx.await {
        pipeline.finish().await;
    }
    queue.close();
    tokio::task::spawn_blocking(move || writer.join())
        .await
        .map_err(io::Error::other)?
        .map_err(|_| io::Error::other("stdout writer panicked"))?;
    Ok(())
}

/// The reader's thread: reads stdin, dispatches each line, writes the answers that are ready
/// once per read, until EOF or `shutdown`.
fn read_stdin(pipeline: &mut Pipeline, max_line: usize, handle: &Handle, stdout: &Stdout) {
    let stdin = io::stdin();
    let mut stdin = stdin.lock();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut splitter = LineSplitter::new(max_line);
    let mut lines = Vec::new();
    let mut ready = Vec::new();
    let write = |ready: &mut Vec<u8>| {
        if !ready.is_empty() {
            if let Err(e) = stdout.write_urgent(ready) {
                tracing::warn!(error = %e, "stdout write failed");
            }
            ready.clear();
        }
    };
    loop {
        let eof = match stdin.read(&mut buf) {
            Ok(0) => {
                splitter.finish(&mut lines);
                true
            }
            Ok(n) => {
                splitter.push(&buf[..n], &mut lines);
                false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(error = %e, "stdin read failed; treating as EOF");
                true
            }
        };
        for line in lines.drain(..) {
            if pipeline.lanes_full() {
                // The CPU lanes are full: nothing more is read until they drain.
                write(&mut ready);
                handle.block_on(pipeline.lanes_drained());
            }
            match pipeline.line(line, &mut ready) {
                Admit::Done => {}
                Admit::Wait(fut) => {
                    // Waiting for a place: answers gathered so far go out first.
                    write(&mut ready);
                    let Ok(place) = handle.block_on(pipeline.place().acquire_owned()) else {
                        return;
                    };
                    pipeline.spawn_waiting(fut, place);
                }
                // Within the budget: while the client is not reading, this waits (and so
                // does the reading of stdin).
                Admit::Queue(frame) => handle.block_on(pipeline.queue().send(frame)),
                Admit::Stop => {
                    write(&mut ready);
                    return;
                }
            }
            if ready.len() >= WRITE_GATHER {
                write(&mut ready);
            }
        }
        write(&mut ready);
        if eof {
            return;
        }
    }
}

/// The writer thread: gathers queued answers into vectored writes until `Close`.
///
/// After a failed write (the client closed stdout) answers are dropped, but the queue is
/// still drained and its budget given back, so requests finishing later never wait forever.
fn write_queued(mut frames: FrameReceiver, stdout: &Stdout) {
    let mut batch = Vec::new();
    let mut broken = false;
    while let Some(first) = frames.blocking_recv() {
        let closing = gather(&mut frames, first, WRITE_GATHER, &mut batch);
        if !broken && let Err(e) = stdout.write_lines(&batch) {
            tracing::warn!(error = %e, "stdout write failed; answers from now on are dropped");
            broken = true;
        }
        frames.release(batch.drain(..).map(|(_, held)| held).sum());
        if closing {
            return;
        }
    }
}
