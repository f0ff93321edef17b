//! `tokenBudget` (§7.7.2) on rcp-bm25 through the real binary: advertised (the engine supplies
//! its analyzer as the token counter), hits packed in rank order until the budget binds, the
//! packed total in `usage.tokens` and the tokenizer named in `usage.notes`; bad budgets refused.

mod common;

use common::{ids, serve};
use rcp_bm25::analyzer::word_spans;
use serde_json::json;

const QUERY: &str = "search engine index ranking retrieval vector query";

#[test]
fn hits_are_packed_by_the_analyzers_word_count_until_the_budget_binds() {
    let mut e = serve(&[]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["retrieve"]["tokenBudget"], true, "{info}");

    let all = e.ok("retrieve", json!({"query": QUERY, "k": 10}));
    let words: Vec<u64> = all["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| word_spans(h["text"].as_str().expect("text")).len() as u64)
        .collect();
    assert!(words.len() >= 4 && words.iter().all(|&w| w > 1), "{words:?}");
    // A budget one short of the first four bodies packs the first three.
    let three: u64 = words[..3].iter().sum();
    let budget = three + words[3] - 1;
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 10, "tokenBudget": budget}));
    assert_eq!(ids(&r), ids(&all)[..3], "{r}");
    assert_eq!(r["usage"]["tokens"], three);
    assert!(r["usage"]["notes"].to_string().contains("rcp-bm25 analyzer"), "{r}");
    // k binds first.
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 2, "tokenBudget": 100_000}));
    assert_eq!(ids(&r), ids(&all)[..2]);
    // Without text in the answer the budget means the same.
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 10, "tokenBudget": budget, "includeText": false}));
    assert_eq!(ids(&r), ids(&all)[..3]);
    assert!(r["hits"][0].get("text").is_none(), "{r}");
    // A top hit larger than the whole budget: nothing is packed, and the note says why.
    let r = e.ok("retrieve", json!({"query": QUERY, "k": 10, "tokenBudget": words[0] - 1}));
    assert!(ids(&r).is_empty(), "{r}");
    assert_eq!(r["usage"]["tokens"], 0);
    assert!(r["usage"]["notes"].to_string().contains("more than the budget"), "{r}");
}

#[test]
fn bad_budgets_are_invalid_params_and_the_server_keeps_running() {
    let mut e = serve(&[]);
    for bad in [json!(0), json!(-1), json!(2.5), json!("100"), json!(true)] {
        let err = e.err("retrieve", json!({"query": QUERY, "k": 3, "tokenBudget": bad}));
        assert_eq!(err["code"], -32602, "tokenBudget {bad}: {err}");
        assert_eq!(err["data"]["field"], "tokenBudget", "{err}");
    }
    assert_eq!(ids(&e.ok("retrieve", json!({"query": QUERY, "k": 3}))).len(), 3);
}
