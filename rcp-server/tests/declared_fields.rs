//! Declared fields are checked by the framework (§7.10, §8): an engine that advertises `year`
//! as an `int` filter field never sees an `index/add` whose document says `"year": "nineteen"`;
//! the batch is refused with -32602 naming the document and the field, and nothing is stored.

use std::sync::{Arc, Mutex};

use rcp_server::transport::Connection;
use rcp_server::{HandlerResult, Index, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{IndexCapability, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::index::{Document, IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

/// A user's engine with no field checks of its own: it stores whatever reaches it.
#[derive(Default)]
struct Naive {
    stored: Mutex<Vec<Document>>,
}

impl Retrieve for Naive {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), ..Default::default() }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([("year", FieldType::Int), ("lang", FieldType::Keyword)]))
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let docs = self.stored.lock().expect("lock");
        Ok(RetrieveResult::from_hits(docs.iter().map(|d| Hit::new(d.id.clone().unwrap_or_default(), 1.0)).collect()))
    }
}

impl Index for Naive {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let mut docs = self.stored.lock().expect("lock");
        let ids = params.documents.iter().map(|d| d.id.clone().unwrap_or_else(|| format!("m{}", docs.len()))).collect();
        docs.extend(params.documents);
        Ok(IndexAddResult { ids, ..Default::default() })
    }

    async fn delete(&self, _params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        Ok(IndexDeleteResult::default())
    }
}

async fn call(c: &Connection, id: u64, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

#[tokio::test]
async fn a_mistyped_declared_field_is_refused_before_the_handler_runs() {
    let engine = Arc::new(Naive::default());
    let s = Server::builder("naive", "0").retrieve(Arc::clone(&engine)).index(Arc::clone(&engine)).build();
    let c = s.connect(|_| {});
    let init = call(&c, 0, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init["result"]["capabilities"]["filter"]["fields"]["year"], "int", "{init}");

    let bad = json!({"documents": [
        {"id": "fine", "text": "a", "meta": {"year": 1999, "lang": "en"}},
        {"id": "d13", "text": "b", "meta": {"year": "nineteen"}}
    ]});
    let r = call(&c, 1, "index/add", bad).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["field"], "documents[1].meta.year", "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("document 'd13'") && message.contains("year"), "{message}");
    assert!(engine.stored.lock().expect("lock").is_empty(), "nothing of the refused batch was stored");

    // Array items are checked one by one; a valid batch goes through untouched.
    let r = call(&c, 2, "index/add", json!({"documents": [{"text": "c", "meta": {"lang": ["en", 7]}}]})).await;
    assert_eq!(r["error"]["data"]["field"], "documents[0].meta.lang[1]", "{r}");
    let r = call(
        &c,
        3,
        "index/add",
        json!({"documents": [{"id": "ok", "text": "d", "meta": {"year": 2001.0, "x": "free"}}]}),
    )
    .await;
    assert_eq!(r["result"]["ids"], json!(["ok"]), "{r}");
    let r = call(&c, 4, "retrieve", json!({"query": "q", "k": 5})).await;
    assert_eq!(r["result"]["hits"].as_array().map(Vec::len), Some(1), "{r}");
}
