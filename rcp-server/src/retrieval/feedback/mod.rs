//! Durable `feedback` (§7.16) with quarantine, as a framework feature any engine switches on
//! with [`crate::ServerBuilder::durable_feedback`]; without a data directory the same store is
//! kept in memory ([`FeedbackStore::in_memory`]).
//!
//! - Every accepted call is one line of an append-only log in the engine's data directory
//!   (`<data-dir>/feedback/signals.log`), synced to disk before `{accepted}` is sent, so a
//!   restart keeps every acknowledged signal.
//! - A hit that draws [`FeedbackOptions::threshold`] `poisonSuspected`/`injectionSuspected`
//!   signals is quarantined: later `retrieve` results leave it out (a hit whose id, or whose
//!   chunk's `docId`, is quarantined). A `retrieve` already running keeps the quarantine set it
//!   started with, so feedback never alters a concurrent `retrieve`.
//! - Signals are untrusted: counts, id and text sizes are bounded (`-32602` past a bound).
//! - Disk and memory are bounded: when the log would pass [`FeedbackOptions::max_log_bytes`]
//!   it is compacted to one snapshot of the quarantine state (individual `used`/`cited`/
//!   `reward` signals are then dropped); a call that would track more than
//!   [`FeedbackOptions::max_tracked_hits`] suspected hits, or that does not fit even after
//!   compaction, is refused with `-32011` and `retryAfterMs`.
//! - Operators list and release quarantined hits with [`crate::cli::QuarantineCmd`] (an
//!   engine's `quarantine list|release` subcommand).

mod ledger;
mod log;
pub(crate) mod quarantine;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rcp_wire::RcpError;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult, Signal};

use self::ledger::{Ledger, Record, hit_key, suspects};
use self::log::Log;
use crate::handler::context::RequestContext;
use crate::handler::{Feedback, HandlerResult};
use crate::server::exec::Lane;

/// The feedback directory inside an engine's data directory.
pub const FEEDBACK_DIR: &str = "feedback";

/// How long a client refused for a full store is told to wait.
const RETRY_AFTER_MS: u64 = 60_000;

/// Limits and the quarantine threshold of a [`FeedbackStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackOptions {
    /// Integrity signals (`poisonSuspected` or `injectionSuspected`) that quarantine a hit.
    pub threshold: u32,
    /// Most signals in one call.
    pub max_signals: usize,
    /// Longest `hitId`, in bytes.
    pub max_id_bytes: usize,
    /// Longest `query` or `sessionId`, in bytes.
    pub max_text_bytes: usize,
    /// Most distinct suspected hits tracked at once.
    pub max_tracked_hits: usize,
    /// Log size that triggers compaction.
    pub max_log_bytes: u64,
}

impl Default for FeedbackOptions {
    fn default() -> Self {
        Self {
            threshold: 3,
            max_signals: 256,
            max_id_bytes: 512,
            max_text_bytes: 8 * 1024,
            max_tracked_hits: 100_000,
            max_log_bytes: 64 << 20,
        }
    }
}

impl FeedbackOptions {
    /// Checks `params` against the bounds: `-32602` naming the field past one. Every feedback
    /// store applies it before it records anything (rcp-pg's, in PostgreSQL, too).
    pub fn check(&self, params: &FeedbackParams) -> Result<(), RcpError> {
        let o = self;
        if params.signals.len() > o.max_signals {
            return Err(RcpError::invalid_params("signals", format!("at most {} signals per call", o.max_signals)));
        }
        for (field, text) in [("query", &params.query), ("sessionId", &params.session_id)] {
            if text.as_ref().is_some_and(|t| t.len() > o.max_text_bytes) {
                return Err(RcpError::invalid_params(field, format!("longer than {} bytes", o.max_text_bytes)));
            }
        }
        for (i, s) in params.signals.iter().enumerate() {
            let id = hit_key(s);
            if id.is_empty() || id.len() > o.max_id_bytes {
                let why = format!("must be 1 to {} bytes", o.max_id_bytes);
                return Err(RcpError::invalid_params(format!("signals[{i}].hitId"), why));
            }
        }
        Ok(())
    }
}

