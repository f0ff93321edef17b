//! One verdict per defect. After the run, every protocol violation (a schema violation, an
//! answered notification, …) is attributed to one check: the MUST check that owns that kind of
//! defect (the checks named after the method whose result broke the schema, the `id.` checks
//! for an id echoed with another type, …), else the first MUST check that saw it. That check fails; every other check that saw the same violation points to it
//! (`SEE`) instead of failing again, and a SHOULD or MAY check never fails because of one. Two
//! checks that sent the very same request share one verdict: the deeper check (the higher
//! level, else the later one) keeps it, the other points to it.

use std::collections::HashMap;

use crate::conn::Violation;
use crate::record::{Entry, missed};
use crate::report::{CheckResult, Status, Strength, truncate};

/// Turns the records of a run into its results.
pub(crate) fn attribute(entries: Vec<Entry>) -> Vec<CheckResult> {
    let owners = owners(&entries);
    let mut out: Vec<CheckResult> = entries.iter().enumerate().map(|(i, e)| judge(i, e, &owners, &entries)).collect();
    fold_shared_requests(&entries, &mut out);
    out
}

/// The owner of each violation key: the index of the check that reports it.
fn owners(entries: &[Entry]) -> HashMap<String, usize> {
    let mut owners = HashMap::new();
    let mut decided: Vec<&str> = Vec::new();
    for v in entries.iter().flat_map(|e| &e.violations) {
        if decided.contains(&v.key.as_str()) {
            continue;
        }
        decided.push(&v.key);
        let musts: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.meta.basis.keyword.strength() == Strength::Must)
            .filter(|(_, e)| e.violations.iter().any(|w| w.key == v.key))
            .map(|(i, _)| i)
            .collect();
        let named = v
            .owner
            .as_deref()
            .and_then(|prefix| musts.iter().copied().find(|i| entries[*i].meta.id.starts_with(prefix)));
        if let Some(owner) = named.or_else(|| musts.first().copied()) {
            owners.insert(v.key.clone(), owner);
        }
    }
    owners
}

/// One check's result: its own verdict, plus the violations it owns, plus a pointer to the
/// check that owns the others it saw.
fn judge(i: usize, e: &Entry, owners: &HashMap<String, usize>, entries: &[Entry]) -> CheckResult {
    let mut status = e.status;
    let mut detail = e.detail.clone();
    let mut see = None;
    let seen = distinct(&e.violations);
    let own: Vec<&Violation> = seen.iter().copied().filter(|v| owners.get(&v.key) == Some(&i)).collect();
    let orphans: Vec<&Violation> = seen.iter().copied().filter(|v| !owners.contains_key(&v.key)).collect();
    let elsewhere: Vec<&Violation> =
        seen.iter().copied().filter(|v| owners.get(&v.key).is_some_and(|o| *o != i)).collect();
    if !own.is_empty() {
        let text = summarize(&own);
        if status == Status::Fail {
            detail = format!("{detail}; also: {text}");
        } else {
            status = Status::Fail;
            detail = text;
        }
    }
    if !orphans.is_empty() {
        // Seen by SHOULD or MAY checks only: reported at their strength, never as a FAIL.
        let text = summarize(&orphans);
        if matches!(status, Status::Pass | Status::Skip) {
            status = missed(e.meta.basis.keyword.strength());
            detail = text;
        } else {
            detail = format!("{detail}; also: {text}");
        }
    }
    if own.is_empty()
        && let Some(first) = elsewhere.first()
        && let Some(o) = owners.get(&first.key)
    {
        see = Some(entries[*o].meta.id);
        detail = match status {
            Status::Pass | Status::Skip => {
                format!("its answer has the defect reported there ({})", summarize(&elsewhere))
            }
            _ => format!("{detail} (its answer has the defect reported there)"),
        };
        status = Status::See;
    }
    let basis = e.meta.basis;
    CheckResult {
        id: e.meta.id,
        level: e.meta.level,
        name: e.meta.name,
        section: basis.section,
        strength: basis.keyword.strength(),
        basis,
        status,
        detail,
        see,
    }
}

/// The violations of one check, each defect once.
fn distinct(vs: &[Violation]) -> Vec<&Violation> {
    let mut out: Vec<&Violation> = Vec::new();
    for v in vs {
        if !out.iter().any(|o| o.key == v.key) {
            out.push(v);
        }
    }
    out
}

