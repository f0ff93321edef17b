//! The per-request context handed to every handler.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcp_wire::capabilities::Capabilities;
use rcp_wire::notifications::{self, LogLevel, LogParams, Partial, ProgressParams};
use rcp_wire::{Hit, Meta, Notification, RequestId};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::server::exec::{Executor, Lane};
use crate::service::access::Grant;
use crate::service::outbound::Outbound;
use crate::service::profile::Profile;

/// Everything a handler may need besides its params: cancellation, deadline, progress and
/// log channels, the negotiated session, and the request's `_meta`.
///
/// Cheap to clone; clones share the same request.
#[derive(Clone, Debug)]
pub struct RequestContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: RequestId,
    method: &'static str,
    cancel: CancellationToken,
    deadline: Instant,
    progress: Option<(Value, Outbound)>,
    log: Option<(LogLevel, Outbound)>,
    profile: Profile,
    capabilities: Arc<Capabilities>,
    session_id: Option<String>,
    session: SessionScope,
    trace_id: String,
    grant: Grant,
    meta: Option<Meta>,
    executor: Executor,
    notes: Mutex<Vec<String>>,
    /// Whether progress and log frames may still be sent: false once the request is answered
    /// (answer, timeout or cancellation), so work that outlives its request (a CPU job that
    /// cannot be interrupted) never sends a notification after the answer. Held while one is
    /// sent, so a frame is either queued before the answer or not at all.
    open: Mutex<bool>,
    /// Hits quarantined when the request started (durable feedback): left out of partial hits
    /// as of the final result.
    quarantined: std::sync::OnceLock<Arc<std::collections::HashSet<String>>>,
}

/// What the dispatcher knows when it builds a context.
pub(crate) struct ContextParts {
    pub id: RequestId,
    pub method: &'static str,
    pub cancel: CancellationToken,
    pub deadline: Instant,
    pub progress: Option<(Value, Outbound)>,
    pub log: Option<(LogLevel, Outbound)>,
    pub profile: Profile,
    pub capabilities: Arc<Capabilities>,
    pub session_id: Option<String>,
    pub session: SessionScope,
    pub trace_id: String,
    pub grant: Grant,
    pub meta: Option<Meta>,
    pub executor: Executor,
}

impl RequestContext {
    pub(crate) fn new(p: ContextParts) -> Self {
        Self {
            inner: Arc::new(Inner {
                id: p.id,
                method: p.method,
                cancel: p.cancel,
                deadline: p.deadline,
                progress: p.progress,
                log: p.log,
                profile: p.profile,
                capabilities: p.capabilities,
                session_id: p.session_id,
                session: p.session,
                trace_id: p.trace_id,
                grant: p.grant,
                meta: p.meta,
                executor: p.executor,
                notes: Mutex::new(Vec::new()),
                open: Mutex::new(true),
                quarantined: std::sync::OnceLock::new(),
            }),
        }
    }

    /// A detached context for calling a handler directly (tests, benchmarks, embedding):
    /// never cancelled, a one-hour deadline, no progress or log channel; CPU work runs on a
    /// process-wide executor sized to the cores.
    pub fn detached(capabilities: Capabilities) -> Self {
        Self::new(ContextParts {
            id: RequestId::from(0),
            method: "",
            cancel: CancellationToken::new(),
            deadline: Instant::now() + Duration::from_secs(3600),
            progress: None,
            log: None,
            profile: Profile::latest(),
            capabilities: Arc::new(capabilities),
            session_id: None,
            session: SessionScope::new(),
            trace_id: crate::service::dispatch::rules::trace::trace_id(None),
            grant: Grant::all(),
            meta: None,
            executor: Executor::shared_default(),
        })
    }

    /// The id of the request being served.
    pub fn request_id(&self) -> &RequestId {
        &self.inner.id
    }

    /// The method being served.
    pub fn method(&self) -> &str {
        self.inner.method
    }

