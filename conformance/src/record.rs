//! Recording what a check concluded: its catalogue entry, its strength (a failed SHOULD is a
//! warning) and every protocol violation the connection observed while it ran.

use serde_json::Value;

use crate::conn::Env;
use crate::report::{CheckResult, Level, Status, Strength, truncate};
use crate::verdict::{Outcome, Res};

/// Everything a run accumulates.
pub(crate) struct Ctx {
    pub env: Env,
    limit: Level,
    /// `--query`: the broad query to use instead of trying a few.
    pub query: Option<String>,
    pub results: Vec<CheckResult>,
    pub server: Option<Value>,
    pub declared: Option<String>,
}

impl Ctx {
    pub(crate) fn new(env: Env, limit: Level, query: Option<String>) -> Self {
        Ctx { env, limit, query, results: Vec::new(), server: None, declared: None }
    }

    /// Whether checks of `level` run.
    pub(crate) fn wants(&self, level: Level) -> bool {
        level <= self.limit
    }

    /// Records a check. A SHOULD check that fails becomes a warning; any protocol violation
    /// observed while it ran (envelope, schema, an answered notification: MUSTs of their own) is
    /// a FAIL whatever the check's strength.
    pub(crate) fn record(&mut self, check: Meta, outcome: Res) {
        let Meta { level, strength, id, section, name } = check;
        let violations: Vec<String> = self.env.sink.lock().map(|mut s| std::mem::take(&mut *s)).unwrap_or_default();
        let (mut status, mut detail) = match outcome {
            Ok(Outcome::Pass(d)) => (Status::Pass, d),
            Ok(Outcome::Fail(d)) | Err(d) if strength == Strength::Should => (Status::Warn, d),
            Ok(Outcome::Fail(d)) | Err(d) => (Status::Fail, d),
            Ok(Outcome::Warn(d)) => (Status::Warn, d),
            Ok(Outcome::Skip(d)) => (Status::Skip, d),
        };
        if !violations.is_empty() {
            let mut uniq: Vec<&String> = Vec::new();
            for v in &violations {
                if !uniq.contains(&v) {
                    uniq.push(v);
                }
            }
            let mut text = uniq.iter().take(3).map(|v| truncate(v, 300)).collect::<Vec<_>>().join("; ");
            if uniq.len() > 3 {
                text.push_str(&format!("; and {} more", uniq.len() - 3));
            }
            if status == Status::Fail {
                detail = format!("{detail}; also: {text}");
            } else {
                status = Status::Fail;
                detail = text;
            }
        }
        self.results.push(CheckResult { id, level, name, section, strength, status, detail });
    }
}

/// What the catalogue says about one check.
pub(crate) struct Meta {
    pub level: Level,
    pub strength: Strength,
    pub id: &'static str,
    pub section: &'static str,
    pub name: &'static str,
}

/// `MUST` / `SHOULD` in the catalogue lines.
pub(crate) const MUST: Strength = Strength::Must;
/// See [`MUST`].
pub(crate) const SHOULD: Strength = Strength::Should;

/// The catalogue entry of a check.
macro_rules! meta {
    ($level:ident, $strength:ident, $id:literal, $section:literal, $name:literal) => {
        Meta { level: Level::$level, strength: $strength, id: $id, section: $section, name: $name }
    };
}
pub(crate) use meta;

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::config::Target;
    use crate::verdict::{fail, pass, warn};

    fn ctx() -> Ctx {
        let target = Target::Stdio { program: "unused".into(), args: Vec::new() };
        let env =
            Env { target, timeout: Duration::from_secs(1), schemas: None, sink: Arc::new(Mutex::new(Vec::new())) };
        Ctx::new(env, Level::L2, None)
    }

    #[test]
    fn a_failed_should_is_a_warning_but_a_protocol_violation_still_fails() {
        let mut cx = ctx();
        cx.record(meta!(L1, SHOULD, "a", "§0", "a"), fail("missed"));
        cx.record(meta!(L1, MUST, "b", "§0", "b"), fail("broken"));
        cx.record(meta!(L1, MUST, "c", "§0", "c"), warn("no error.data.field"));
        cx.env.violation("schema: bad frame");
        cx.record(meta!(L1, SHOULD, "d", "§0", "d"), pass());
        let got: Vec<(Status, Strength)> = cx.results.iter().map(|r| (r.status, r.strength)).collect();
        assert_eq!(
            got,
            [
                (Status::Warn, Strength::Should),
                (Status::Fail, Strength::Must),
                (Status::Warn, Strength::Must),
                (Status::Fail, Strength::Should),
            ]
        );
    }
}
