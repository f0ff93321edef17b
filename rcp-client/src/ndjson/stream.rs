//! Lines over any async byte stream: a writer task fed by a queue, a reader that frames with
//! [`LineSplitter`].

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use rcp_protocol::ndjson::{LineRef, LineSplitter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The sending half: lines queued to a task that writes them in order, appending `\n`, and
/// flushes whenever the queue runs dry (so a burst of lines costs one flush). Clones share the
/// task; when the last clone is dropped, the queue is drained and the writer dropped (for a
/// child's stdin: end of input).
#[derive(Debug, Clone)]
pub struct LineWriter {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    failure: Arc<Mutex<Option<Arc<io::Error>>>>,
}

impl LineWriter {
    /// Starts the writer task over `writer` (on the current tokio runtime).
    pub fn spawn<W>(writer: W) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (lines, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
        let failure = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&failure);
        tokio::spawn(async move {
            let mut writer = writer;
            while let Some(line) = queue.recv().await {
                let mut written = writer.write_all(&line).await;
                if written.is_ok() {
                    written = writer.write_all(b"\n").await;
                }
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
        Self { lines, failure }
    }

    /// Queues one line (without its `\n`). Fails with the writer's error once it has stopped.
    pub fn send(&self, line: Vec<u8>) -> Result<(), Arc<io::Error>> {
        self.lines.send(line).map_err(|_| {
            self.failure().unwrap_or_else(|| Arc::new(io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped")))
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
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads lines from `reader`, refusing any longer than `max_line_bytes`.
    pub fn new(reader: R, max_line_bytes: usize) -> Self {
        Self { reader, framer: Framer::new(max_line_bytes), buf: vec![0; READ_CHUNK] }
    }

    /// The next non-blank line, `None` at the end of the stream. A line longer than the cap,
    /// or not UTF-8, is an [`io::ErrorKind::InvalidData`] error; reading may go on after it.
    pub async fn next_line(&mut self) -> io::Result<Option<String>> {
        loop {
            if let Some(line) = self.framer.next() {
                return line;
            }
            let n = self.reader.read(&mut self.buf).await?;
            self.framer.feed(&self.buf[..n]);
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
}

impl Framer {
    /// Lines capped at `max` bytes.
    pub(super) fn new(max: usize) -> Self {
        Self::with(LineSplitter::new(max), max)
    }

    /// Lines cut by `splitter`, capped at `max` bytes.
    pub(super) fn with(splitter: LineSplitter, max: usize) -> Self {
        Self { splitter, ready: VecDeque::new(), max, ended: false }
    }

    /// The next line, `Some(Ok(None))` once the stream ended, `None` when more bytes are
    /// needed.
    pub(super) fn next(&mut self) -> Option<io::Result<Option<String>>> {
        match self.ready.pop_front() {
            Some(line) => Some(line.map(Some)),
            None => self.ended.then_some(Ok(None)),
        }
    }

    /// Takes the bytes of one read; an empty read is the end of the stream.
    pub(super) fn feed(&mut self, data: &[u8]) {
        let (ready, max) = (&mut self.ready, self.max);
        if data.is_empty() {
            self.ended = true;
            self.splitter.finish_each(|l| ready.push_back(owned(l, max)));
        } else {
            self.splitter.push_each(data, |l| ready.push_back(owned(l, max)));
        }
    }
}

/// A framed line as text, or why it cannot be one.
fn owned(line: LineRef<'_>, max: usize) -> io::Result<String> {
    match line {
        LineRef::Frame(bytes) => {
            String::from_utf8(bytes.to_vec()).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        }
        LineRef::TooLong(n) => {
            Err(io::Error::new(io::ErrorKind::InvalidData, format!("a line of {n} bytes exceeds the {max}-byte limit")))
        }
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
}
