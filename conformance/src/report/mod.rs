//! Check results, certification (§14.5) and the report formats: text for people ([`text`]),
//! JSON ([`json`]) and JUnit XML ([`junit`]) for CI systems.

mod json;
mod junit;
mod text;

pub use json::JSON_SCHEMA_VERSION;

use std::fmt;

use serde_json::Value;

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
    /// MAY / OPTIONAL, or an interop probe of something the spec does not define: a miss is
    /// information only.
    May,
}

impl Strength {
    /// `"MUST"`, `"SHOULD"` or `"MAY"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strength::Must => "MUST",
            Strength::Should => "SHOULD",
            Strength::May => "MAY",
        }
    }
}

/// The RFC 2119 keyword of the sentence a check rests on, as the spec writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    /// **MUST**
    Must,
    /// **MUST NOT**
    MustNot,
    /// **REQUIRED**
    Required,
    /// **SHOULD**
    Should,
    /// **SHOULD NOT**
    ShouldNot,
    /// **RECOMMENDED**
    Recommended,
    /// **MAY**
    May,
    /// No keyword: a probe of what other implementations do (interop), never a requirement.
    Interop,
}

impl Keyword {
    /// The keyword as the spec writes it (`"MUST NOT"`), or `"none (interop probe)"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Keyword::Must => "MUST",
            Keyword::MustNot => "MUST NOT",
            Keyword::Required => "REQUIRED",
            Keyword::Should => "SHOULD",
            Keyword::ShouldNot => "SHOULD NOT",
            Keyword::Recommended => "RECOMMENDED",
            Keyword::May => "MAY",
            Keyword::Interop => "none (interop probe)",
        }
    }

    /// What a miss of this keyword costs: FAIL (MUST), WARN (SHOULD) or INFO (MAY, interop).
    pub fn strength(self) -> Strength {
        match self {
            Keyword::Must | Keyword::MustNot | Keyword::Required => Strength::Must,
            Keyword::Should | Keyword::ShouldNot | Keyword::Recommended => Strength::Should,
            Keyword::May | Keyword::Interop => Strength::May,
        }
    }
}

/// The normative basis of a check: the section, the spec's own sentence (short, quoted) and its
/// keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Basis {
    /// The section(s), e.g. `§11`.
    pub section: &'static str,
    /// The RFC 2119 keyword of the sentence.
    pub keyword: Keyword,
    /// The sentence, quoted from the spec (shortened with `…`).
    pub quote: &'static str,
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
    /// A MAY or an interop probe the server does not do: information, never a failure.
    Info,
    /// The defect behind this check's outcome is reported by another check ([`CheckResult::see`]):
    /// the same request, or the same protocol violation. It is counted once, there; for
    /// certification a MUST check here fails its level when that check failed.
    See,
    /// Not applicable (capability not advertised, transport-specific).
    Skip,
}