fn summarize(vs: &[&Violation]) -> String {
    let mut text = vs.iter().take(3).map(|v| truncate(&v.text, 300)).collect::<Vec<_>>().join("; ");
    if vs.len() > 3 {
        text.push_str(&format!("; and {} more", vs.len() - 3));
    }
    text
}

/// Checks that reused another check's answer share its verdict: the deeper one keeps it.
fn fold_shared_requests(entries: &[Entry], out: &mut [CheckResult]) {
    for (a, e) in entries.iter().enumerate() {
        let Some(b) = e.shares.and_then(|id| out.iter().position(|c| c.id == id)) else { continue };
        let (owner, other) = if out[a].level >= out[b].level { (a, b) } else { (b, a) };
        // The other may already point elsewhere for a violation its answer carried: the shared
        // request is the closer cause.
        let same = matches!(out[other].status, Status::See) || out[other].status == out[owner].status;
        if same && matches!(out[owner].status, Status::Fail | Status::Warn | Status::Info) {
            out[other].status = Status::See;
            out[other].see = Some(out[owner].id);
            out[other].detail = format!("the same request, answered once: {}", entries[other].detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Meta;
    use crate::report::{Keyword, Level};

    fn entry(id: &'static str, level: Level, keyword: Keyword, status: Status, violations: &[Violation]) -> Entry {
        let basis = crate::report::Basis { section: "§0", keyword, quote: "q" };
        Entry {
            meta: Meta { level, id, name: id, basis },
            status,
            detail: String::new(),
            violations: violations.to_vec(),
            shares: None,
        }
    }

    #[test]
    fn one_violation_fails_the_check_named_after_its_method_and_no_other() {
        let shape = Violation::of_result("rerank", "/required|/result", "schema (rerank result): scores is required");
        let out = attribute(vec![
            entry("tolerance.params", Level::L0, Keyword::Must, Status::Pass, std::slice::from_ref(&shape)),
            entry("rerank.scores", Level::L2, Keyword::Must, Status::Fail, std::slice::from_ref(&shape)),
            entry("rerank.documents-synonym", Level::L2, Keyword::Interop, Status::Info, std::slice::from_ref(&shape)),
        ]);
        let got: Vec<(Status, Option<&str>)> = out.iter().map(|c| (c.status, c.see)).collect();
        assert_eq!(
            got,
            [(Status::See, Some("rerank.scores")), (Status::Fail, None), (Status::See, Some("rerank.scores"))]
        );
    }

    #[test]
    fn a_violation_seen_only_by_should_or_may_checks_never_fails() {
        let v = Violation::new("a response with id 7, which no request carried");
        let out = attribute(vec![
            entry("a", Level::L1, Keyword::Should, Status::Pass, std::slice::from_ref(&v)),
            entry("b", Level::L1, Keyword::May, Status::Pass, std::slice::from_ref(&v)),
        ]);
        assert_eq!(out.iter().map(|c| c.status).collect::<Vec<_>>(), [Status::Warn, Status::Info]);
    }

    #[test]
    fn checks_sharing_a_request_share_one_verdict_owned_by_the_deeper() {
        let mut deep = entry("rerank.method-unadvertised", Level::L2, Keyword::Must, Status::Fail, &[]);
        deep.shares = Some("option.unsupported");
        let out = attribute(vec![entry("option.unsupported", Level::L0, Keyword::Must, Status::Fail, &[]), deep]);
        assert_eq!((out[0].status, out[0].see), (Status::See, Some("rerank.method-unadvertised")));
        assert_eq!(out[1].status, Status::Fail);
        // The shallow check saw the answer's schema violation (owned by rerank.scores): the
        // shared request is still the closer cause.
        let shape = Violation::of_result("rerank", "/required|/result", "schema (rerank result): scores is required");
        let mut deep = entry("rerank.method-unadvertised", Level::L2, Keyword::Must, Status::Fail, &[]);
        deep.shares = Some("option.unsupported");
        let out = attribute(vec![
            entry("option.unsupported", Level::L0, Keyword::Must, Status::Fail, std::slice::from_ref(&shape)),
            entry("rerank.scores", Level::L2, Keyword::Must, Status::Fail, std::slice::from_ref(&shape)),
            deep,
        ]);
        assert_eq!(out[0].see, Some("rerank.method-unadvertised"));
    }

    #[test]
    fn digits_do_not_split_a_defect() {
        assert_eq!(Violation::new("id 12 answered twice").key, Violation::new("id 7 answered twice").key);
    }
}
