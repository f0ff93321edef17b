//! `minScore` (§7.7) with pagination (§10): an engine that cuts its page before it applies
//! `minScore` leaves the framework's backstop to drop the hits below the floor. The ranking is
//! descending, so nothing on a later page can pass either: the page must not send the client on
//! to an empty page with a `nextCursor`.

use rcp_server::transport::Connection;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RcpError, RetrieveResult};
use serde_json::{Value, json};

/// Twenty documents `d0`..`d19` scoring `20 - i`, paged by offset cursors; `minScore` is
/// ignored here (the framework's backstop applies it after the page is cut).
struct PagesFirst;

impl Retrieve for PagesFirst {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(50), ..Default::default() }
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let offset: usize = req
            .cursor
            .as_deref()
            .map_or(Ok(0), str::parse)
            .map_err(|_| RcpError::invalid_params("cursor", "not a cursor of this engine"))?;
        let hits: Vec<Hit> =
            (offset..20).take(req.k).map(|i| Hit::new(format!("d{i}").as_str(), 20.0 - i as f64)).collect();
        let end = offset + hits.len();
        Ok(RetrieveResult { hits, next_cursor: (end < 20).then(|| end.to_string()), ..Default::default() })
    }
}

async fn connect(s: &Server) -> Connection {
    let c = s.connect(|_| {});
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    c.handle(init.to_string().as_bytes()).await.expect("an answer");
    c
}

async fn retrieve(c: &Connection, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.expect("an answer");
    let answer: Value = serde_json::from_slice(&bytes).expect("json");
    answer.get("result").cloned().unwrap_or_else(|| panic!("an error: {answer}"))
}

fn ids(r: &Value) -> Vec<&str> {
    r["hits"].as_array().expect("hits").iter().filter_map(|h| h["id"].as_str()).collect()
}

#[tokio::test]
async fn a_page_cut_by_min_score_offers_no_next_page() {
    let s = Server::builder("t", "0").retrieve(PagesFirst).build();
    let c = connect(&s).await;
    // Scores 20, 19, ...: minScore 17.5 keeps d0..d2 of the first page of five.
    let first = retrieve(&c, json!({"query": "q", "k": 5, "minScore": 17.5})).await;
    assert_eq!(ids(&first), ["d0", "d1", "d2"], "{first}");
    assert!(first.get("nextCursor").is_none(), "the ranking ended on this page: {first}");
    assert!(first["usage"]["notes"].to_string().contains("nextCursor withheld"), "{first}");
    // The case a new engine author hit: the second page, emptied after it was cut.
    let second = retrieve(&c, json!({"query": "q", "k": 5, "minScore": 17.5, "cursor": "5"})).await;
    assert_eq!(ids(&second), Vec::<&str>::new(), "{second}");
    assert!(second.get("nextCursor").is_none(), "an empty page sends nobody on: {second}");
}

#[tokio::test]
async fn pages_above_the_floor_keep_their_cursor() {
    let s = Server::builder("t", "0").retrieve(PagesFirst).build();
    let c = connect(&s).await;
    let first = retrieve(&c, json!({"query": "q", "k": 5, "minScore": 10.0})).await;
    assert_eq!(ids(&first), ["d0", "d1", "d2", "d3", "d4"]);
    assert_eq!(first["nextCursor"], "5", "every hit passed: the next page may too");
    let second = retrieve(&c, json!({"query": "q", "k": 5, "minScore": 10.0, "cursor": "5"})).await;
    assert_eq!(ids(&second), ["d5", "d6", "d7", "d8", "d9"]);
    let third = retrieve(&c, json!({"query": "q", "k": 5, "minScore": 10.0, "cursor": "10"})).await;
    assert_eq!(ids(&third), ["d10"]);
    assert!(third.get("nextCursor").is_none(), "{third}");
}
