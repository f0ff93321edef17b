//! The agentic checks (graph, memory, feedback, sessions across them, units and token budget)
//! against the `graph_engine` example, which serves all of them over a fixed graph: none may
//! fail, each must have run (not skipped), and the interop probes must pass too.

mod common;

use rcp_conformance::{Config, Status, run};

/// The checks the graph engine exercises, each of which must pass.
const MUST_PASS: &[&str] = &[
    "graph.ops-served",
    "graph.result-shape",
    "graph.result-fields",
    "graph.neighbors-edges",
    "graph.non-empty",
    "session.graph-hint",
    "memory.build-shape",
    "memory.recall-shape",
    "feedback.accepted",
    "session.feedback-hint",
    "retrieve.unit-served",
    "retrieve.unit-echo",
    "retrieve.token-budget",
    "retrieve.token-usage",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_engine_passes_the_agentic_checks() {
    let bin = common::workspace_example("graph_engine");
    let cfg = Config::stdio(bin.to_string_lossy(), Vec::<String>::new()).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    let text = report.render_text();
    println!("{text}");
    common::assert_verdicts_follow_keywords(&report);
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    for id in MUST_PASS {
        assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{id}\n{text}");
    }
    // Only `global` is offered (graph_engine keeps no per-session memory): `session` is refused.
    assert_eq!(report.check("memory.scope-unadvertised").map(|c| c.status), Some(Status::Pass));
    assert_eq!(report.exit_code(), 0, "{text}");
}
