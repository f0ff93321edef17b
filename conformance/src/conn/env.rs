//! What every connection of a run shares: the target, the timeout, the schemas and the sink
//! that collects the running check's violations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Target;
use crate::schema::{Schemas, fold_digits};

/// A protocol rule a received frame broke, observed while a check ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The same defect seen twice has the same key: the rule broken and where, without the
    /// values that differ from one request to the next (ids, scores, array positions).
    pub key: String,
    /// The id prefix of the checks that own this kind of defect (`rerank.` for a rerank
    /// result breaking the schema, `id.` for an id echoed with another type), when there are.
    pub owner: Option<String>,
    /// What a person reads.
    pub text: String,
}

impl Violation {
    /// A violation keyed by its own text with every digit run folded, so a rule broken by
    /// several requests (their ids and values differ) is one defect.
    pub(crate) fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        Self { key: fold_digits(&text), owner: None, text }
    }

    /// A broken rule with an explicit key and the id prefix of the checks that own it.
    pub(crate) fn rule(owner: &str, key: &str, text: impl Into<String>) -> Self {
        Self { key: key.to_owned(), owner: Some(owner.to_owned()), text: text.into() }
    }

    /// A schema violation of `method`'s result, keyed by the rule and the place in the result,
    /// owned by the checks named after the method.
    pub(crate) fn of_result(method: &str, key: &str, text: impl Into<String>) -> Self {
        let owner = format!("{}.", check_prefix(method));
        Self { key: format!("schema|{method}|{key}"), owner: Some(owner), text: text.into() }
    }
}

/// The id prefix of the checks named after a method (`query/transform` → `transform`).
fn check_prefix(method: &str) -> &str {
    match method {
        "embed/sparse" => "sparse",
        "embed/multi" => "multi",
        "query/transform" => "transform",
        m => m.split('/').next().unwrap_or(m),
    }
}

/// Violations collected while a check runs; the runner attributes them to checks at the end.
pub(crate) type Sink = Arc<Mutex<Vec<Violation>>>;

/// What every connection of a run shares.
#[derive(Clone)]
pub(crate) struct Env {
    pub target: Target,
    /// How HTTP clients are built (TLS trust and client certificate).
    pub http: crate::tls::HttpSetup,
    pub timeout: Duration,
    pub schemas: Option<Arc<Schemas>>,
    pub sink: Sink,
    /// Every `429` an HTTP request met during the run, with its `Retry-After`.
    pub throttles: crate::transport::Throttles,
}

impl Env {
    /// Records a violation against the running check.
    pub(crate) fn violation(&self, msg: impl Into<String>) {
        self.record(Violation::new(msg));
    }

    /// Records a structured violation against the running check.
    pub(crate) fn record(&self, v: Violation) {
        if let Ok(mut s) = self.sink.lock() {
            s.push(v);
        }
    }

    /// Takes the violations recorded since the last call.
    pub(crate) fn take_violations(&self) -> Vec<Violation> {
        self.sink.lock().map(|mut s| std::mem::take(&mut *s)).unwrap_or_default()
    }
}
