//! `feedback` (§7.16) on the built-in corpus, without a data directory: the framework's store
//! kept in memory; integrity signals past the threshold quarantine a hit from later results.

mod common;

use common::serve;
use serde_json::{Value, json};

fn ids(res: &Value) -> Vec<String> {
    res["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("id").to_owned()).collect()
}

#[test]
fn feedback_on_the_builtin_corpus_quarantines_in_memory() {
    let mut e = serve(&["--quarantine-threshold", "2"]);
    let info = e.ok("info", json!({}));
    for key in ["feedback", "pagination", "session"] {
        assert!(info["capabilities"][key].is_object(), "{key} not advertised: {info}");
    }
    assert_eq!(info["capabilities"]["retrieve"]["tokenBudget"], true, "{info}");
    let q = json!({"query": "inverted index", "k": 3});
    let top = ids(&e.ok("retrieve", q.clone()))[0].clone();
    let signal = json!({"hitId": top, "poisonSuspected": true});
    assert_eq!(e.ok("feedback", json!({"signals": [signal, signal]}))["accepted"], 2);
    let after = ids(&e.ok("retrieve", q));
    assert!(!after.contains(&top), "{top} is quarantined: {after:?}");
}
