//! Recording what a check concluded: its catalogue entry, its own verdict mapped through the
//! keyword of the sentence it rests on (a missed SHOULD is a warning, a missed MAY information),
//! the protocol violations the connection observed while it ran, and the check whose answer it
//! reused. [`crate::attribution`] turns the records into results once every check has run.

use serde_json::Value;

use crate::config::SweepOptions;
use crate::conn::{Env, Violation};
use crate::report::{Basis, Level, Status, Strength};
use crate::sweep::Spend;
use crate::verdict::{Outcome, Res};

/// Everything a run accumulates.
pub(crate) struct Ctx {
    pub env: Env,
    limit: Level,
    /// `--query`: the broad query to use instead of trying a few.
    pub query: Option<String>,
    entries: Vec<Entry>,
    pub server: Option<Value>,
    pub declared: Option<String>,
    /// Set by the runner when the check about to be recorded reused another check's answer.
    pub shared: Option<&'static str>,
    /// The malformed-params sweep's settings and what it has spent ([`crate::sweep`]).
    pub sweep: Spend,
}

/// One check as it ran, before the run's violations are attributed.
pub(crate) struct Entry {
    pub meta: Meta,
    /// Its own verdict, already mapped through its strength.
    pub status: Status,
    pub detail: String,
    /// What the connection saw broken while it ran.
    pub violations: Vec<Violation>,
    /// The check whose answer it reused (the same request).
    pub shares: Option<&'static str>,
}

impl Ctx {
    pub(crate) fn new(env: Env, limit: Level, query: Option<String>, sweep: SweepOptions) -> Self {
        let sweep = Spend::new(sweep);
        Ctx { env, limit, query, entries: Vec::new(), server: None, declared: None, shared: None, sweep }
    }

    /// Whether the check `id` ran and failed on its own (before attribution).
    pub(crate) fn failed(&self, id: &str) -> bool {
        self.entries.iter().any(|e| e.meta.id == id && e.status == Status::Fail)
    }

    /// Whether checks of `level` run.
    pub(crate) fn wants(&self, level: Level) -> bool {
        level <= self.limit
    }

    /// Records a check with the violations observed since the previous one.
    pub(crate) fn record(&mut self, meta: Meta, outcome: Res) {
        let violations = self.env.take_violations();
        let (status, detail) = own_verdict(meta.basis.keyword.strength(), outcome);
        let shares = self.shared.take();
        self.entries.push(Entry { meta, status, detail, violations, shares });
    }

    /// The checks as they ran, in order; `attribution::attribute` turns them into results.
    pub(crate) fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
}

/// A check's own verdict: FAIL only for a MUST; a SHOULD that failed is a WARN, a MAY (or an
/// interop probe) that failed or warned is an INFO.
pub(crate) fn own_verdict(strength: Strength, outcome: Res) -> (Status, String) {
    match outcome {
        Ok(Outcome::Pass(d)) => (Status::Pass, d),
        Ok(Outcome::Skip(d)) => (Status::Skip, d),
        Ok(Outcome::Fail(d)) | Err(d) => (missed(strength), d),
        Ok(Outcome::Warn(d)) if strength == Strength::May => (Status::Info, d),
        Ok(Outcome::Warn(d)) => (Status::Warn, d),
    }
}

/// The status of a missed requirement of this strength.
pub(crate) fn missed(strength: Strength) -> Status {
    match strength {
        Strength::Must => Status::Fail,
        Strength::Should => Status::Warn,
        Strength::May => Status::Info,
    }
}

/// What the catalogue says about one check.
pub(crate) struct Meta {
    pub level: Level,
    pub id: &'static str,
    pub name: &'static str,
    /// The spec sentence it rests on ([`crate::checks::basis`]).
    pub basis: Basis,
}

/// A `'static` copy of a check id or name made at run time (the sweep's findings are named after
/// the params path they concern). Each distinct text is leaked once and reused: the paths come
/// from the schema, so the set is small and bounded.
pub(crate) fn intern(text: String) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let Ok(mut seen) = SEEN.get_or_init(|| Mutex::new(HashSet::new())).lock() else {
        return Box::leak(text.into_boxed_str());
    };
    if let Some(s) = seen.get(text.as_str()) {
        return s;
    }
    let s: &'static str = Box::leak(text.into_boxed_str());
    seen.insert(s);
    s
}