impl Status {
    /// `"PASS"`, `"FAIL"`, `"WARN"`, `"INFO"`, `"SEE"` or `"SKIP"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::Info => "INFO",
            Status::See => "SEE",
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
    /// The spec section(s) it enforces, e.g. `§11` (the section of [`CheckResult::basis`]).
    pub section: &'static str,
    /// Whether the sentence it enforces is a MUST, a SHOULD or a MAY.
    pub strength: Strength,
    /// The spec sentence the check rests on.
    pub basis: Basis,
    /// The verdict.
    pub status: Status,
    /// Why it failed or was skipped, or a note on a pass (may be empty).
    pub detail: String,
    /// With [`Status::See`]: the check that reports the defect behind this one.
    pub see: Option<&'static str>,
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

/// How many checks ended with each status.
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
    /// MAYs and interop probes the server does not do.
    pub infos: usize,
    /// Checks whose defect another check reports ([`Status::See`]).
    pub see: usize,
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
                Status::Info => c.infos += 1,
                Status::See => c.see += 1,
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
                any_pass |= matches!(c.status, Status::Pass | Status::Warn | Status::Info)
                    || (c.status == Status::See && !self.blocks(c));
                any_fail |= c.status == Status::Fail || self.blocks(c);
            }
            if any_fail || !any_pass {
                break;
            }
            certified = Some(level);
        }
        certified
    }

    /// Whether a [`Status::See`] check fails its level: it is a MUST and the check it points
    /// to failed.
    fn blocks(&self, c: &CheckResult) -> bool {
        c.status == Status::See
            && c.strength == Strength::Must
            && c.see.and_then(|id| self.check(id)).is_some_and(|o| o.status == Status::Fail)
    }

    /// The failures grouped by root cause: each FAIL (or WARN) that other checks point to with
    /// [`Status::See`], with those checks, in report order. A failure nobody points to is a
    /// group of one.
    pub fn root_causes(&self) -> Vec<(&CheckResult, Vec<&CheckResult>)> {
        self.checks
            .iter()
            .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
            .map(|c| (c, self.checks.iter().filter(|o| o.see == Some(c.id)).collect::<Vec<_>>()))
            .filter(|(c, followers)| c.status == Status::Fail || !followers.is_empty())
            .collect()
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

    /// The malformed-params sweep's results (§14.1) grouped by method, methods in the order
    /// they were swept: each method with its checks (`sweep.<method>`, the summary, then one
    /// `sweep.<method>.<path>` per defective path).
    pub fn sweep_findings(&self) -> Vec<(&str, Vec<&CheckResult>)> {
        let mut groups: Vec<(&str, Vec<&CheckResult>)> = Vec::new();
        for c in &self.checks {
            let Some(method) = sweep_method(c.id) else { continue };
            match groups.iter_mut().find(|(m, _)| *m == method) {
                Some((_, cs)) => cs.push(c),
                None => groups.push((method, vec![c])),
            }
        }
        groups
    }

    /// The check with this id, if it ran.
    pub fn check(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }
}

/// The method a sweep check belongs to: `retrieve` for `sweep.retrieve` and
/// `sweep.retrieve.filter.field`; `None` for any other check.
pub(crate) fn sweep_method(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("sweep.")?;
    Some(rest.split('.').next().unwrap_or(rest))
}

/// The params path of a sweep finding (`filter.field` for `sweep.retrieve.filter.field`);
/// `None` for a summary or any other check.
pub(crate) fn sweep_path(id: &str) -> Option<&str> {
    id.strip_prefix("sweep.")?.split_once('.').map(|(_, path)| path)
}

pub(crate) fn one_line(s: &str) -> String {
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
            basis: Basis { section: "§0", keyword: Keyword::Must, quote: "" },
            status,
            detail: String::new(),
            see: None,
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
        assert_eq!(r.counts(), Counts { passed: 1, failed: 0, skipped: 1, warnings: 1, infos: 0, see: 0 });
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

    #[test]
    fn a_see_check_fails_its_level_only_when_it_points_to_a_failure() {
        use Level::*;
        let mut owner = check(L2, Status::Fail);
        owner.id = "deep";
        let mut follower = check(L0, Status::See);
        follower.see = Some("deep");
        let r = report(vec![follower.clone(), check(L1, Status::Pass), owner.clone()], "L0", L2);
        assert_eq!(r.certified(), None, "the shared defect fails the follower's level");
        assert_eq!(r.counts().failed, 1);
        assert_eq!(r.counts().see, 1);
        let causes = r.root_causes();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].0.id, "deep");
        assert_eq!(causes[0].1.len(), 1);
        assert!(r.render_text().contains("- 2 checks (deep) failed because"), "{}", r.render_text());
        owner.status = Status::Warn;
        let r = report(vec![follower, check(L1, Status::Pass), owner], "L1", L2);
        assert_eq!(r.certified(), Some(L2), "a shared warning blocks nothing");
    }

    #[test]
    fn junit_has_one_testcase_per_check_and_fails_only_fails() {
        use Level::*;
        let mut warned = check(L1, Status::Warn);
        warned.strength = Strength::Should;
        warned.id = "w";
        let mut failed = check(L0, Status::Fail);
        failed.id = "f";
        failed.detail = "bad <frame> & \"quote\"".into();
        let r = report(vec![failed, check(L0, Status::Pass), warned, check(L2, Status::Skip)], "L1", L2);
        let xml = r.to_junit();
        assert_eq!(xml.matches("<testcase ").count(), 4, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
        assert_eq!(xml.matches("<skipped ").count(), 2, "{xml}");
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("bad &lt;frame&gt; &amp; &quot;quote&quot;"), "{xml}");
        assert!(xml.contains("SHOULD not met"), "{xml}");
    }
}
