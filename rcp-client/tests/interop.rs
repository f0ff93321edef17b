//! Interoperability: our client, and the `rcpctl` binary, against a peer that speaks RCP loosely
//! the way some public SDKs' servers do (the `loose_engine` example): capability metadata
//! without `identity`, with `dimensions`, or of the wrong shape; `rerank` answered with a
//! `results` array instead of `scores`; one process-wide HTTP session (a second `initialize`
//! gets -32600). Liberal in what the client accepts (§6, §6.2, §13.2), strict in what it sends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use rcp_client::{Client, ClientError, ClientOptions};
use rcp_wire::capabilities::Capability;
use rcp_wire::embed::EmbedParams;
use rcp_wire::rerank::RerankParams;
use rcp_wire::{ErrorCode, RetrieveParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader as AsyncBufReader};

fn loose_engine() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("loose_engine");
    assert!(bin.exists(), "{} not built (cargo test builds examples)", bin.display());
    bin.to_string_lossy().into_owned()
}

/// A `loose_engine --http` process, killed on drop.
struct HttpEngine {
    child: Child,
    url: String,
}

impl HttpEngine {
    fn start() -> Self {
        let mut child = Command::new(loose_engine())
            .args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn loose_engine --http");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).expect("listening line");
        let url = line.trim().strip_prefix("listening ").expect("listening http://ADDR/rcp").to_owned();
        Self { child, url }
    }
}

impl Drop for HttpEngine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rerank_params(query: &str, passages: &[&str], top_n: u64) -> RerankParams {
    serde_json::from_value(json!({"query": query, "passages": passages, "topN": top_n})).expect("rerank params")
}

#[tokio::test]
async fn loose_capability_metadata_does_not_refuse_the_session() {
    let c = Client::connect_stdio(&[loose_engine()], ClientOptions::default()).await.expect("connect");
    let caps = c.capabilities();
    let embed = caps.embed.as_ref().expect("embed");
    assert_eq!((embed.dimension, embed.identity.as_str()), (4, ""), "dimensions read as dimension, identity absent");
    assert!(c.supports(Capability::SparseEmbed));
    assert!(c.supports(Capability::Rerank), "unreadable metadata keeps the capability advertised");
    let unparsed = &caps.unparsed[&Capability::Rerank];
    assert_eq!(unparsed.raw, json!({"methods": "cross-encoder", "maxCandidates": 100}));
    assert_eq!(caps.rerank.as_ref().and_then(|r| r.max_candidates), Some(100), "readable fields are kept");
    assert!(caps.extra.contains_key("x-loose"));

    let res = c.retrieve(RetrieveParams::new("eiffel tower", 3)).await.expect("retrieve");
    assert_eq!(res.hits[0].key(), "d1", "{:?}", res.hits);
    let vectors = c.embed(EmbedParams::texts(["a", "b"])).await.expect("embed");
    assert_eq!(vectors, vec![vec![0.5; 4]; 2]);
}

#[tokio::test]
async fn a_results_array_answers_rerank_with_one_score_per_passage() {
    let c = Client::connect_stdio(&[loose_engine()], ClientOptions::default()).await.expect("connect");
    let passages = ["paris france", "glucose", "eiffel tower paris"];
    let res = c.rerank(rerank_params("eiffel tower", &passages, 2)).await.expect("rerank");
    assert_eq!(res.scores, vec![0.0, f64::NEG_INFINITY, 2.0], "scores by index; the passage cut by topN is unscored");
    assert_eq!(res.order, Some(vec![2, 0]));
    let res = c.rerank(rerank_params("eiffel tower", &passages, 3)).await.expect("rerank");
    assert_eq!(res.scores, vec![0.0, 0.0, 2.0]);
}

#[tokio::test]
async fn a_shared_http_session_is_joined_through_info() {
    let engine = HttpEngine::start();
    let first = Client::connect_http(&engine.url, ClientOptions::default()).await.expect("first client initializes");
    let second = Client::connect_http(&engine.url, ClientOptions::default())
        .await
        .expect("second client joins the session after -32600");
    assert_eq!(second.server_info().map(|i| i.server.name.as_str()), Some("loose-engine"));
    assert_eq!(second.capabilities(), first.capabilities(), "info gives the session's capabilities (§13.2)");
    for c in [&first, &second] {
        let res = c.search("paris", 2).await.expect("retrieve");
        assert_eq!(res.hits.len(), 2, "{:?}", res.hits);
    }
    let raw = second.call("initialize", json!({"protocolVersion": 1})).await.unwrap_err();
    assert_eq!(raw.code(), Some(ErrorCode::INVALID_REQUEST), "the engine really refuses a second initialize");
}

/// Over a stream the connection is the session: a -32600 to `initialize` there is an error of
/// this connection, never a session to join.
#[tokio::test]
async fn over_a_stream_an_initialize_refusal_is_not_joined() {
    let (client_end, server_end) = tokio::io::duplex(4096);
    let (server_read, mut server_write) = tokio::io::split(server_end);
    tokio::spawn(async move {
        let mut lines = AsyncBufReader::new(server_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            let Some(id) = msg.get("id") else { continue };
            let answer = if msg["method"] == "info" {
                json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "server": {"name": "x"}, "capabilities": {}}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "already initialized"}})
            };
            if server_write.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let (read, write) = tokio::io::split(client_end);
    let err = Client::connect_io(read, write, ClientOptions::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::Rpc(ref e) if e.code == ErrorCode::INVALID_REQUEST), "{err}");
}

#[test]
fn the_rcp_binary_works_against_the_loose_engine_over_stdio_and_http() {
    let rcp = env!("CARGO_BIN_EXE_rcpctl");
    let engine = loose_engine();

    let out = Command::new(rcp).args(["info", "--stdio", &engine]).output().expect("run rcp");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("server:       loose-engine") && text.contains("rerank"), "{text}");
    assert!(text.contains(r#""methods":"cross-encoder""#), "unparsed metadata is shown as received: {text}");
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(warnings.contains("capability metadata not understood"), "{warnings}");

    let out = Command::new(rcp)
        .args(["retrieve", "--stdio", &engine, "eiffel tower", "-k", "3", "--json"])
        .output()
        .expect("run rcp");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(v["hits"][0]["id"], "d1");

    let http = HttpEngine::start();
    for _ in 0..2 {
        // The first run initializes the engine's one session; the second joins it.
        let out = Command::new(rcp).args(["retrieve", "--http", &http.url, "paris", "-k", "2"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("d3"));
    }
    let out = Command::new(rcp).args(["info", "--http", &http.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
