//! `feedback` (§7.16) stored in PostgreSQL: two rcp-pg processes on one database; integrity
//! signals sent through one quarantine the hit in the other's results too. Session and
//! tokenBudget are advertised beside it.

mod common;

use common::{FIELDS, database, docs, ids, serve};
use serde_json::json;

#[test]
fn feedback_through_one_process_is_seen_by_another_on_the_same_database() {
    let Some(url) = database("feedback") else { return };
    let mut threshold = FIELDS.to_vec();
    threshold.extend(["--quarantine-threshold", "2"]);
    let mut a = serve(&url, &threshold);
    let mut b = serve(&url, &threshold);
    let info = a.ok("info", json!({}));
    for key in ["feedback", "pagination", "session"] {
        assert!(info["capabilities"][key].is_object(), "{key} not advertised: {info}");
    }
    assert_eq!(info["capabilities"]["retrieve"]["tokenBudget"], true, "{info}");
    a.ok("index/add", json!({"documents": docs()}));
    let q = json!({"query": "aircraft wing lift", "k": 3, "mode": "sparse"});
    assert_eq!(ids(&b.ok("retrieve", q.clone()))[0], "wing");

    let signal = json!({"hitId": "wing", "poisonSuspected": true});
    assert_eq!(a.ok("feedback", json!({"signals": [signal]}))["accepted"], 1);
    assert!(ids(&b.ok("retrieve", q.clone())).contains(&"wing".to_owned()), "one signal is under the threshold");
    assert_eq!(a.ok("feedback", json!({"signals": [signal, {"hitId": "boundary", "used": true}]}))["accepted"], 2);
    for (name, e) in [("a", &mut a), ("b", &mut b)] {
        let hits = ids(&e.ok("retrieve", q.clone()));
        assert!(!hits.contains(&"wing".to_owned()), "process {name} still returns the quarantined hit: {hits:?}");
    }
    // The framework's bounds apply before anything is stored.
    let err = b.err("feedback", json!({"signals": [{"hitId": "", "used": true}]}));
    assert_eq!(err["code"], -32602, "{err}");
    // tokenBudget packs with the encoder's tokenizer.
    let packed = b.ok("retrieve", json!({"query": "bread", "k": 5, "tokenBudget": 20}));
    assert!(packed["usage"]["tokens"].as_u64().is_some_and(|t| t <= 20), "{packed}");
}
