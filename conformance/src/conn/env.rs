//! What every connection of a run shares: the target, the timeout, the schemas and the sink
//! that collects the running check's violations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Target;
use crate::schema::Schemas;

/// Violations collected while a check runs; the runner turns them into a FAIL of that check.
pub(crate) type Sink = Arc<Mutex<Vec<String>>>;

/// What every connection of a run shares.
#[derive(Clone)]
pub(crate) struct Env {
    pub target: Target,
    pub timeout: Duration,
    pub schemas: Option<Arc<Schemas>>,
    pub sink: Sink,
}

impl Env {
    /// Records a violation against the running check.
    pub(crate) fn violation(&self, msg: impl Into<String>) {
        if let Ok(mut s) = self.sink.lock() {
            s.push(msg.into());
        }
    }
}
