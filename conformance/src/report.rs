//! Check results, certification (§14.5) and the two report formats (text for people, JSON for CI).

use std::fmt;

use serde_json::{Value, json};

/// A conformance level (§14): L0 base, L1 retrieval, L2 SOTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// §14.1: base protocol, lifecycle and envelope (REQUIRED of every server).
    L0,
    /// §14.2: retrieval behaviour.
    L1,
    /// §14.3: SOTA features.
    L2,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 3] = [Level::L0, Level::L1, Level::L2];

    /// `"L0"`, `"L1"` or `"L2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::L0 => "L0",
            Level::L1 => "L1",
            Level::L2 => "L2",
        }
    }

    /// Parses `"L0"`/`"L1"`/`"L2"` (case-insensitive).
    pub fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_uppercase().as_str() {
            "L0" => Some(Level::L0),
            "L1" => Some(Level::L1),
            "L2" => Some(Level::L2),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::parse(s).ok_or_else(|| format!("'{s}' is not a level (expected L0, L1 or L2)"))
    }
}

/// How binding the spec sentence a check enforces is (RFC 2119 keywords, spec §14.5: only MUSTs
/// decide the certified level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    /// MUST / MUST NOT / REQUIRED: a violation fails the check and blocks certification.
    Must,
    /// SHOULD / SHOULD NOT / RECOMMENDED: a violation is reported as a warning only.
    Should,
}

impl Strength {
    /// `"MUST"` or `"SHOULD"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strength::Must => "MUST",
            Strength::Should => "SHOULD",
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The server did what the spec requires.
    Pass,
    /// The server violated a MUST.
    Fail,
    /// The server met every MUST the check covers but missed a SHOULD (a failed SHOULD check, or
    /// a missing recommended detail such as `error.data.field`, §12.1). Counts as applied and
    /// passed for certification.
    Warn,
    /// Not applicable (capability not advertised, transport-specific) or an interop probe.
    Skip,
}

impl Status {
    /// `"PASS"`, `"FAIL"`, `"WARN"` or `"SKIP"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::Skip => "SKIP",
        }
    }
}

/// One executed check.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// Stable identifier, e.g. `batch.empty`.
    pub id: &'static str,
    /// The level the check belongs to.
    pub level: Level,
    /// What the check verifies, in one line.
    pub name: &'static str,
    /// The spec section(s) it enforces, e.g. `§11`.
    pub section: &'static str,
    /// Whether the sentence it enforces is a MUST or a SHOULD.
    pub strength: Strength,
    /// Pass, fail, warn or skip.
    pub status: Status,
    /// Why it failed or was skipped, or a note on a pass (may be empty).
    pub detail: String,
}

/// The outcome of a whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every check run, in order.
    pub checks: Vec<CheckResult>,
    /// The highest level run (`--level`).
    pub level_limit: Level,
    /// The transport used: `"stdio"` or `"http"`.
    pub transport: &'static str,
    /// `server` from the server's `initialize` result, when one succeeded.
    pub server: Option<Value>,
    /// `_meta.conformance` as the server declared it (raw string), when present.
    pub declared: Option<String>,
}

/// How many checks passed, failed, were skipped or ended with a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that were skipped.
    pub skipped: usize,
    /// Checks that met their MUSTs but missed a SHOULD.
    pub warnings: usize,
}

