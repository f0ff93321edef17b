//! A session over any pair of async byte streams (§5.1): NDJSON in through a reading task, the
//! session pipeline in between, answers out through a writing task that gathers them.
//!
//! Backpressure: while requests wait for room in a full CPU lane, no further line is taken
//! (see `pipeline`), and the reading task stops once its small channel is full. A peer that
//! stops reading the writer's side fills the answer queue's byte budget; finishing requests
//! then wait, new ones wait for a place, and reading stops.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::lines::{Line, LineSplitter, READ_CHUNK};
use super::pipeline::{Admit, Pipeline};
use super::queue::{FrameQueue, WRITE_GATHER, gather};
use crate::service::dispatch::Dispatcher;

/// Serves one session over `reader` and `writer` until EOF or `shutdown`, in-flight requests
/// drained and every answer flushed.
pub(super) async fn serve<R, W>(dispatcher: Arc<Dispatcher>, mut reader: R, mut writer: W) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = dispatcher.options.max_line_bytes;
    let (line_tx, mut line_rx) = mpsc::channel::<Vec<Line>>(16);
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
    let (queue, mut frames) = FrameQueue::new(dispatcher.options.max_queued_output);
    let write_task = tokio::spawn(async move {
        let mut batch = Vec::new();
        let mut failed = None;
        while let Some(first) = frames.recv().await {
            let closing = gather(&mut frames, first, WRITE_GATHER, &mut batch);
            if failed.is_none()
                && let Err(e) = write_batch(&mut writer, &batch).await
            {
                failed = Some(e);
            }
            // Drained and released even after a failure (as stdio's writer does).
            frames.release(batch.drain(..).map(|(_, held)| held).sum());
            if closing {
                break;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => writer.shutdown().await,
        }
    });

    let mut pipeline = Pipeline::new(dispatcher, queue.clone());
    let mut ready = Vec::new();
    'read: while let Some(batch) = line_rx.recv().await {
        for line in batch {
            if pipeline.lanes_full() {
                // The CPU lanes are full: nothing more is read until they drain.
                flush_ready(&queue, &mut ready).await;
                pipeline.lanes_drained().await;
            }
            match pipeline.line(line, &mut ready) {
                Admit::Done => {}
                Admit::Wait(fut) => {
                    flush_ready(&queue, &mut ready).await;
                    let Ok(place) = pipeline.place().acquire_owned().await else { break 'read };
                    pipeline.spawn_waiting(fut, place);
                }
                Admit::Queue(frame) => queue.send(frame).await,
                Admit::Stop => break 'read,
            }
            if ready.len() >= WRITE_GATHER {
                flush_ready(&queue, &mut ready).await;
            }
        }
        flush_ready(&queue, &mut ready).await;
    }
    flush_ready(&queue, &mut ready).await;
    drop(line_rx);
    pipeline.finish().await;
    read_task.abort();
    queue.close();
    write_task.await.map_err(io::Error::other)?
}

/// Writes gathered frames as lines and flushes: small ones copied into one buffer, large
/// ones written as they are.
async fn write_batch<W: AsyncWrite + Unpin>(writer: &mut W, batch: &[(Vec<u8>, usize)]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(WRITE_GATHER.min(batch.iter().map(|(f, _)| f.len() + 1).sum()));
    for (frame, _) in batch {
        if frame.len() >= WRITE_GATHER {
            writer.write_all(&buf).await?;
            buf.clear();
            writer.write_all(frame).await?;
            writer.write_all(b"\n").await?;
        } else {
            buf.extend_from_slice(frame);
            buf.push(b'\n');
        }
    }
    writer.write_all(&buf).await?;
    writer.flush().await
}

/// Queues the answers gathered so far (already NDJSON lines) as one unit, within the byte
/// budget: while the client is not reading, this waits, and so does the reading of new lines.
async fn flush_ready(queue: &FrameQueue, ready: &mut Vec<u8>) {
    if let Some(b'\n') = ready.last() {
        ready.pop();
        queue.send(std::mem::take(ready)).await;
    }
}
