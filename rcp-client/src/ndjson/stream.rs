//! Lines over any async byte stream: a writer task fed by a queue, a reader that frames with
//! [`LineSplitter`].

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcp_wire::ndjson::{LineRef, LineSplitter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::error::LimitExceeded;
use crate::limits::Limits;

/// The sending half: lines queued to a task that writes them in order, appending `\n`, and
/// flushes whenever the queue runs dry (so a burst of lines costs one flush). The queue is
/// bounded by [`Limits::max_queued_frames`] and [`Limits::max_queued_bytes`]: a peer that
/// stops reading makes [`Self::try_send`] fail instead of the queue growing. Clones share the
/// task; when the last clone is dropped, the queue is drained and the writer dropped (for a
/// child's stdin: end of input).
#[derive(Debug, Clone)]
pub struct LineWriter {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    failure: Arc<Mutex<Option<Arc<io::Error>>>>,
    queued: Arc<Queued>,
    max_frames: usize,
    max_bytes: usize,
}

/// What is queued and not yet written.
#[derive(Debug, Default)]
struct Queued {
    frames: AtomicUsize,
    bytes: AtomicUsize,
}

/// Why a line could not be queued.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The queue is full: the peer is not reading. The line was not queued; the writer goes on.
    #[error("{0}")]
    Full(#[source] LimitExceeded),
    /// The writer stopped (the peer closed its input, or writing failed).
    #[error("writer stopped: {0}")]
    Stopped(#[source] Arc<io::Error>),
}

impl LineWriter {
    /// Starts the writer task over `writer` (on the current tokio runtime), its queue bounded
    /// by the default [`Limits`].
    pub fn spawn<W>(writer: W) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_limits(writer, &Limits::default())
    }

    /// [`Self::spawn`] with the queue bounded by `limits`.
    pub fn with_limits<W>(writer: W, limits: &Limits) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (lines, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        let failure = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&failure);
        let queued = Arc::new(Queued::default());
        let written_off = Arc::clone(&queued);
        tokio::spawn(async move {
            let mut writer = writer;
            while let Some(line) = queue.recv().await {
                let mut written = writer.write_all(&line).await;
                if written.is_ok() {
                    written = writer.write_all(b"\n").await;
                }
                written_off.frames.fetch_sub(1, Ordering::Relaxed);
                written_off.bytes.fetch_sub(line.len(), Ordering::Relaxed);
                drop(line);
                if written.is_ok() && queue.is_empty() {
                    written = writer.flush().await;
                }
                if let Err(e) = written {
                    if let Ok(mut slot) = failed.lock() {
                        *slot = Some(Arc::new(e));
                    }
                    break;
                }
            }
        });
        let (max_frames, max_bytes) = (limits.max_queued_frames.max(1), limits.max_queued_bytes.max(1));
        Self { lines, failure, queued, max_frames, max_bytes }
    }

    /// Queues one line (without its `\n`). Fails with [`SendError::Full`] when the queue is
    /// at its bounds (a line larger than the byte bound is still queued when nothing else is,
    /// so it can be sent at all), and with [`SendError::Stopped`] once the writer has stopped.
    pub fn try_send(&self, line: Vec<u8>) -> Result<(), SendError> {
        let frames = self.queued.frames.load(Ordering::Relaxed);
        let bytes = self.queued.bytes.load(Ordering::Relaxed);
        if frames >= self.max_frames || (frames > 0 && bytes.saturating_add(line.len()) > self.max_bytes) {
            let (max_frames, max_bytes) = (self.max_frames, self.max_bytes);
            return Err(SendError::Full(LimitExceeded::QueueFull { frames, bytes, max_frames, max_bytes }));
        }
        let len = line.len();
        self.queued.frames.fetch_add(1, Ordering::Relaxed);
        self.queued.bytes.fetch_add(len, Ordering::Relaxed);
        self.lines.send(line).map_err(|_| {
            self.queued.frames.fetch_sub(1, Ordering::Relaxed);
            self.queued.bytes.fetch_sub(len, Ordering::Relaxed);
            SendError::Stopped(
                self.failure().unwrap_or_else(|| Arc::new(io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped"))),
            )
        })
    }

    /// [`Self::try_send`] with the reason as an [`io::Error`] (a full queue is
    /// [`io::ErrorKind::WouldBlock`], wrapping its [`LimitExceeded`]).
    pub fn send(&self, line: Vec<u8>) -> Result<(), Arc<io::Error>> {
        self.try_send(line).map_err(|e| match e {
            SendError::Full(limit) => Arc::new(io::Error::new(io::ErrorKind::WouldBlock, limit)),
            SendError::Stopped(e) => e,
        })
    }

    /// Why the writer stopped, if it failed.
    pub fn failure(&self) -> Option<Arc<io::Error>> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

/// How many bytes one read asks for.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// The receiving half: lines read from an async stream, framed by [`LineSplitter`].
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    framer: Framer,
    buf: Vec<u8>,
    frame_timeout: Option<Duration>,
    frame_started: Option<Instant>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads lines from `reader`, refusing any longer than `max_line_bytes`.
    pub fn new(reader: R, max_line_bytes: usize) -> Self {
        Self {
            reader,
            framer: Framer::new(max_line_bytes),
            buf: vec![0; READ_CHUNK],
            frame_timeout: None,
            frame_started: None,
        }
    }

    /// Reads lines under `limits`: [`Limits::max_frame_bytes`] per line, and a line whose
    /// first byte arrived must end within [`Limits::frame_timeout`].
    pub fn with_limits(reader: R, limits: &Limits) -> Self {
        let mut lines = Self::new(reader, limits.max_frame_bytes);
        lines.frame_timeout = Some(limits.frame_timeout);
        lines
    }

    /// The next non-blank line, `None` at the end of the stream. A line longer than the cap
    /// is an [`io::ErrorKind::InvalidData`] error wrapping [`LimitExceeded::FrameTooLarge`],
    /// reported as soon as the cap is passed (the rest of the line is discarded as it comes);
    /// a line not UTF-8 is an `InvalidData` error too; reading may go on after either. A line
    /// not completed within the frame timeout is an [`io::ErrorKind::TimedOut`] error
    /// wrapping [`LimitExceeded::FrameTimeout`].
    pub async fn next_line(&mut self) -> io::Result<Option<String>> {
        loop {
            if let Some(line) = self.framer.next() {
                return line;
            }
            let read = self.reader.read(&mut self.buf);
            let n = match self.frame_timeout {
                Some(timeout) if self.framer.partial_len() > 0 => {
                    let started = *self.frame_started.get_or_insert_with(Instant::now);
                    match tokio::time::timeout_at((started + timeout).into(), read).await {
                        Ok(n) => n?,
                        Err(_) => {
                            return Err(io::Error::new(io::ErrorKind::TimedOut, LimitExceeded::FrameTimeout(timeout)));
                        }
                    }
                }
                _ => read.await?,
            };
            if self.framer.feed(&self.buf[..n]) || self.framer.partial_len() == 0 {
                self.frame_started = None;
            }
        }
    }
}

/// Lines cut from the bytes read so far, waiting to be taken: what a blocking and an async
/// reader share.
#[derive(Debug)]
pub(super) struct Framer {
    splitter: LineSplitter,
    ready: VecDeque<io::Result<String>>,
    max: usize,
    ended: bool,
    /// The line being discarded was already reported as too long.
    flagged: bool,
}

impl Framer {
    /// Lines capped at `max` bytes.
    pub(super) fn new(max: usize) -> Self {
        Self::with(LineSplitter::new(max), max)
    }

    /// Lines cut by `splitter`, capped at `max` bytes.
    pub(super) fn with(splitter: LineSplitter, max: usize) -> Self {
        Self { splitter, ready: VecDeque::new(), max, ended: false, flagged: false }
    }

    /// The next line, `Some(Ok(None))` once the stream ended, `None` when more bytes are
    /// needed.
    pub(super) fn next(&mut self) -> Option<io::Result<Option<String>>> {
        match self.ready.pop_front() {
            Some(line) => Some(line.map(Some)),
            None => self.ended.then_some(Ok(None)),
        }
    }

    /// Bytes of the unfinished line so far.
    pub(super) fn partial_len(&self) -> usize {
        self.splitter.partial_len()
    }

    /// Takes the bytes of one read (an empty read is the end of the stream); whether a line
    /// ended in them. A line is reported too long as soon as it passes the cap, once.
    pub(super) fn feed(&mut self, data: &[u8]) -> bool {
        let (ready, max, flagged) = (&mut self.ready, self.max, &mut self.flagged);
        let mut ended = false;
        let mut each = |line: LineRef<'_>| {
            ended = true;
            if matches!(line, LineRef::TooLong(_)) && std::mem::take(flagged) {
                return;
            }
            ready.push_back(owned(line, max));
        };
        if data.is_empty() {
            self.ended = true;
            self.splitter.finish_each(&mut each);
        } else {
            self.splitter.push_each(data, &mut each);
        }
        let partial = self.splitter.partial_len();
        if partial > max && !self.flagged {
            self.flagged = true;
            self.ready.push_back(Err(too_long(partial, max)));
        }
        ended
    }
}

/// The error of a line of (at least) `seen` bytes over the cap `max`.
fn too_long(seen: usize, max: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, LimitExceeded::FrameTooLarge { seen: seen as u64, limit: max as u64 })
}