    /// Fires when the client cancels the request (§7.14) or its deadline passes (§13.1).
    ///
    /// The framework already stops awaiting the handler and answers `-32006`/`-32014`; blocking
    /// work (on [`Self::run_cpu`] or a thread) should poll this to stop early.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Runs CPU-bound work (a search, an embedding batch, an index build) on the server's
    /// bounded executor, in `lane`, and returns its value; use it instead of
    /// `tokio::task::spawn_blocking`.
    ///
    /// When the lane's queue is full this fails at once with `-32011` and `retryAfterMs`
    /// (HTTP), or, for a pipe's one peer (stdio, a byte stream), waits for room while the
    /// transport stops reading; a job still queued when the request is cancelled or its
    /// deadline passes never runs.
    /// A running job is not interrupted: long work should poll [`Self::is_cancelled`].
    pub async fn run_cpu<T, F>(&self, lane: Lane, job: F) -> Result<T, rcp_wire::RcpError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.inner.executor.run(lane, &self.inner.cancel, job).await
    }

    /// The executor CPU work of this request runs on.
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// Whether the request was cancelled or timed out.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// When the framework will answer `-32014` if the handler has not finished.
    pub fn deadline(&self) -> Instant {
        self.inner.deadline
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.inner.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether progress frames will reach the client: it sent `_meta.progressToken` and the
    /// server advertises `streaming` (§9).
    pub fn wants_progress(&self) -> bool {
        self.inner.progress.is_some()
    }

    /// Sends `notifications/progress` (§9); a no-op unless [`Self::wants_progress`].
    /// `progress` is clamped to `[0,1]`.
    pub fn progress(&self, progress: f64, stage: &str, message: impl Into<String>) {
        self.send_progress(progress, stage, Some(message.into()), None);
    }

    /// Sends `notifications/progress` carrying incremental hits (`partial.hits`).
    pub fn progress_partial(&self, progress: f64, stage: &str, mut hits: Vec<Hit>) {
        if let Some(quarantined) = self.inner.quarantined.get() {
            crate::retrieval::feedback::quarantine::drop_quarantined(&mut hits, quarantined);
        }
        self.send_progress(progress, stage, None, Some(Partial { hits: Some(hits) }));
    }

    fn send_progress(&self, progress: f64, stage: &str, message: Option<String>, partial: Option<Partial>) {
        let Some((token, out)) = &self.inner.progress else { return };
        let progress = if progress.is_finite() { progress.clamp(0.0, 1.0) } else { 0.0 };
        let params = ProgressParams {
            progress_token: token.clone(),
            progress: Some(progress),
            stage: Some(stage.to_owned()),
            message,
            partial,
        };
        self.notify(out, notifications::PROGRESS, &params);
    }

    /// Leaves the hits in `quarantined` out of this request's partial hits (the final ones are the
    /// retrieve family's to filter).
    pub(crate) fn leave_out_quarantined(&self, quarantined: Arc<std::collections::HashSet<String>>) {
        let _ = self.inner.quarantined.set(quarantined);
    }

    /// Sends a notification unless the request has been answered.
    fn notify<P: serde::Serialize>(&self, out: &Outbound, method: &str, params: &P) {
        let open = self.inner.open.lock().unwrap_or_else(|p| p.into_inner());
        if *open {
            send_notification(out, method, params);
        }
    }

    /// No progress or log frame of this request is sent after this returns (the dispatcher
    /// calls it before the answer is queued).
    pub(crate) fn close_notifications(&self) {
        *self.inner.open.lock().unwrap_or_else(|p| p.into_inner()) = false;
    }

    /// Whether a log at `level` would reach the client (§17.1).
    pub fn log_enabled(&self, level: LogLevel) -> bool {
        matches!(&self.inner.log, Some((min, _)) if level >= *min)
    }

    /// Sends `notifications/log` (§17.1) when the client opted in (client `log` capability or
    /// `_meta.logLevel`) and `level` is at or above its minimum; otherwise a no-op.
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        self.log_with(level, message, None);
    }

    /// Like [`Self::log`], with structured `data`.
    pub fn log_with(&self, level: LogLevel, message: impl Into<String>, data: Option<Meta>) {
        let Some((min, out)) = &self.inner.log else { return };
        if level < *min {
            return;
        }
        let meta = self.inner.progress.as_ref().map(|(token, _)| {
            let mut m = Meta::new();
            m.insert("progressToken".into(), token.clone());
            m
        });
        let params =
            LogParams { level, message: message.into(), logger: Some(self.inner.method.to_owned()), data, meta };
        self.notify(out, notifications::LOG, &params);
    }

    /// The profile of the negotiated protocol revision.
    pub fn profile(&self) -> Profile {
        self.inner.profile
    }

    /// The session's capability set (fixed for the session, §13.2).
    pub fn capabilities(&self) -> &Capabilities {
        &self.inner.capabilities
    }

    /// The transport session id (HTTP stateful sessions), if any.
    pub fn session_id(&self) -> Option<&str> {
        self.inner.session_id.as_deref()
    }

    /// The session the request belongs to, for state that lives and dies with it.
    pub fn session(&self) -> &SessionScope {
        &self.inner.session
    }

    /// The request's trace id (§17.2): the caller's `_meta.traceId`, or one the framework
    /// assigned. A handler that calls other servers passes it on as their `_meta.traceId`.
    pub fn trace_id(&self) -> &str {
        &self.inner.trace_id
    }

    /// What the caller is granted (§15.6): its scopes, already checked against the method, and
    /// the collections each reaches. A server with collections that declared
    /// [`crate::ServerBuilder::collection_grants`] limits each call to
    /// [`Grant::reaches`]; every other server only ever sees grants that reach every
    /// collection. [`Grant::all`] over stdio and without tokens.
    pub fn grant(&self) -> &Grant {
        &self.inner.grant
    }

    /// The request's `_meta` object.
    pub fn meta(&self) -> Option<&Meta> {
        self.inner.meta.as_ref()
    }

    /// Records a note for `usage.notes` of the result (e.g. an option that was degraded).
    pub fn note(&self, note: impl Into<String>) {
        if let Ok(mut notes) = self.inner.notes.lock() {
            notes.push(note.into());
        }
    }

    pub(crate) fn take_notes(&self) -> Vec<String> {
        self.inner.notes.lock().map(|mut n| std::mem::take(&mut *n)).unwrap_or_default()
    }
}

