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

/// Defects the malformed-params sweep finds in `rcp-wire`, reported and not yet fixed; remove an
/// entry once it is.
///
/// `sweep.retrieve.recency`: `"recency": ["conformance"]` is served. serde's derived
/// `Deserialize` reads a struct from a JSON array of its fields as well as from an object, so the
/// array is a `Recency` whose `field` is "conformance" (rcp-wire/src/retrieve.rs, `Recency`).
const KNOWN_FRAMEWORK_DEFECTS: &[&str] = &["sweep.retrieve.recency"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_engine_passes_the_agentic_checks() {
    let bin = common::workspace_example("graph_engine");
    let cfg = Config::stdio(bin.to_string_lossy(), Vec::<String>::new()).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    let text = report.render_text();
    println!("{text}");
    common::assert_verdicts_follow_keywords(&report);
    let unexpected: Vec<&str> =
        common::failed(&report).into_iter().filter(|id| !KNOWN_FRAMEWORK_DEFECTS.contains(id)).collect();
    assert_eq!(unexpected, Vec::<&str>::new(), "{text}");
    for id in MUST_PASS {
        assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{id}\n{text}");
    }
    // Both scopes are offered: nothing to probe; graph dedup is not the framework's yet (INFO).
    assert_eq!(report.check("memory.scope-unadvertised").map(|c| c.status), Some(Status::Skip));
    let clean = KNOWN_FRAMEWORK_DEFECTS.iter().all(|id| report.check(id).is_none_or(|c| c.status != Status::Fail));
    assert_eq!(report.exit_code() == 0, clean, "{text}");
}
