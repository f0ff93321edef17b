//! The client and a framework server in one process over `tokio::io::duplex`: no spawned
//! process, the same NDJSON framing as stdio (§5.1).

use std::time::{Duration, Instant};

use rcp_client::{Client, ClientError, ClientOptions};
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{Capability, RetrieveCapability};
use rcp_wire::embed::EmbedParams;
use rcp_wire::{Hit, RetrieveParams, RetrieveResult};
use tokio::io::{DuplexStream, duplex};
use tokio::task::JoinHandle;

/// Answers every query with one hit keyed by the query text; a query starting with `slow`
/// takes 300 ms.
struct Echo;

impl Retrieve for Echo {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let text = req.query.text();
        if text.starts_with("slow") {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new(text, 1.0)]))
    }
}

/// A connected client, and the task that relays bytes between it and the server: aborting
/// the relay is the server going away (both pipe ends close).
async fn connect() -> (Client, JoinHandle<()>) {
    let (client_end, mut relay_client) = duplex(64 * 1024);
    let (mut relay_server, server_end) = duplex(64 * 1024);
    let server = Server::builder("echo", "0").retrieve(Echo).build();
    let (server_read, server_write) = tokio::io::split(server_end);
    tokio::spawn(async move {
        let _ = server.serve((server_read, server_write)).await;
    });
    let relay = tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut relay_client, &mut relay_server).await;
    });
    let (read, write) = tokio::io::split::<DuplexStream>(client_end);
    let client = Client::connect_io(read, write, ClientOptions::default()).await.expect("initialize over duplex");
    (client, relay)
}

#[tokio::test]
async fn initialize_and_a_typed_retrieve() {
    let (c, _relay) = connect().await;
    let info = c.server_info().expect("initialize result");
    assert_eq!(info.server.name, "echo");
    assert!(c.supports(Capability::Retrieve));
    assert!(!c.supports(Capability::Embed));
    let res = c.search("wing lift", 3).await.expect("retrieve");
    assert_eq!(res.hits.len(), 1);
    assert_eq!(res.hits[0].key(), "wing lift");
    assert_eq!(c.in_flight(), 0);
}

#[tokio::test]
async fn calls_are_pipelined_and_correlated_by_id() {
    let (c, _relay) = connect().await;
    let started = Instant::now();
    let queries: Vec<String> = (0..6).map(|i| format!("slow {i}")).collect();
    let results = futures::future::join_all(queries.iter().map(|q| c.search(q.as_str(), 1))).await;
    for (q, r) in queries.iter().zip(results) {
        assert_eq!(&r.expect("answer").hits[0].key(), q, "answer went to the wrong call");
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "calls were serialised: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_gated_call_is_refused_before_any_io() {
    let (c, _relay) = connect().await;
    let sent = c.frames_sent();
    let err = c.embed(EmbedParams::texts(["x"])).await.unwrap_err();
    assert!(matches!(err, ClientError::CapabilityMissing { .. }), "{err}");
    let mut p = RetrieveParams::new("wing", 1);
    p.mode = Some(rcp_wire::Mode::Dense);
    let err = c.retrieve(p).await.unwrap_err();
    assert!(matches!(err, ClientError::OptionUnsupported { ref option, .. } if option == "mode"), "{err}");
    assert_eq!(c.frames_sent(), sent, "a refused call must write nothing");
}

#[tokio::test]
async fn the_server_going_away_fails_calls_in_flight() {
    let (c, relay) = connect().await;
    let calls = futures::future::join_all((0..3).map(|_| c.search("slow", 1)));
    let kill = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        relay.abort();
    };
    let (results, ()) = tokio::join!(calls, kill);
    for r in results {
        assert!(matches!(r, Err(ClientError::Closed(_))), "{r:?}");
    }
    assert!(c.closed_reason().is_some());
    assert_eq!(c.in_flight(), 0);
    assert!(matches!(c.search("wing", 1).await, Err(ClientError::Closed(_))));
}
