//! §4.8 on every engine, done once by the framework: a block by `uri` (which the framework does
//! not fetch) is `-32602` naming it, and inline `data` of a text type is searched exactly as
//! the same string would be. Neither is ever read as an empty query.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcp_server::transport::Connection;
use rcp_server::{EmbedRequest, HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

/// Answers one hit whose id is the query text the engine received.
struct Echo;

impl Retrieve for Echo {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability::default()
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult { hits: vec![Hit::new(req.query.text().as_str(), 1.0)], ..Default::default() })
    }
}

/// Embeds each input as its length in characters.
struct Lengths;

impl rcp_server::Embed for Lengths {
    fn capability(&self) -> rcp_wire::capabilities::EmbedCapability {
        rcp_wire::capabilities::EmbedCapability { dimension: 1, identity: "lengths".into(), ..Default::default() }
    }

    async fn embed(&self, req: EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        Ok(req.inputs.iter().map(|i| vec![i.text().chars().count() as f32]).collect())
    }
}

async fn connect() -> Connection {
    let s = Server::builder("t", "0").retrieve(Echo).embed(Lengths).build();
    let c = s.connect(|_| {});
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    c.handle(init.to_string().as_bytes()).await.expect("an answer");
    c
}

async fn call(c: &Connection, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let bytes = c.handle(frame.to_string().as_bytes()).await.expect("an answer");
    serde_json::from_slice(&bytes).expect("json")
}

fn first_id(answer: &Value) -> &str {
    answer["result"]["hits"][0]["id"].as_str().unwrap_or_else(|| panic!("a hit: {answer}"))
}

fn assert_invalid_at(answer: &Value, field: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["field"], field, "{answer}");
}

#[tokio::test]
async fn a_uri_is_refused_naming_it_never_read_as_nothing() {
    let c = connect().await;
    let blob = json!({"type": "blob", "mimeType": "text/plain", "uri": "https://example.org/q.txt"});
    let a = call(&c, "retrieve", json!({"query": blob, "k": 1})).await;
    assert_invalid_at(&a, "query.uri");
    assert!(a["error"]["message"].as_str().is_some_and(|m| m.contains("not fetched")), "{a}");
    // In an array, the path names the block; under strict:false too (a refusal, not an option).
    let blocks = json!([{"type": "text", "text": "wing"}, blob]);
    let a = call(&c, "retrieve", json!({"query": blocks, "k": 1, "strict": false})).await;
    assert_invalid_at(&a, "query[1].uri");
    let a = call(&c, "embed", json!({"inputs": ["a", blob]})).await;
    assert_invalid_at(&a, "inputs[1].uri");
    // The server keeps serving.
    let a = call(&c, "retrieve", json!({"query": "still here", "k": 1})).await;
    assert_eq!(first_id(&a), "still here");
}

#[tokio::test]
async fn inline_text_data_is_searched_as_its_string() {
    let c = connect().await;
    let text = "boundary layer — transition";
    let data = STANDARD.encode(text);
    for mime in ["text/plain", "text/markdown; charset=UTF-8"] {
        let blob = json!({"type": "blob", "mimeType": mime, "data": data});
        let a = call(&c, "retrieve", json!({"query": blob, "k": 1})).await;
        assert_eq!(first_id(&a), text, "{mime}: {a}");
    }
    let blocks = json!([{"type": "text", "text": "heat"}, {"type": "blob", "mimeType": "text/plain", "data": data}]);
    let a = call(&c, "retrieve", json!({"query": blocks, "k": 1})).await;
    assert_eq!(first_id(&a), format!("heat\n{text}"), "{a}");
    let a = call(&c, "embed", json!({"inputs": [{"type": "blob", "mimeType": "text/plain", "data": data}]})).await;
    assert_eq!(a["result"]["vectors"][0][0].as_f64(), Some(text.chars().count() as f64), "{a}");
}

#[tokio::test]
async fn text_data_that_is_not_text_is_refused_naming_it() {
    let c = connect().await;
    for (data, mime) in [
        ("%%%".to_owned(), "text/plain"),
        (STANDARD.encode([0xff, 0xfe, 0x00]), "text/plain"),
        (STANDARD.encode("hi"), "text/plain; charset=iso-8859-1"),
    ] {
        let a = call(&c, "retrieve", json!({"query": {"type": "blob", "mimeType": mime, "data": data}, "k": 1})).await;
        assert_invalid_at(&a, "query.data");
    }
    // A non-text blob on a text-only engine stays -32005 (the modality rule), inline or by uri.
    let png = json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="});
    let a = call(&c, "retrieve", json!({"query": png, "k": 1})).await;
    assert_eq!(a["error"]["code"], -32005, "{a}");
    let by_uri = json!({"type": "image", "mimeType": "image/png", "uri": "https://example.org/p.png"});
    let a = call(&c, "retrieve", json!({"query": by_uri, "k": 1})).await;
    assert_eq!(a["error"]["code"], -32005, "the modality first: {a}");
    // Under strict:false the query falls back to its text part; the image is not read at all.
    let mixed = json!([{"type": "text", "text": "wing"}, by_uri]);
    let a = call(&c, "retrieve", json!({"query": mixed, "k": 1, "strict": false})).await;
    assert_eq!(first_id(&a), "wing", "{a}");
}