/// The session a request belongs to, as a handler sees it (§7.17 `memory` `scope: "session"`):
/// over stdio the whole connection, over HTTP one `RCP-Session` (a stateless HTTP request is a
/// session of its own). Its key tells sessions apart; it ends when the session does (the
/// connection closes, the HTTP session expires or is deleted), so state a handler keeps for a
/// session can be dropped with it.
#[derive(Debug, Clone)]
pub struct SessionScope {
    key: u64,
    ended: CancellationToken,
}

impl SessionScope {
    /// A new session's scope, its key unique in this process.
    pub fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self { key: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed), ended: CancellationToken::new() }
    }

    /// The session's key, unique in this process.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Completes when the session ends.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// Ends the session (the framework does, when it closes).
    pub(crate) fn end(&self) {
        self.ended.cancel();
    }
}

impl Default for SessionScope {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) fn send_notification<P: serde::Serialize>(out: &Outbound, method: &str, params: &P) {
    match serde_json::to_value(params) {
        Ok(v) => match serde_json::to_vec(&Notification::new(method, v)) {
            Ok(bytes) => out.send(bytes),
            Err(e) => tracing::warn!(error = %e, "could not serialise a notification"),
        },
        Err(e) => tracing::warn!(error = %e, "could not serialise a notification"),
    }
}
