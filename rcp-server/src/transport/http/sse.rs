//! One request answered as Server-Sent Events (§5.2, §9): progress (and log) frames as they
//! happen, then exactly one final frame with the response.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use tokio::sync::mpsc;

use super::admission::Slot;
use crate::server::Server;
use crate::service::dispatch::{self, Processed};
use crate::service::outbound::Outbound;
use crate::service::session::Session;

/// Dispatches `bytes` and streams what it emits. Dropping the stream (the client went away)
/// cancels the request; `slot` is released when the stream ends.
pub(super) fn respond(server: &Server, session: &Arc<Session>, bytes: &[u8], slot: Option<Slot>) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<(bool, Vec<u8>)>();
    let progress_tx = tx.clone();
    let out = Outbound::new(move |frame| {
        let _ = progress_tx.send((false, frame));
    });
    let task = match dispatch::process(server.dispatcher(), session, bytes, &out) {
        Processed::Nothing => return StatusCode::NO_CONTENT.into_response(),
        Processed::Ready(b) | Processed::Shutdown(b) => {
            let _ = tx.send((true, b));
            None
        }
        Processed::Pending(f) => Some(tokio::spawn(async move {
            if let Some(b) = f.await {
                let _ = tx.send((true, b));
            }
        })),
    };
    drop(out);
    let stream = SseFrames { rx, task, done: false, _slot: slot };
    // Keep-alive comments let proxies keep the stream open and let us notice a client that
    // went away (the write fails) even while the handler is silent.
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(1))).into_response()
}

/// The event stream of one request: frames flagged `true` are the final answer.
struct SseFrames {
    rx: mpsc::UnboundedReceiver<(bool, Vec<u8>)>,
    task: Option<tokio::task::JoinHandle<()>>,
    done: bool,
    _slot: Option<Slot>,
}

impl Stream for SseFrames {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some((last, frame))) => {
                if last {
                    self.done = true;
                }
                let text = String::from_utf8(frame).unwrap_or_default();
                Poll::Ready(Some(Ok(Event::default().data(text))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for SseFrames {
    fn drop(&mut self) {
        if !self.done
            && let Some(task) = self.task.take()
        {
            // The client went away before the final frame: drop the handler future, which
            // cancels the request (its in-flight guard fires the cancellation token).
            task.abort();
        }
    }
}
