//! `tokenBudget` (§7.7.2) through the public API: advertised exactly when the engine supplies a
//! token counter, hits packed in rank order until the budget binds (or `k`), `usage.tokens`
//! and the tokenizer in `usage.notes`; bad and unadvertised budgets answered per the spec.

use rcp_server::transport::Connection;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, SessionOptions, TokenCounter};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

/// Documents `d0`..`d9`, `d{i}` holding `i + 1` words, ranked in that order; text only when
/// asked for.
struct Growing;

impl Retrieve for Growing {
    fn capability(&self) -> RetrieveCapability {
        // Claims the flag itself: the framework decides, from the counter.
        RetrieveCapability { max_k: Some(50), token_budget: Some(true), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let text = req.include_text;
        let hits = (0..10usize.min(req.k))
            .map(|i| {
                let h = Hit::new(format!("d{i}").as_str(), 10.0 - i as f64);
                if text { h.with_text(vec!["w"; i + 1].join(" ")) } else { h }
            })
            .collect();
        Ok(RetrieveResult::from_hits(hits))
    }
}

/// Whitespace-separated words.
struct Words;

impl TokenCounter for Words {
    fn name(&self) -> String {
        "test words".into()
    }
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

async fn call(c: &Connection, id: u64, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": "retrieve", "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

async fn connect(s: &Server) -> Connection {
    let c = s.connect(|_| {});
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    let bytes = c.handle(init.to_string().as_bytes()).await.expect("an answer");
    let init: Value = serde_json::from_slice(&bytes).expect("json");
    assert!(init["result"]["capabilities"]["retrieve"].is_object(), "{init}");
    c
}

fn ids(r: &Value) -> Vec<String> {
    let hits = r["result"]["hits"].as_array().unwrap_or_else(|| panic!("hits: {r}"));
    hits.iter().map(|h| h["id"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test]
async fn hits_are_packed_until_the_budget_or_k_binds() {
    let s = Server::builder("t", "0").retrieve(Growing).token_counter(Words).build();
    assert_eq!(s.capabilities().retrieve.and_then(|r| r.token_budget), Some(true));
    let c = connect(&s).await;
    // 1 + 2 + 3 = 6 <= 7; with d3 (4 words) it would be 10.
    let r = call(&c, 1, json!({"query": "q", "k": 10, "tokenBudget": 7})).await;
    assert_eq!(ids(&r), ["d0", "d1", "d2"], "{r}");
    assert_eq!(r["result"]["usage"]["tokens"], 6);
    assert!(r["result"]["usage"]["notes"].to_string().contains("counted with test words"), "{r}");
    // k binds first.
    let r = call(&c, 2, json!({"query": "q", "k": 2, "tokenBudget": 100})).await;
    assert_eq!(ids(&r), ["d0", "d1"]);
    assert_eq!(r["result"]["usage"]["tokens"], 3);
    // The budget counts bodies even when the client does not want them back.
    let r = call(&c, 3, json!({"query": "q", "k": 10, "tokenBudget": 3, "includeText": false})).await;
    assert_eq!(ids(&r), ["d0", "d1"]);
    assert!(r["result"]["hits"].as_array().is_some_and(|h| h.iter().all(|h| h.get("text").is_none())), "{r}");
    // Without a budget nothing is packed and no tokens are reported.
    let r = call(&c, 4, json!({"query": "q", "k": 4})).await;
    assert_eq!(ids(&r).len(), 4);
    assert!(r["result"]["usage"].get("tokens").is_none(), "{r}");
}

#[tokio::test]
async fn packing_applies_after_session_dedup_and_records_only_what_was_returned() {
    let s = Server::builder("t", "0").retrieve(Growing).token_counter(Words).session(SessionOptions::default()).build();
    let c = connect(&s).await;
    let r = call(&c, 1, json!({"query": "q", "k": 10, "tokenBudget": 3, "sessionId": "t"})).await;
    assert_eq!(ids(&r), ["d0", "d1"]);
    // d2 was cut by the budget, not returned: the next step starts there.
    let r = call(&c, 2, json!({"query": "q", "k": 10, "tokenBudget": 7, "sessionId": "t"})).await;
    assert_eq!(ids(&r), ["d2", "d3"], "{r}");
    assert_eq!(r["result"]["usage"]["tokens"], 7);
}

#[tokio::test]
async fn bad_and_unadvertised_budgets_follow_the_spec() {
    let with = Server::builder("t", "0").retrieve(Growing).token_counter(Words).build();
    let c = connect(&with).await;
    for bad in [json!(0), json!(-5), json!(1.5), json!("10")] {
        let r = call(&c, 1, json!({"query": "q", "k": 3, "tokenBudget": bad})).await;
        assert_eq!(r["error"]["code"], -32602, "tokenBudget {bad}: {r}");
    }
    let r = call(&c, 2, json!({"query": "q", "k": 3, "tokenBudget": 1})).await;
    assert_eq!(ids(&r), ["d0"], "the smallest budget holds the one-word top hit: {r}");
    assert_eq!(r["result"]["usage"]["tokens"], 1);

    // No counter: not advertised (whatever the handler claims); strict refuses, strict:false
    // ignores it and says so.
    let without = Server::builder("t", "0").retrieve(Growing).build();
    assert_eq!(without.capabilities().retrieve.and_then(|r| r.token_budget), None);
    let c = connect(&without).await;
    let r = call(&c, 4, json!({"query": "q", "k": 3, "tokenBudget": 5})).await;
    assert_eq!(r["error"]["code"], -32005, "{r}");
    let r = call(&c, 5, json!({"query": "q", "k": 3, "tokenBudget": 5, "strict": false})).await;
    assert_eq!(ids(&r), ["d0", "d1", "d2"]);
    assert!(r["result"]["usage"]["notes"].to_string().contains("tokenBudget"), "{r}");
}
