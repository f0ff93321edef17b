//! `feedback` (§7.16) stored in PostgreSQL, so every stateless rcp-pg process on one database
//! sees the signals any of them accepted, and leaves the same quarantined hits out.
//!
//! The bounds are the framework's ([`FeedbackOptions::check`]); a call is one transaction: a
//! row of `rcp_feedback` and, per integrity signal, one more count in `rcp_feedback_hits`. A
//! hit whose count reaches the threshold is quarantined: [`PgFeedback::quarantined`] lists the
//! ids every `retrieve` leaves out, read where searches read (a read replica, when one is
//! configured, sees a signal after its replication lag; searches survive a primary outage).

use std::collections::HashSet;

use rcp_server::feedback::{FeedbackOptions, hit_id, is_integrity_signal};
use rcp_server::{Feedback, HandlerResult, RequestContext};
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use serde_json::Value;

use crate::db::{Database, DbError};

/// The feedback store of one database.
#[derive(Debug, Clone)]
pub struct PgFeedback {
    /// Where signals are written: the primary.
    db: Database,
    /// Where the quarantine is read: where searches read.
    read: Database,
    options: FeedbackOptions,
}

impl PgFeedback {
    /// The store writing to `db` (migrated) and reading the quarantine from `read` (the same
    /// database, or its read replica), quarantining at `options.threshold` integrity signals.
    pub fn new(db: Database, read: Database, options: FeedbackOptions) -> Self {
        Self { db, read, options }
    }

    /// The quarantined hit ids now.
    pub async fn quarantined(&self) -> Result<HashSet<String>, DbError> {
        let client = self.read.client().await?;
        let threshold = i32::try_from(self.options.threshold).unwrap_or(i32::MAX);
        let rows = client.query("SELECT hit_id FROM rcp_feedback_hits WHERE integrity >= $1", &[&threshold]).await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Records one call in one transaction; returns how many signals were accepted.
    async fn record(&self, params: &FeedbackParams) -> Result<u64, DbError> {
        let signals = serde_json::to_value(&params.signals).unwrap_or(Value::Null);
        let mut client = self.db.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "INSERT INTO rcp_feedback (session_id, query, signals) VALUES ($1, $2, $3)",
            &[&params.session_id, &params.query, &signals],
        )
        .await?;
        for s in params.signals.iter().filter(|s| is_integrity_signal(s)) {
            tx.execute(
                "INSERT INTO rcp_feedback_hits (hit_id, integrity) VALUES ($1, 1) \
                 ON CONFLICT (hit_id) DO UPDATE SET integrity = rcp_feedback_hits.integrity + 1",
                &[&hit_id(s)],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(params.signals.len() as u64)
    }
}

impl Feedback for PgFeedback {
    async fn feedback(&self, params: FeedbackParams, _ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        self.options.check(&params)?;
        if params.signals.is_empty() {
            return Ok(FeedbackResult { accepted: 0, meta: None });
        }
        let accepted = self.record(&params).await?;
        Ok(FeedbackResult { accepted, meta: None })
    }
}