impl Report {
    /// Counts by status.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.checks {
            match r.status {
                Status::Pass => c.passed += 1,
                Status::Fail => c.failed += 1,
                Status::Skip => c.skipped += 1,
                Status::Warn => c.warnings += 1,
            }
        }
        c
    }

    /// The highest certified level (§14.5): every applicable check at that level and all lower
    /// levels passed (a warning is a pass: SHOULDs never decide the level), and at least one check at each of those levels applied (a level is never
    /// certified vacuously: an embed-only server does not reach L1). `None` if L0 fails.
    pub fn certified(&self) -> Option<Level> {
        let mut certified = None;
        for level in Level::ALL {
            if level > self.level_limit {
                break;
            }
            let at = self.checks.iter().filter(|c| c.level == level);
            let (mut any_pass, mut any_fail) = (false, false);
            for c in at {
                any_pass |= matches!(c.status, Status::Pass | Status::Warn);
                any_fail |= c.status == Status::Fail;
            }
            if any_fail || !any_pass {
                break;
            }
            certified = Some(level);
        }
        certified
    }

    /// The declared level, parsed; `None` when absent or not a level.
    pub fn declared_level(&self) -> Option<Level> {
        self.declared.as_deref().and_then(Level::parse)
    }

    /// Whether the declaration is honest: `Some(true)` when declared ≤ certified, `Some(false)`
    /// on an overclaim or a missing/invalid declaration, `None` when the declared level lies
    /// above `--level` and everything up to the limit passed (it could not be verified).
    pub fn declaration_honest(&self) -> Option<bool> {
        let Some(declared) = self.declared_level() else { return Some(false) };
        let certified = self.certified();
        if certified.is_some_and(|c| declared <= c) {
            return Some(true);
        }
        if declared > self.level_limit && certified == Some(self.level_limit) {
            return None;
        }
        Some(false)
    }

    /// Whether the server passes: no failed check and no overclaim.
    pub fn success(&self) -> bool {
        self.counts().failed == 0 && self.declaration_honest() != Some(false)
    }

    /// The process exit code: 0 on success, 1 on any failed check or overclaim.
    pub fn exit_code(&self) -> i32 {
        if self.success() { 0 } else { 1 }
    }

    /// The check with this id, if it ran.
    pub fn check(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// The human-readable report: one line per check, the counts line, the certified level and
    /// the declaration verdict.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let should = if c.strength == Strength::Should { " [SHOULD]" } else { "" };
            let mut line = format!("[{}] {:<4}  {} ({}){should}", c.level, c.status.as_str(), c.name, c.section);
            if !c.detail.is_empty() && c.status != Status::Pass {
                line.push_str(" — ");
                line.push_str(&one_line(&c.detail));
            }
            out.push_str(&line);
            out.push('\n');
        }
        let n = self.counts();
        out.push_str(&format!("{} passed, {} failed, {} skipped\n", n.passed, n.failed, n.skipped));
        if n.warnings > 0 {
            out.push_str(&format!(
                "{} warnings (SHOULDs not met; they do not affect the certified level)\n",
                n.warnings
            ));
        }
        out.push_str(&format!("CERTIFIED LEVEL: {}\n", self.certified().map_or("NONE", Level::as_str)));
        let certified = self.certified().map_or("NONE", Level::as_str);
        match (&self.declared, self.declaration_honest()) {
            (None, _) => out.push_str("declared _meta.conformance: missing — a server MUST state its level (§14)\n"),
            (Some(d), Some(true)) => {
                out.push_str(&format!("declared _meta.conformance='{d}' — consistent (certified {certified})\n"))
            }
            (Some(d), None) => out.push_str(&format!(
                "declared _meta.conformance='{d}' — not verified (checks limited to {})\n",
                self.level_limit
            )),
            (Some(d), Some(false)) if self.declared_level().is_none() => {
                out.push_str(&format!("declared _meta.conformance='{d}' — INVALID (expected L0, L1 or L2)\n"))
            }
            (Some(d), Some(false)) => {
                out.push_str(&format!("declared _meta.conformance='{d}' — OVERCLAIM (certified {certified})\n"))
            }
        }
        out
    }

    /// The machine-readable report (`--json`).
    pub fn to_json(&self) -> Value {
        let n = self.counts();
        json!({
            "tool": "rcp-conformance",
            "version": env!("CARGO_PKG_VERSION"),
            "transport": self.transport,
            "levelLimit": self.level_limit.as_str(),
            "server": self.server,
            "certifiedLevel": self.certified().map_or("NONE", Level::as_str),
            "declaredLevel": self.declared,
            "declarationHonest": self.declaration_honest(),
            "counts": {"passed": n.passed, "failed": n.failed, "skipped": n.skipped, "warnings": n.warnings},
            "checks": self.checks.iter().map(|c| json!({
                "id": c.id,
                "level": c.level.as_str(),
                "name": c.name,
                "section": c.section,
                "strength": c.strength.as_str(),
                "status": c.status.as_str(),
                "detail": c.detail,
            })).collect::<Vec<_>>(),
        })
    }
}

