//! The report as JUnit XML (`--junit FILE`), the format CI systems show natively: one
//! `<testsuite>` per level, and one per method the malformed-params sweep probed
//! (`rcp-conformance.sweep.<method>`), one `<testcase>` per check. A FAIL is a `<failure>`; a missed SHOULD
//! (WARN), a MAY or interop probe not done (INFO), a check whose defect another check reports
//! (SEE) and a check that does not apply (SKIP) are `<skipped>` with the reason as message, so
//! each defect fails exactly one test case.

use std::fmt::Write as _;

use super::{CheckResult, Level, Report, Status, sweep_method};

impl Report {
    /// The report as JUnit XML.
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let n = self.counts();
        let skipped = self.checks.len() - n.passed - n.failed;
        let _ = writeln!(
            out,
            "<testsuites name=\"rcp-conformance\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{skipped}\">",
            self.checks.len(),
            n.failed
        );
        for level in Level::ALL {
            let checks: Vec<&CheckResult> =
                self.checks.iter().filter(|c| c.level == level && sweep_method(c.id).is_none()).collect();
            if !checks.is_empty() {
                suite(
                    &mut out,
                    &format!("rcp-conformance {level}"),
                    &format!("rcp-conformance.{level}"),
                    &checks,
                    self,
                );
            }
        }
        // The malformed-params sweep, one suite per method.
        for (method, checks) in self.sweep_findings() {
            let (name, class) = (format!("rcp-conformance sweep {method}"), format!("rcp-conformance.sweep.{method}"));
            suite(&mut out, &name, &class, &checks, self);
        }
        out.push_str("</testsuites>\n");
        out
    }
}

fn suite(out: &mut String, name: &str, class: &str, checks: &[&CheckResult], report: &Report) {
    let failures = checks.iter().filter(|c| c.status == Status::Fail).count();
    let skipped = checks.iter().filter(|c| !matches!(c.status, Status::Pass | Status::Fail)).count();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">",
        escape(name),
        checks.len()
    );
    let _ = writeln!(out, "    <properties>");
    let _ = writeln!(out, "      <property name=\"transport\" value=\"{}\"/>", report.transport);
    let certified = report.certified().map_or("NONE", Level::as_str);
    let _ = writeln!(out, "      <property name=\"certifiedLevel\" value=\"{certified}\"/>");
    let declared = report.declared.as_deref().unwrap_or("");
    let _ = writeln!(out, "      <property name=\"declaredLevel\" value=\"{}\"/>", escape(declared));
    let _ = writeln!(out, "    </properties>");
    for c in checks {
        case(out, class, c);
    }
    out.push_str("  </testsuite>\n");
}

fn case(out: &mut String, class: &str, c: &CheckResult) {
    let _ = write!(out, "    <testcase classname=\"{}\" name=\"{}\"", escape(class), escape(c.id));
    let basis = format!("{} {}: \"{}\"", c.basis.section, c.basis.keyword.as_str(), c.basis.quote);
    let body = match c.status {
        Status::Pass => None,
        Status::Fail => Some(format!(
            "<failure message=\"{}\" type=\"{}\">{}</failure>",
            escape(&c.detail),
            c.basis.keyword.as_str(),
            escape(&format!("{}\n{basis}", c.name))
        )),
        Status::See => {
            let owner = c.see.unwrap_or("another check");
            Some(format!("<skipped message=\"{}\"/>", escape(&format!("see {owner}: {}", c.detail))))
        }
        Status::Warn | Status::Info => Some(format!(
            "<skipped message=\"{}\"/>",
            escape(&format!("{} not met: {} ({basis})", c.strength.as_str(), c.detail))
        )),
        Status::Skip => Some(format!("<skipped message=\"{}\"/>", escape(&c.detail))),
    };
    match body {
        Some(b) => {
            let _ = writeln!(out, ">\n      {b}\n    </testcase>");
        }
        None => out.push_str("/>\n"),
    }
}

/// Escapes text for an XML attribute or element, dropping characters XML 1.0 cannot carry.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escaping_keeps_the_xml_well_formed() {
        assert_eq!(escape("a<b & \"c\"\n'd'\u{1}"), "a&lt;b &amp; &quot;c&quot;&#10;&apos;d&apos;");
    }
}
