//! The report for people: one line per check, the failures grouped by root cause, the counts,
//! the certified level and the verdict on the declared level.

use super::{CheckResult, Level, Report, Status, Strength, one_line, sweep_path};

impl Report {
    /// The human-readable report. One line per check (`[L1] PASS  name (§…)`; FAIL, WARN, INFO,
    /// SEE and SKIP come with a reason, and a FAIL/WARN/INFO with the spec sentence it rests
    /// on), then the failures by root cause (when any), `N passed, N failed, N skipped`, the
    /// warnings/infos/see counts on their own lines, `CERTIFIED LEVEL: …` and the declaration.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            out.push_str(&check_line(c));
            out.push('\n');
        }
        out.push_str(&self.root_cause_text());
        out.push_str(&self.sweep_text());
        let n = self.counts();
        out.push_str(&format!("{} passed, {} failed, {} skipped\n", n.passed, n.failed, n.skipped));
        if n.see > 0 {
            let (checks, share) = if n.see == 1 { ("check", "shares") } else { ("checks", "share") };
            out.push_str(&format!(
                "{} {checks} {share} a defect reported by another check (SEE; each defect is counted once)\n",
                n.see
            ));
        }
        if n.warnings > 0 {
            out.push_str(&format!(
                "{} warnings (SHOULDs not met; they do not affect the certified level)\n",
                n.warnings
            ));
        }
        if n.infos > 0 {
            out.push_str(&format!("{} infos (MAYs and interop probes the server does not do)\n", n.infos));
        }
        out.push_str(&format!("CERTIFIED LEVEL: {}\n", self.certified().map_or("NONE", Level::as_str)));
        out.push_str(&self.declaration_line());
        out
    }

    fn root_cause_text(&self) -> String {
        let groups = self.root_causes();
        if groups.is_empty() {
            return String::new();
        }
        let mut out = String::from("Failures by root cause:\n");
        for (c, followers) in groups {
            let n = 1 + followers.len();
            let checks = if n == 1 { "1 check".to_owned() } else { format!("{n} checks") };
            out.push_str(&format!("- {checks} ({}) {} because: {}\n", c.id, verb(c.status), one_line(&c.detail)));
            for f in followers {
                out.push_str(&format!("    also {}\n", f.id));
            }
        }
        out
    }

    /// The malformed-params sweep by method: each method's summary, then its defective paths.
    fn sweep_text(&self) -> String {
        let groups = self.sweep_findings();
        if groups.is_empty() {
            return String::new();
        }
        let mut out = String::from("Malformed-params sweep by method (§14.1):\n");
        for (method, checks) in groups {
            for c in checks {
                match sweep_path(c.id) {
                    None => {
                        let status = c.status.as_str();
                        out.push_str(&format!("- {method}: {status}  {}\n", one_line(&c.detail)));
                    }
                    Some(path) => {
                        let status = c.status.as_str();
                        let detail = c.detail.strip_prefix(&format!("{path}: ")).unwrap_or(&c.detail);
                        out.push_str(&format!("    {status}  {path}: {}\n", one_line(detail)));
                    }
                }
            }
        }
        out
    }

    fn declaration_line(&self) -> String {
        let certified = self.certified().map_or("NONE", Level::as_str);
        match (&self.declared, self.declaration_honest()) {
            (None, _) => "declared _meta.conformance: missing — a server MUST state its level (§14)\n".to_owned(),
            (Some(d), Some(true)) => format!("declared _meta.conformance='{d}' — consistent (certified {certified})\n"),
            (Some(d), None) => {
                format!("declared _meta.conformance='{d}' — not verified (checks limited to {})\n", self.level_limit)
            }
            (Some(d), Some(false)) if self.declared_level().is_none() => {
                format!("declared _meta.conformance='{d}' — INVALID (expected L0, L1 or L2)\n")
            }
            (Some(d), Some(false)) => format!("declared _meta.conformance='{d}' — OVERCLAIM (certified {certified})\n"),
        }
    }
}

fn verb(status: Status) -> &'static str {
    if status == Status::Fail { "failed" } else { "warned" }
}

/// `[L1] FAIL  name (§7.7) — reason [MUST: "sentence"]`.
fn check_line(c: &CheckResult) -> String {
    let tag = match c.strength {
        Strength::Must => "",
        Strength::Should => " [SHOULD]",
        Strength::May => " [MAY]",
    };
    let mut line = format!("[{}] {:<4}  {} ({}){tag}", c.level, c.status.as_str(), c.name, c.section);
    if c.status == Status::See
        && let Some(id) = c.see
    {
        line.push_str(&format!(" — see {id}"));
        if !c.detail.is_empty() {
            line.push_str(&format!(": {}", one_line(&c.detail)));
        }
        return line;
    }
    if !c.detail.is_empty() && c.status != Status::Pass {
        line.push_str(" — ");
        line.push_str(&one_line(&c.detail));
    }
    if matches!(c.status, Status::Fail | Status::Warn | Status::Info) && !c.basis.quote.is_empty() {
        line.push_str(&format!(" [{} {}: \"{}\"]", c.basis.section, c.basis.keyword.as_str(), c.basis.quote));
    }
    line
}
