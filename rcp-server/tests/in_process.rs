//! Framework behaviour through `Server::serve` over an in-memory duplex stream, for limits a
//! subprocess test cannot configure (line length, batch size) and result post-processing.

use std::time::Duration;

use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, ServerOptions};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

struct One;

impl Retrieve for One {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([("lang", FieldType::Keyword)]).with_operators(["eq"]))
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let filtered = req.filter.is_some();
        // Deliberately more than k hits, a duplicate id and a NaN: the framework fixes them.
        let hits = vec![
            Hit::new("a", f64::NAN),
            Hit::new("a", 2.0),
            Hit::new("b", 1.0).with_meta("filtered", filtered),
            Hit::new("c", 0.5),
        ];
        Ok(RetrieveResult::from_hits(hits))
    }
}

type Out = Lines<BufReader<ReadHalf<DuplexStream>>>;

fn session(options: ServerOptions) -> (WriteHalf<DuplexStream>, Out) {
    let server = Server::builder("one", "0").retrieve(One).options(options).build();
    let (client, server_side) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, write) = tokio::io::split(client);
    (write, BufReader::new(read).lines())
}

async fn send(w: &mut WriteHalf<DuplexStream>, v: &Value) {
    w.write_all(format!("{v}\n").as_bytes()).await.expect("write");
}

async fn next(lines: &mut Out) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("answer in time")
        .expect("read")
        .expect("a line");
    serde_json::from_str(&line).expect("json")
}

#[tokio::test]
async fn over_long_lines_get_payload_too_large_and_the_session_continues() {
    let (mut w, mut lines) = session(ServerOptions { max_line_bytes: 1024, ..ServerOptions::default() });
    send(&mut w, &json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{"nonce":"x".repeat(4096)}})).await;
    send(&mut w, &json!({"jsonrpc":"2.0","id":2,"method":"ping"})).await;
    let r = next(&mut lines).await;
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32013);
    assert_eq!(next(&mut lines).await["id"], 2);
}

#[tokio::test]
async fn oversized_batches_are_rejected_whole() {
    let (mut w, mut lines) = session(ServerOptions { max_batch: 3, ..ServerOptions::default() });
    let batch: Vec<Value> = (0..4).map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"})).collect();
    send(&mut w, &Value::from(batch)).await;
    let r = next(&mut lines).await;
    assert!(r.is_object());
    assert_eq!(r["error"]["code"], -32013);
}

#[tokio::test]
async fn results_are_truncated_deduplicated_sanitised_and_strict_false_drops_bad_filters() {
    let (mut w, mut lines) = session(ServerOptions::default());
    send(&mut w, &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}})).await;
    next(&mut lines).await;
    send(&mut w, &json!({"jsonrpc":"2.0","id":2,"method":"retrieve","params":{"query":"q","k":2}})).await;
    let r = next(&mut lines).await;
    let hits = r["result"]["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0]["id"], "a");
    assert!(hits[0]["score"].is_number(), "NaN must become a finite sentinel: {r}");
    assert_eq!(hits[1]["id"], "b");

    let f = json!({"field": "lang", "op": "ne", "value": "en"});
    send(&mut w, &json!({"jsonrpc":"2.0","id":3,"method":"retrieve","params":{"query":"q","k":2,"filter": f}})).await;
    let r = next(&mut lines).await;
    assert_eq!(r["error"]["code"], -32005);
    assert_eq!(r["error"]["data"]["option"], "filter.op");
    let params = json!({"query":"q","k":2,"filter": f, "strict": false});
    send(&mut w, &json!({"jsonrpc":"2.0","id":4,"method":"retrieve","params": params})).await;
    let r = next(&mut lines).await;
    assert_eq!(r["result"]["hits"][1]["meta"]["filtered"], false);
    assert!(r["result"]["usage"]["notes"].to_string().contains("filter dropped"), "{r}");
}

struct Vecs;

impl rcp_server::Embed for Vecs {
    fn capability(&self) -> rcp_wire::capabilities::EmbedCapability {
        rcp_wire::capabilities::EmbedCapability {
            dimension: 3,
            identity: "test/len-3".into(),
            batch_limit: Some(2),
            encodings: Some(vec!["f32-base64".into()]),
            ..Default::default()
        }
    }

    async fn embed(&self, req: rcp_server::EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        Ok(req.inputs.iter().map(|i| vec![i.text().len() as f32, 0.5, -1.0]).collect())
    }
}

impl rcp_server::Rerank for Vecs {
    fn capability(&self) -> rcp_wire::capabilities::RerankCapability {
        rcp_wire::capabilities::RerankCapability { methods: vec!["cross-encoder".into()], ..Default::default() }
    }

    async fn rerank(&self, req: rcp_server::RerankRequest, _ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        Ok(req.passages.iter().map(|p| p.text().len() as f64).collect())
    }
}

