//! `rcp-bm25 serve` on its built-in corpus advertises `session` (with `dedup`) and `transform`
//! (`rewrite`, `multi-query`): the checks of §7.7.3 and of inline `retrieve.rewrite` apply to it
//! and pass, rather than being skipped.

mod common;

use rcp_conformance::{Config, Status, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bm25_passes_the_session_and_rewrite_checks() {
    let Some(bm25) = common::workspace_bin("rcp-bm25", "rcp-bm25") else {
        eprintln!("SKIPPED: rcp-bm25 is not built and could not be built (cargo build -p rcp-bm25)");
        return;
    };
    let cfg = Config::stdio(bm25.to_string_lossy(), ["serve"]).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    let text = report.render_text();
    println!("{text}");
    common::assert_verdicts_follow_keywords(&report);
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    for id in [
        "session.hint",
        "session.dedup",
        "retrieve.rewrite-unadvertised",
        "retrieve.rewrite-served",
        "transform.method-unadvertised",
        "transform.methods-served",
    ] {
        assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{id}\n{text}");
    }
    let dedup = report.check("session.dedup").map(|c| c.detail.clone()).unwrap_or_default();
    assert!(dedup.contains("new ones"), "the second retrieve must have returned hits to compare: {dedup}");
    assert!(!dedup.starts_with("3 hits, then 0"), "a trajectory that returns nothing proves nothing: {dedup}");
    assert_eq!(report.exit_code(), 0, "{text}");
}