/// A framed line as text, or why it cannot be one.
fn owned(line: LineRef<'_>, max: usize) -> io::Result<String> {
    match line {
        LineRef::Frame(bytes) => {
            String::from_utf8(bytes.to_vec()).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        }
        LineRef::TooLong(n) => Err(too_long(n, max)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_round_trip_over_a_duplex_and_over_long_ones_are_refused() {
        let (a, b) = tokio::io::duplex(1024);
        let (_, write) = tokio::io::split(a);
        let (read, _) = tokio::io::split(b);
        let writer = LineWriter::spawn(write);
        writer.send(b"{\"a\":1}".to_vec()).expect("queued");
        writer.send(Vec::new()).expect("queued");
        writer.send(vec![b'x'; 40]).expect("queued");
        writer.send(b"{\"b\":2}".to_vec()).expect("queued");
        drop(writer);
        let mut reader = LineReader::new(read, 32);
        assert_eq!(reader.next_line().await.ok().flatten().as_deref(), Some("{\"a\":1}"));
        let too_long = reader.next_line().await.expect_err("over the cap");
        assert_eq!(too_long.kind(), io::ErrorKind::InvalidData);
        assert_eq!(reader.next_line().await.ok().flatten().as_deref(), Some("{\"b\":2}"));
        assert_eq!(reader.next_line().await.ok().flatten(), None);
    }

    #[tokio::test]
    async fn a_peer_that_does_not_read_fills_a_bounded_queue_and_calls_fail_at_once() {
        // Nobody reads the other end: the duplex's 64-byte buffer fills, then the queue.
        let (a, _unread) = tokio::io::duplex(64);
        let limits = Limits::default().with_queue(4, 1 << 20);
        let writer = LineWriter::with_limits(a, &limits);
        let mut refused = None;
        for _ in 0..100 {
            if let Err(e) = writer.try_send(vec![b'x'; 100]) {
                refused = Some(e);
                break;
            }
            tokio::task::yield_now().await;
        }
        let Some(SendError::Full(LimitExceeded::QueueFull { frames: 4, max_frames: 4, .. })) = refused else {
            panic!("expected a full queue, got {refused:?}");
        };
    }

    #[tokio::test]
    async fn an_over_long_line_is_refused_as_soon_as_it_passes_the_cap_and_a_stalled_one_in_time() {
        let (mut tx, rx) = tokio::io::duplex(1 << 16);
        let limits = Limits::default().with_max_frame_bytes(1000).with_frame_timeout(Duration::from_millis(200));
        let mut reader = LineReader::with_limits(rx, &limits);
        // 4 KiB of a line that never ends: refused without waiting for its end.
        tx.write_all(&[b'y'; 4096]).await.expect("write");
        let e = reader.next_line().await.expect_err("too long");
        let limit = e.get_ref().and_then(|i| i.downcast_ref::<LimitExceeded>()).cloned();
        assert!(matches!(limit, Some(LimitExceeded::FrameTooLarge { limit: 1000, .. })), "{e}");
        // Its end is not reported a second time; the next line comes through.
        tx.write_all(b"yyy\n{}\n").await.expect("write");
        assert_eq!(reader.next_line().await.ok().flatten().as_deref(), Some("{}"));
        // A line begun and never finished fails within the frame timeout.
        tx.write_all(b"{\"partial\":").await.expect("write");
        let started = Instant::now();
        let e = reader.next_line().await.expect_err("stalled");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