#[tokio::test]
async fn embed_encodings_limits_and_rerank_order_are_handled_by_the_framework() {
    let server = Server::builder("vecs", "0").embed(Vecs).rerank(Vecs).build();
    assert_eq!(server.capabilities().embed.as_ref().and_then(|e| e.encodings.clone()).unwrap(), ["json", "f32-base64"]);
    let (client, server_side) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    send(&mut w, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}})).await;
    next(&mut lines).await;

    send(&mut w, &json!({"jsonrpc":"2.0","id":1,"method":"embed","params":{"texts":["ab","abcd"]}})).await;
    let json_vectors = next(&mut lines).await["result"]["vectors"].clone();
    assert_eq!(json_vectors, json!([[2.0, 0.5, -1.0], [4.0, 0.5, -1.0]]));

    let p = json!({"inputs":["ab","abcd"],"encoding":"f32-base64"});
    send(&mut w, &json!({"jsonrpc":"2.0","id":2,"method":"embed","params": p})).await;
    let r = next(&mut lines).await["result"].clone();
    assert_eq!(r["encoding"], "f32-base64");
    assert_eq!(r["dimension"], 3);
    for (blob, expected) in r["vectors"].as_array().unwrap().iter().zip(json_vectors.as_array().unwrap()) {
        let decoded = rcp_wire::vectors::decode_f32_base64(blob.as_str().unwrap(), 3).unwrap();
        let expected: Vec<f32> = serde_json::from_value(expected.clone()).unwrap();
        assert_eq!(decoded, expected);
    }

    send(&mut w, &json!({"jsonrpc":"2.0","id":3,"method":"embed","params":{"inputs":["a","b","c"]}})).await;
    let r = next(&mut lines).await;
    assert_eq!((r["error"]["code"].clone(), r["error"]["data"]["field"].clone()), (json!(-32602), json!("inputs")));

    let p = json!({"inputs":["a"],"encoding":"f16-base64"});
    send(&mut w, &json!({"jsonrpc":"2.0","id":4,"method":"embed","params": p})).await;
    let r = next(&mut lines).await;
    assert_eq!((r["error"]["code"].clone(), r["error"]["data"]["option"].clone()), (json!(-32005), json!("encoding")));
    let p = json!({"inputs":["a"],"encoding":"f16-base64","strict":false});
    send(&mut w, &json!({"jsonrpc":"2.0","id":5,"method":"embed","params": p})).await;
    let r = next(&mut lines).await["result"].clone();
    assert!(r.get("encoding").is_none() && r["vectors"][0].is_array(), "{r}");

    let p = json!({"query":"q","documents":["xx","x","xxx"],"topN":2});
    send(&mut w, &json!({"jsonrpc":"2.0","id":6,"method":"rerank","params": p})).await;
    let r = next(&mut lines).await["result"].clone();
    assert_eq!(r["scores"], json!([2.0, 1.0, 3.0]));
    assert_eq!(r["order"], json!([2, 0]));
    assert_eq!(r["results"], json!([{"index": 2, "score": 3.0}, {"index": 0, "score": 2.0}]));
    let p = json!({"query":"q","passages":["x"],"method":"colbert"});
    send(&mut w, &json!({"jsonrpc":"2.0","id":7,"method":"rerank","params": p})).await;
    assert_eq!(next(&mut lines).await["error"]["code"], -32005);
}

#[derive(Default)]
struct CountingIndex {
    calls: std::sync::atomic::AtomicUsize,
}

impl rcp_server::Index for CountingIndex {
    fn capability(&self) -> rcp_wire::capabilities::IndexCapability {
        rcp_wire::capabilities::IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(
        &self,
        params: rcp_wire::index::IndexAddParams,
        _ctx: RequestContext,
    ) -> HandlerResult<rcp_wire::index::IndexAddResult> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let ids = params.documents.iter().enumerate().map(|(i, _)| format!("minted-{n}-{i}")).collect();
        Ok(rcp_wire::index::IndexAddResult { ids, ..Default::default() })
    }

    async fn delete(
        &self,
        _params: rcp_wire::index::IndexDeleteParams,
        _ctx: RequestContext,
    ) -> HandlerResult<rcp_wire::index::IndexDeleteResult> {
        Ok(Default::default())
    }
}

#[tokio::test]
async fn concurrent_repeats_of_an_idempotency_key_write_once() {
    let index = std::sync::Arc::new(CountingIndex::default());
    let server = Server::builder("idem", "0").index(std::sync::Arc::clone(&index)).build();
    let (client, server_side) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    send(&mut w, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}})).await;
    next(&mut lines).await;
    let add = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"index/add",
        "params":{"documents":[{"text":"x"}],"_meta":{"idempotencyKey":"k"}}})
    };
    send(&mut w, &add(1)).await;
    send(&mut w, &add(2)).await;
    let (a, b) = (next(&mut lines).await, next(&mut lines).await);
    assert_eq!(a["result"]["ids"], b["result"]["ids"], "{a} {b}");
    send(&mut w, &add(3)).await;
    assert_eq!(next(&mut lines).await["result"]["ids"], a["result"]["ids"]);
    assert_eq!(index.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