/// The hit a signal names, as a string (a numeric `hitId` in decimal): the key quarantine
/// works on.
pub fn hit_id(signal: &Signal) -> String {
    hit_key(signal)
}

/// Whether `signal` is an integrity signal (`poisonSuspected` or `injectionSuspected`): what
/// counts toward quarantine.
pub fn is_integrity_signal(signal: &Signal) -> bool {
    suspects(signal)
}

/// A quarantined hit, as [`FeedbackStore::quarantined`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The hit id.
    pub hit_id: String,
    /// Integrity signals it drew since it was last released.
    pub signals: u32,
}

/// The durable feedback store of one data directory: register it on a server with
/// [`crate::ServerBuilder::durable_feedback`].
#[derive(Debug)]
pub struct FeedbackStore {
    options: FeedbackOptions,
    inner: Mutex<Inner>,
    /// The quarantine set later retrieves start from; replaced, never mutated in place.
    quarantine_set: Mutex<Arc<HashSet<String>>>,
}

#[derive(Debug)]
struct Inner {
    /// The durable log; `None` for a store kept in memory ([`FeedbackStore::in_memory`]).
    log: Option<Log>,
    ledger: Ledger,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The feedback directory of `data_dir`.
pub fn feedback_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(FEEDBACK_DIR)
}

impl FeedbackStore {
    /// Opens (creating) the store of `data_dir`, replaying its log; a torn last line is cut off.
    /// Fails if the log is damaged elsewhere or another process holds it.
    pub fn open(data_dir: &Path, options: FeedbackOptions) -> io::Result<Self> {
        let (log, records) = Log::open(&feedback_dir(data_dir))?;
        let mut ledger = Ledger::new(options.threshold);
        records.iter().for_each(|r| ledger.apply(r));
        let quarantine_set = Mutex::new(ledger.quarantine_set());
        crate::operations::observe::quarantined(ledger.quarantined().len());
        Ok(Self { options, inner: Mutex::new(Inner { log: Some(log), ledger }), quarantine_set })
    }

    /// A store kept in memory only, for an engine serving without a data directory (a built-in
    /// corpus): the same bounds and quarantine, forgotten when the process ends.
    pub fn in_memory(options: FeedbackOptions) -> Self {
        let ledger = Ledger::new(options.threshold);
        let quarantine_set = Mutex::new(ledger.quarantine_set());
        Self { options, inner: Mutex::new(Inner { log: None, ledger }), quarantine_set }
    }

    /// The store of `data_dir` ([`FeedbackStore::open`]), or one kept in memory
    /// ([`FeedbackStore::in_memory`]) when the engine serves none: every engine built on the
    /// framework offers `feedback` in its default serving mode.
    pub fn open_or_in_memory(data_dir: Option<&Path>, options: FeedbackOptions) -> io::Result<Self> {
        match data_dir {
            Some(dir) => Self::open(dir, options),
            None => Ok(Self::in_memory(options)),
        }
    }

    /// The quarantined hits of `data_dir`, read without taking the log (a server may be
    /// running on it).
    pub fn list(data_dir: &Path) -> io::Result<Vec<Quarantined>> {
        let contents = log::read(&feedback_dir(data_dir))?;
        let mut ledger = Ledger::default();
        contents.records.iter().for_each(|r| ledger.apply(r));
        Ok(to_entries(ledger.quarantined()))
    }

    /// The quarantined hits, in id order.
    pub fn quarantined(&self) -> Vec<Quarantined> {
        to_entries(self.lock().ledger.quarantined())
    }

