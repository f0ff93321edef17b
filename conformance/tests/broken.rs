//! Deliberately broken servers (the `broken_engine` example): each defect must be reported as a
//! FAIL of the check that owns it (or as an overclaim) and make the run exit non-zero. The
//! transparent mode is the control: the same engine, unbroken, passes.

mod common;

use rcp_conformance::{Config, Level, Report, Status, run};

async fn against(mode: &str) -> Report {
    let bin = common::own_example("broken_engine");
    let cfg = Config::stdio(bin.to_string_lossy(), [mode]).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    println!("--- {mode}\n{}", report.render_text());
    common::assert_verdicts_follow_keywords(&report);
    report
}

/// Each id must fail, or point (SEE) to a failed check reporting the same defect.
async fn expect_failures(mode: &str, must_fail: &[&str]) -> Report {
    let report = against(mode).await;
    let failed = common::failed(&report);
    for id in must_fail {
        let shared = report.check(id).and_then(|c| c.see).is_some_and(|owner| failed.contains(&owner));
        assert!(failed.contains(id) || shared, "{mode}: expected {id} to fail; failed: {failed:?}");
    }
    assert_ne!(report.exit_code(), 0, "{mode}: the run must exit non-zero");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unbroken_proxy_passes() {
    let report = against("none").await;
    assert_eq!(common::failed(&report), Vec::<&str>::new());
    assert_eq!(report.certified(), Some(Level::L1));
    assert_eq!(report.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_notifications_fails() {
    let report = expect_failures(
        "answer-notifications",
        &[
            "notify.gated",
            "notify.open",
            "notify.unknown-method",
            "notify.cancel-unknown",
            "notify.unknown-namespace",
            "batch.notifications-only",
        ],
    )
    .await;
    assert_eq!(report.certified(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_echoed_as_strings_fail() {
    let report = expect_failures("string-ids", &["id.integer", "id.negative", "id.large"]).await;
    assert_eq!(report.check("id.string").map(|c| c.status), Some(rcp_conformance::Status::Pass));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_k_hits_fail() {
    let report = expect_failures("too-many-hits", &["retrieve.k-ceiling", "retrieve.maxk-clamp"]).await;
    assert_eq!(report.certified(), Some(Level::L0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsorted_hits_fail() {
    expect_failures("unsorted", &["retrieve.scores-descending"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_nonce_fails() {
    expect_failures("no-nonce", &["ping.pre-init.string", "ping.pre-init.number", "ping.post-init"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsolicited_logs_fail() {
    expect_failures("log-spam", &["notify.no-unsolicited"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_l2_while_failing_l1_is_an_overclaim() {
    let report = expect_failures("overclaim", &["retrieve.k-ceiling"]).await;
    assert_eq!(report.declared.as_deref(), Some("L2"));
    assert_eq!(report.certified(), Some(Level::L0));
    assert_eq!(report.declaration_honest(), Some(false));
    assert!(report.render_text().contains("OVERCLAIM"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overclaim_fails_even_when_every_check_passes() {
    let report = against("overclaim-only").await;
    assert_eq!(common::failed(&report), Vec::<&str>::new());
    assert_eq!(report.certified(), Some(Level::L0), "embed only: no retrieval behaviour, so no L1");
    assert_eq!(report.declaration_honest(), Some(false));
    assert_eq!(report.exit_code(), 1);
}

/// The binary itself: text report, the counts line CI parses, and the exit code.
#[test]
fn the_cli_prints_the_summary_and_exits_non_zero_on_failure() {
    let bin = common::own_example("broken_engine");
    let run = |mode: &str, json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rcp-conformance"));
        cmd.args(common::schema_args()).args(["--timeout-ms", "5000"]);
        if json {
            cmd.arg("--json");
        }
        cmd.arg("--").arg(&bin).arg(mode).output().expect("run rcp-conformance")
    };
    let out = run("too-many-hits", false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("[L1] FAIL  never more than k hits")), "{text}");
    let counts = text.lines().find(|l| l.ends_with(" skipped")).expect("counts line");
    let words: Vec<&str> = counts.split(' ').collect();
    assert_eq!((words[1], words[3], words[5]), ("passed,", "failed,", "skipped"), "{counts}");
    assert!(text.contains("\nCERTIFIED LEVEL: L0\n"), "{text}");

    let out = run("none", true);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(v["certifiedLevel"], "L1");
    assert_eq!(v["declaredLevel"], "L1");
    assert_eq!(v["declarationHonest"], true);
    assert_eq!(v["counts"]["failed"], 0);
    let check = &v["checks"][0];
    for key in ["id", "level", "name", "section", "status", "detail"] {
        assert!(check.get(key).is_some(), "check lacks {key}: {check}");
    }

    // Bad usage is exit status 2.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rcp-conformance")).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

/// One defect, one FAIL: a rerank that answers `{"results": [...]}` breaks the schema in every
/// rerank answer, but only the check that owns rerank results fails; every other check that saw
/// such an answer points to it, and the probe for the `documents` synonym stays an INFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_rerank_shape_defect_is_one_failure() {
    let report = against("rerank-results").await;
    let text = report.render_text();
    assert_eq!(common::failed(&report), ["rerank.scores"], "{text}");
    let see: Vec<&str> = report.checks.iter().filter(|c| c.status == Status::See).map(|c| c.id).collect();
    assert!(!see.is_empty(), "no other check saw the defect?\n{text}");
    for c in report.checks.iter().filter(|c| c.status == Status::See) {
        assert_eq!(c.see, Some("rerank.scores"), "{}: {c:?}", c.id);
    }
    let synonym = report.check("rerank.documents-synonym").expect("probe ran");
    assert!(matches!(synonym.status, Status::See | Status::Info), "{synonym:?}");
    let causes = report.root_causes();
    assert_eq!(causes.len(), 1, "{text}");
    assert_eq!(causes[0].1.len(), see.len());
    assert!(text.contains(&format!("- {} checks (rerank.scores) failed because", 1 + see.len())), "{text}");
    // The defect is at L2: L0 and L1 still certify.
    assert_eq!(report.certified(), Some(Level::L1), "{text}");
}

/// Deduplication inside a trajectory is a MAY (§7.7.3): a server advertising `session.dedup`
/// that repeats hits gets one INFO on `session.dedup`, and every other check reads as it does on
/// the unbroken server (the `sessionId` itself is still answered, as the spec requires).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_hits_under_advertised_dedup_are_one_info() {
    let control = against("none").await;
    let report = against("session-repeats").await;
    let text = report.render_text();
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    let dedup = report.check("session.dedup").expect("session.dedup ran");
    assert_eq!(dedup.status, Status::Info, "{text}");
    assert!(dedup.detail.contains("returned") && dedup.detail.contains("again"), "{}", dedup.detail);
    assert_eq!(control.check("session.dedup").map(|c| c.status), Some(Status::Skip));
    let changed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| control.check(c.id).map(|k| k.status) != Some(c.status))
        .map(|c| c.id)
        .collect();
    assert_eq!(changed, ["session.dedup"], "{text}");
    assert_eq!(report.check("session.hint").map(|c| c.status), Some(Status::Pass), "{text}");
    // An INFO counts as passed: the advertised L2 feature applied, and no MUST was broken.
    assert_eq!(report.certified(), Some(Level::L2), "{text}");
    assert_eq!(report.exit_code(), 0, "{text}");
}

/// The `sessionId` is a hint, never a requirement (§7.7.3): refusing it fails, and only the check
/// that owns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_session_id_fails() {
    let report = expect_failures("session-refused", &["session.hint"]).await;
    assert_eq!(common::failed(&report), ["session.hint"], "{}", report.render_text());
}

/// A rewrite the server does not advertise is rejected with -32005, not silently skipped
/// (§7.7: no silent degradation under the default `strict`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_rewrite_fails() {
    let report = expect_failures("rewrite-ignored", &["retrieve.rewrite-unadvertised"]).await;
    assert_eq!(common::failed(&report), ["retrieve.rewrite-unadvertised"], "{}", report.render_text());
}

/// An engine that ignores a valid filter fails `filter.valid`, and only it: the check picks a
/// value that some unfiltered hit does not carry, so ignoring the filter cannot pass by accident.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_filter_fails() {
    let report = expect_failures("filter-ignored", &["filter.valid"]).await;
    assert_eq!(common::failed(&report), ["filter.valid"], "{}", report.render_text());
    let detail = report.check("filter.valid").map(|c| c.detail.clone()).unwrap_or_default();
    assert!(detail.contains("topic"), "{detail}");
}

/// An ignored `minScore` is caught by `retrieve.min-score` (a SHOULD of §14.2, so a warning):
/// its threshold is one an unfiltered hit scores below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_min_score_is_reported() {
    let report = against("min-score-ignored").await;
    let c = report.check("retrieve.min-score").expect("ran");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.detail.contains("scored"), "{}", c.detail);
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{}", report.render_text());
}

/// An engine that cuts a page before it applies `minScore` answers a page short of `k` (or an
/// empty one) that still carries a `nextCursor`: `pagination.min-score` fails, and only it.
/// `tiny_engine`, which applies `minScore` before it pages, passes the same check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cut_before_min_score_fails() {
    let report = expect_failures("min-score-after-paging", &["pagination.min-score"]).await;
    let text = report.render_text();
    assert_eq!(common::failed(&report), ["pagination.min-score"], "{text}");
    let detail = report.check("pagination.min-score").map(|c| c.detail.clone()).unwrap_or_default();
    assert!(detail.contains("yet carries nextCursor"), "{detail}");

    let tiny =
        Config::stdio(common::tiny_engine().to_string_lossy(), Vec::<String>::new()).with_schema(common::schema());
    let tiny = run(&tiny).await.expect("the suite runs");
    let check = tiny.check("pagination.min-score").expect("ran");
    assert_eq!(check.status, Status::Pass, "{}", tiny.render_text());
}

/// A server that reads only a block's `.text` runs a query by `uri` and one by inline text `data`
/// as an empty query (§4.8): the first is a MUST broken (FAIL), the second an interop finding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_read_as_nothing_are_reported() {
    let report = expect_failures("blocks-unread", &["retrieve.uri-unfetchable"]).await;
    assert_eq!(common::failed(&report), ["retrieve.uri-unfetchable"], "{}", report.render_text());
    let data = report.check("retrieve.text-data").expect("ran");
    assert_eq!(data.status, Status::Info, "{data:?}");
    assert!(data.detail.contains("not read as its text"), "{}", data.detail);
    // The same engine unbroken reads both.
    let control = against("none").await;
    for id in ["retrieve.uri-unfetchable", "retrieve.text-data"] {
        assert_eq!(control.check(id).map(|c| c.status), Some(Status::Pass), "{id}: {}", control.render_text());
    }
}

/// Pages that are disjoint and stable but not the top of one request's ranking break no rule of
/// §10 (cursors are opaque and server-defined): `pagination.covers-once` warns, it does not fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_unlike_one_request_are_a_warning() {
    let report = against("pages-skip-a-hit").await;
    let text = report.render_text();
    let check = report.check("pagination.covers-once").expect("ran");
    assert_eq!(check.status, Status::Warn, "{text}");
    assert!(check.detail.contains("§10 states no such rule"), "{}", check.detail);
    let failed = common::failed(&report);
    assert!(!failed.iter().any(|id| id.starts_with("pagination.")), "{failed:?}\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_and_feedback_results_of_the_wrong_shape_fail() {
    let report = expect_failures("graph-shapes", &["graph.result-shape", "feedback.accepted"]).await;
    // An edge to an unlisted node is not forbidden by the spec: information, not a failure.
    assert_eq!(report.check("graph.neighbors-edges").map(|c| c.status), Some(Status::Info));
    assert_eq!(report.check("graph.ops-served").map(|c| c.status), Some(Status::Pass));
    // `communities` answers no communities over a corpus retrieve finds documents in.
    let empty = report.check("graph.non-empty");
    assert_eq!(empty.map(|c| c.status), Some(Status::Info), "{}", report.render_text());
    assert!(empty.is_some_and(|c| c.detail.contains("communities")), "{}", report.render_text());
}
