//! `session` (§7.7.3) on rcp-bm25 over stdio: a three-step loop in one trajectory returns only
//! new documents each step, in the engine's ranking order.

mod common;

use std::collections::HashSet;

use common::{ids, serve};
use serde_json::json;

#[test]
fn a_three_step_loop_returns_only_new_documents_each_step() {
    let mut e = serve(&[]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["session"]["dedup"], true, "{info}");
    let query = "search engine index ranking retrieval vector query";
    let top9 = ids(&e.ok("retrieve", json!({"query": query, "k": 9})));
    assert_eq!(top9.len(), 9, "the demo corpus has at least nine matches: {top9:?}");
    let mut seen = HashSet::new();
    for (step, expected) in top9.chunks(3).enumerate() {
        let got = ids(&e.ok("retrieve", json!({"query": query, "k": 3, "sessionId": "agent-loop-1"})));
        assert_eq!(got, expected, "step {step}: the next three of the ranking");
        assert!(got.iter().all(|id| seen.insert(id.clone())), "step {step} repeated a document: {got:?}");
    }
    // Without the session the answer is the plain ranking, as before.
    assert_eq!(ids(&e.ok("retrieve", json!({"query": query, "k": 3}))), top9[..3]);
}
