//! A server that floods `notifications/progress` for a call whose caller reads none of it: the
//! client keeps at most `PROGRESS_QUEUE` frames waiting and still delivers the result.

use rcp_client::{Client, ClientOptions, PROGRESS_QUEUE};
use rcp_wire::RetrieveParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Progress frames the peer sends for one call: far more than the client may hold.
const FLOOD: usize = 20 * PROGRESS_QUEUE;

#[tokio::test]
async fn unread_progress_is_bounded_and_the_result_still_arrives() {
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, mut server_write) = tokio::io::split(server_end);
    tokio::spawn(async move {
        let mut lines = BufReader::new(server_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            let Some(id) = msg.get("id").cloned() else { continue };
            let mut out = String::new();
            match msg["method"].as_str() {
                Some("initialize") => out.push_str(
                    &json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
                        "server": {"name": "flood", "version": "0"},
                        "capabilities": {"retrieve": {"maxK": 10}, "streaming": true}}})
                    .to_string(),
                ),
                Some("retrieve") => {
                    let token = msg["params"]["_meta"]["progressToken"].clone();
                    for i in 0..FLOOD {
                        let frame = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": i as f64 / FLOOD as f64}});
                        out.push_str(&frame.to_string());
                        out.push('\n');
                    }
                    out.push_str(
                        &json!({"jsonrpc": "2.0", "id": id, "result": {"hits": [{"id": "d", "score": 1.0}]}})
                            .to_string(),
                    );
                }
                _ => out.push_str(&json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string()),
            }
            out.push('\n');
            if server_write.write_all(out.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let (read, write) = tokio::io::split(client_end);
    let client = Client::connect_io(read, write, ClientOptions::default()).await.expect("initialize");
    let mut streaming = client.retrieve_streaming(RetrieveParams::new("q", 1)).expect("gated ok");
    let result = (&mut streaming.result).await.expect("the result arrives past the flood");
    assert_eq!(result.hits.len(), 1);
    let mut kept = 0;
    while streaming.progress.try_recv().is_ok() {
        kept += 1;
    }
    assert_eq!(kept, PROGRESS_QUEUE, "the frames the caller did not read are bounded");
}
