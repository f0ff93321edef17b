//! The federation checks (§16.2, §16.3) over the suite's own probe engines: our gateway passes
//! every one, and a deliberately broken aggregator fails the ones that own its defects.

mod common;

use rcp_conformance::{Aggregator, Config, Level, PROBE_FLAG, Report, Status, run};

const FEDERATION: [&str; 10] = [
    "federation.all-failed",
    "federation.partial",
    "federation.partial-noted",
    "federation.required",
    "federation.hop-forwarded",
    "federation.hop-exhausted",
    "federation.deadline",
    "federation.dedup",
    "federation.richest-body",
    "federation.origin",
];

/// The suite over `command` (with `{registry}`), the main session over a registry of one probe.
async fn certify(command: Vec<String>) -> Report {
    let probe = vec![env!("CARGO_BIN_EXE_rcp-conformance").to_owned(), PROBE_FLAG.to_owned()];
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = dir.path().join("main.json");
    let mut probe_cmd = probe.clone();
    probe_cmd.extend(["--name", "main-probe", "--hit", "d1|1.0|wing lift"].map(String::from));
    let engines = serde_json::json!({"engines": [{"id": "p", "transport": "stdio", "command": probe_cmd}]});
    std::fs::write(&registry, engines.to_string()).expect("registry");
    let main: Vec<String> = command.iter().map(|a| a.replace("{registry}", &registry.to_string_lossy())).collect();
    let cfg = Config::stdio(main[0].clone(), main[1..].to_vec())
        .with_level(Level::L1)
        .with_schema(common::schema())
        .with_aggregator(Aggregator { command, probe });
    let report = run(&cfg).await.expect("the suite runs");
    common::assert_verdicts_follow_keywords(&report);
    report
}

fn status(report: &Report, id: &str) -> Option<Status> {
    report.check(id).map(|c| c.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_keeps_every_federation_duty() {
    // Built on demand; a gateway that does not build fails the test rather than skipping it.
    let gateway = common::workspace_bin("rcp-gateway", "rcp-gateway").expect("rcp-gateway builds");
    let command =
        vec![gateway.to_string_lossy().into_owned(), "serve".into(), "--registry".into(), "{registry}".into()];
    let report = certify(command).await;
    let text = report.render_text();
    for id in FEDERATION {
        assert_eq!(status(&report, id), Some(Status::Pass), "{id}\n{text}");
    }
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_aggregator_fails_the_checks_that_own_its_defects() {
    let bin = common::own_example("broken_aggregator").to_string_lossy().into_owned();
    let report = certify(vec![bin.clone(), "plain".into(), "{registry}".into()]).await;
    let text = report.render_text();
    assert_eq!(status(&report, "federation.hop-forwarded"), Some(Status::Fail), "{text}");
    assert_eq!(status(&report, "federation.hop-exhausted"), Some(Status::Fail), "{text}");
    assert_eq!(status(&report, "federation.deadline"), Some(Status::Warn), "a SHOULD: {text}");
    assert_eq!(status(&report, "federation.all-failed"), Some(Status::Pass), "{text}");
    assert_eq!(status(&report, "federation.dedup"), Some(Status::Pass), "{text}");

    let report = certify(vec![bin, "empty-on-failure".into(), "{registry}".into()]).await;
    let text = report.render_text();
    let all_failed = report.check("federation.all-failed").expect("ran");
    assert_eq!(all_failed.status, Status::Fail, "{text}");
    assert!(all_failed.detail.contains("-32010"), "{}", all_failed.detail);
}