    /// Releases `hit_id` from quarantine (durably); `false` if it was not quarantined.
    pub fn release(&self, hit_id: &str) -> io::Result<bool> {
        let mut inner = self.lock();
        if !inner.ledger.is_quarantined(hit_id) {
            return Ok(false);
        }
        let record = Record::Release { at: now_ms(), hit_id: hit_id.to_owned() };
        if let Some(log) = inner.log.as_mut() {
            log.append(&Log::line(&record)?)?;
        }
        inner.ledger.apply(&record);
        self.publish(&inner.ledger);
        Ok(true)
    }

    /// Records `signals` durably; `Ok` means they are on disk.
    pub fn record(&self, signals: Vec<Signal>) -> Result<u64, RcpError> {
        if signals.is_empty() {
            return Ok(0);
        }
        let n = signals.len() as u64;
        let suspected = signals.iter().filter(|s| suspects(s)).count();
        let mut inner = self.lock();
        let quarantined = inner.ledger.crossing(&signals);
        let record = Record::Feedback { at: now_ms(), signals, quarantined };
        let line = Log::line(&record).map_err(|e| RcpError::internal(e.to_string()))?;
        self.admit(&mut inner, &record, line.len() as u64)?;
        if let Some(log) = inner.log.as_mut() {
            log.append(&line).map_err(|e| RcpError::internal(format!("feedback log: {e}")))?;
        }
        inner.ledger.apply(&record);
        self.publish(&inner.ledger);
        crate::operations::observe::feedback_signals(n, suspected as u64);
        Ok(n)
    }

    /// Checks the memory and disk bounds for a record of `bytes`, compacting the log if needed.
    fn admit(&self, inner: &mut Inner, record: &Record, bytes: u64) -> Result<(), RcpError> {
        if let Record::Feedback { signals, .. } = record
            && inner.ledger.tracked() + inner.ledger.new_hits(signals) > self.options.max_tracked_hits
        {
            return Err(full("too many suspected hits tracked; release some from quarantine"));
        }
        let Some(log) = inner.log.as_mut() else { return Ok(()) };
        if log.len() + bytes <= self.options.max_log_bytes {
            return Ok(());
        }
        let snapshot = inner.ledger.snapshot();
        log.compact(&snapshot).map_err(|e| RcpError::internal(format!("compacting the feedback log: {e}")))?;
        tracing::info!(bytes = log.len(), "feedback log compacted");
        if log.len() + bytes > self.options.max_log_bytes {
            return Err(full("the feedback log is full even after compaction"));
        }
        Ok(())
    }

    /// Makes the ledger's quarantine set the one later retrieves start from.
    fn publish(&self, ledger: &Ledger) {
        let set = ledger.quarantine_set();
        crate::operations::observe::quarantined(set.len());
        *self.quarantine_set.lock().unwrap_or_else(|e| e.into_inner()) = set;
    }

    /// The quarantine set as of now (a retrieve takes it when it starts).
    pub(crate) fn quarantine_set(&self) -> Arc<HashSet<String>> {
        Arc::clone(&self.quarantine_set.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `-32011` with `retryAfterMs`: the store is full for now.
fn full(why: &str) -> RcpError {
    let mut e = RcpError::rate_limited(RETRY_AFTER_MS);
    e.message = format!("feedback refused: {why}");
    e
}

fn to_entries(list: Vec<(String, u32)>) -> Vec<Quarantined> {
    list.into_iter().map(|(hit_id, signals)| Quarantined { hit_id, signals }).collect()
}

/// The `feedback` handler [`crate::ServerBuilder::durable_feedback`] registers: bounds checked,
/// then the write and its `fsync` on the server's executor (write lane).
pub(crate) struct FeedbackHandler(pub(crate) Arc<FeedbackStore>);

impl Feedback for FeedbackHandler {
    async fn feedback(&self, params: FeedbackParams, ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        self.0.options.check(&params)?;
        let store = Arc::clone(&self.0);
        let accepted = ctx.run_cpu(Lane::Write, move || store.record(params.signals)).await??;
        Ok(FeedbackResult { accepted, meta: None })
    }
}
