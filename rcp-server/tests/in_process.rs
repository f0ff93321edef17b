//! Framework behaviour through `Server::serve` over an in-memory duplex stream, for limits a
//! subprocess test cannot configure (line length, batch size) and result post-processing.

use std::time::Duration;

use rcp_protocol::capabilities::RetrieveCapability;
use rcp_protocol::filter::{FieldType, FilterCapability};
use rcp_protocol::{Hit, RetrieveResult};
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

struct One;

impl Retrieve for One {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec!["sparse".into()]), ..Default::default() }
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
    tokio::spawn(async move { server.serve(server_read, server_write).await });
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