fn one_line(s: &str) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
    truncate(&flat, 400)
}

/// Shortens `s` to at most `max` characters, marking the cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(level: Level, status: Status) -> CheckResult {
        CheckResult {
            id: "x",
            level,
            name: "x",
            section: "§0",
            strength: Strength::Must,
            status,
            detail: String::new(),
        }
    }

    fn report(checks: Vec<CheckResult>, declared: &str, limit: Level) -> Report {
        Report { checks, level_limit: limit, transport: "stdio", server: None, declared: Some(declared.into()) }
    }

    #[test]
    fn certification_needs_every_lower_level_and_a_pass_at_each() {
        use Level::*;
        use Status::*;
        let r = report(vec![check(L0, Pass), check(L1, Pass), check(L2, Skip)], "L1", L2);
        assert_eq!(r.certified(), Some(L1));
        assert_eq!(r.declaration_honest(), Some(true));
        let r = report(vec![check(L0, Pass), check(L1, Fail), check(L2, Pass)], "L2", L2);
        assert_eq!(r.certified(), Some(L0));
        assert_eq!(r.declaration_honest(), Some(false));
        assert_eq!(r.exit_code(), 1);
        let r = report(vec![check(L0, Fail), check(L1, Pass)], "L0", L2);
        assert_eq!(r.certified(), None);
        // Overclaim with no failed check still fails.
        let r = report(vec![check(L0, Pass), check(L1, Skip), check(L2, Skip)], "L2", L2);
        assert_eq!((r.certified(), r.counts().failed, r.exit_code()), (Some(L0), 0, 1));
        // Declared above --level and everything up to it passed: not verified, not a failure.
        let r = report(vec![check(L0, Pass), check(L1, Pass)], "L2", L1);
        assert_eq!((r.declaration_honest(), r.exit_code()), (None, 0));
    }

    #[test]
    fn warnings_certify_and_are_counted_apart() {
        use Level::*;
        let mut warned = check(L1, Status::Warn);
        warned.strength = Strength::Should;
        let r = report(vec![check(L0, Status::Pass), warned, check(L2, Status::Skip)], "L1", L2);
        assert_eq!(r.certified(), Some(L1), "a SHOULD never decides the level");
        assert_eq!(r.counts(), Counts { passed: 1, failed: 0, skipped: 1, warnings: 1 });
        assert_eq!(r.exit_code(), 0);
        let text = r.render_text();
        assert!(text.contains("\n1 passed, 0 failed, 1 skipped\n1 warnings"), "{text}");
        assert!(text.contains("[L1] WARN  x (§0) [SHOULD]"), "{text}");
        let json = r.to_json();
        assert_eq!(json["counts"]["warnings"], 1);
        assert_eq!(json["checks"][1]["strength"], "SHOULD");
        assert_eq!(json["checks"][0]["strength"], "MUST");
    }

    #[test]
    fn text_report_ends_with_the_parsed_lines() {
        let r = report(vec![check(Level::L0, Status::Pass), check(Level::L1, Status::Skip)], "L1", Level::L2);
        let text = r.render_text();
        assert!(text.contains("\n1 passed, 0 failed, 1 skipped\n"), "{text}");
        assert!(text.contains("CERTIFIED LEVEL: L0\n"));
        assert!(text.contains("OVERCLAIM"));
    }
}
