//! The stdio transport (§5.1): NDJSON over stdin/stdout, or over any async byte stream.
//!
//! Reading and writing run off the request path: a reader splits lines and hands them to the
//! dispatcher in batches; a writer coalesces frames and flushes when it runs dry. Requests are
//! served concurrently and answered as they finish (pipelining, §4.7).

use std::io::{self, BufWriter, Read, Write};
use std::sync::Arc;

use rcp_protocol::RcpError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use super::{Line, LineSplitter};
use crate::dispatch::{Processed, error_frame};
use crate::outbound::Outbound;
use crate::server::Server;
use crate::session::Session;

const READ_CHUNK: usize = 64 * 1024;

impl Server {
    /// Serves one session over this process's stdin/stdout until EOF or `shutdown`.
    ///
    /// In-flight requests are drained and every answer flushed before this returns, so a
    /// `main` that returns afterwards exits 0 with nothing lost (§5.1, §13.1). stdout carries
    /// protocol frames only; diagnostics belong on stderr (see [`crate::init_tracing`]).
    pub async fn serve_stdio(&self) -> io::Result<()> {
        self.log_startup("stdio", None);
        let max = self.shared.options.max_line_bytes;
        let (line_tx, line_rx) = mpsc::channel::<Vec<Line>>(16);
        // A plain thread, not tokio's stdin: its blocking read must never hold up shutdown.
        std::thread::Builder::new().name("rcp-stdin".into()).spawn(move || {
            let stdin = io::stdin();
            let mut stdin = stdin.lock();
            let mut buf = vec![0u8; READ_CHUNK];
            let mut splitter = LineSplitter::new(max);
            loop {
                let mut lines = Vec::new();
                match stdin.read(&mut buf) {
                    Ok(0) => {
                        splitter.finish(&mut lines);
                        if !lines.is_empty() {
                            let _ = line_tx.blocking_send(lines);
                        }
                        return;
                    }
                    Ok(n) => splitter.push(&buf[..n], &mut lines),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "stdin read failed; treating as EOF");
                        return;
                    }
                }
                if !lines.is_empty() && line_tx.blocking_send(lines).is_err() {
                    return;
                }
            }
        })?;

        let (frame_tx, mut frame_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = std::thread::Builder::new().name("rcp-stdout".into()).spawn(move || {
            let stdout = io::stdout();
            let mut w = BufWriter::with_capacity(READ_CHUNK, stdout.lock());
            let write = |w: &mut BufWriter<_>, f: &[u8]| -> io::Result<()> {
                w.write_all(f)?;
                w.write_all(b"\n")
            };
            while let Some(frame) = frame_rx.blocking_recv() {
                if frame.is_empty() {
                    break;
                }
                let mut result = write(&mut w, &frame);
                let mut closing = false;
                while result.is_ok() {
                    match frame_rx.try_recv() {
                        Ok(f) if f.is_empty() => {
                            closing = true;
                            break;
                        }
                        Ok(f) => result = write(&mut w, &f),
                        Err(_) => break,
                    }
                }
                if let Err(e) = result.and_then(|_| w.flush()) {
                    tracing::warn!(error = %e, "stdout write failed");
                    return;
                }
                if closing {
                    break;
                }
            }
            let _ = w.flush();
        })?;

        let close_tx = frame_tx.clone();
        let out = Outbound::new(move |f| {
            let _ = frame_tx.send(f);
        });
        self.run(Arc::new(Session::new()), line_rx, out).await;
        let _ = close_tx.send(Vec::new());
        tokio::task::spawn_blocking(move || writer.join())
            .await
            .map_err(io::Error::other)?
            .map_err(|_| io::Error::other("stdout writer panicked"))?;
        Ok(())
    }

    /// Serves one session over any async byte stream pair (a socket, a pipe, an in-memory
    /// duplex in tests) with the same framing and behaviour as [`Server::serve_stdio`].
    pub async fn serve<R, W>(&self, mut reader: R, mut writer: W) -> io::Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let max = self.shared.options.max_line_bytes;
        let (line_tx, line_rx) = mpsc::channel::<Vec<Line>>(16);
        let read_task = tokio::spawn(async move {
            let mut buf = vec![0u8; READ_CHUNK];
            let mut splitter = LineSplitter::new(max);
            loop {
                let mut lines = Vec::new();
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        splitter.finish(&mut lines);
                        if !lines.is_empty() {
                            let _ = line_tx.send(lines).await;
                        }
                        return;
                    }
                    Ok(n) => splitter.push(&buf[..n], &mut lines),
                }
                if !lines.is_empty() && line_tx.send(lines).await.is_err() {
                    return;
                }
            }
        });
        let (frame_tx, mut frame_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let write_task = tokio::spawn(async move {
            let mut buf = Vec::with_capacity(READ_CHUNK);
            while let Some(frame) = frame_rx.recv().await {
                if frame.is_empty() {
                    break;
                }
                buf.extend_from_slice(&frame);
                buf.push(b'\n');
                let mut closing = false;
                while let Ok(f) = frame_rx.try_recv() {
                    if f.is_empty() {
                        closing = true;
                        break;
                    }
                    buf.extend_from_slice(&f);
                    buf.push(b'\n');
                }
                writer.write_all(&buf).await?;
                writer.flush().await?;
                buf.clear();
                if closing {
                    break;
                }
            }
            writer.flush().await?;
            writer.shutdown().await
        });
        let close_tx = frame_tx.clone();
        let out = Outbound::new(move |f| {
            let _ = frame_tx.send(f);
        });
        self.run(Arc::new(Session::new()), line_rx, out).await;
        read_task.abort();
        let _ = close_tx.send(Vec::new());
        write_task.await.map_err(io::Error::other)?
    }

    /// The session loop shared by both entry points: dispatch lines as they arrive, spawn
    /// pending requests, stop on EOF or `shutdown`, then drain and answer `shutdown` last.
    async fn run(&self, session: Arc<Session>, mut lines: mpsc::Receiver<Vec<Line>>, out: Outbound) {
        let tracker = TaskTracker::new();
        // At most `max_in_flight` handlers run at once; up to four times that may wait for a
        // slot while the reader keeps going (so pings and cancels are still read and answered).
        // Past that the reader stops, which pushes back on a sender flooding slow requests.
        let max = self.shared.options.max_in_flight.max(1);
        let running = Arc::new(Semaphore::new(max));
        let queued = Arc::new(Semaphore::new(max.saturating_mul(4)));
        let mut shutdown_answer = None;
        'read: while let Some(batch) = lines.recv().await {
            for line in batch {
                let processed = match line {
                    Line::Frame(frame) => self.process(&session, &frame, &out),
                    Line::TooLong(n) => {
                        crate::observe::reject(crate::observe::Rejection::Size);
                        let e = RcpError::payload_too_large(format!(
                            "line of {n} bytes exceeds the limit of {} bytes",
                            self.shared.options.max_line_bytes
                        ));
                        Processed::Ready(error_frame(None, &e))
                    }
                };
                match processed {
                    Processed::Nothing => {}
                    // A batch that contained `shutdown` is answered after the drain, like a
                    // lone `shutdown`.
                    Processed::Ready(frame) if session.is_shutting_down() => {
                        shutdown_answer = Some(frame);
                        break 'read;
                    }
                    Processed::Ready(frame) => out.send(frame),
                    Processed::Pending(fut) => {
                        let Ok(place) = Arc::clone(&queued).acquire_owned().await else { break 'read };
                        let running = Arc::clone(&running);
                        let out = out.clone();
                        tracker.spawn(async move {
                            let Ok(slot) = running.acquire_owned().await else { return };
                            if let Some(frame) = fut.await {
                                out.send(frame);
                            }
                            drop((slot, place));
                        });
                    }
                    Processed::Shutdown(frame) => {
                        shutdown_answer = Some(frame);
                        break 'read;
                    }
                }
                if session.is_shutting_down() {
                    break 'read;
                }
            }
        }
        drop(lines);
        tracker.close();
        tracker.wait().await;
        if let Some(frame) = shutdown_answer {
            out.send(frame);
        }
    }
}
