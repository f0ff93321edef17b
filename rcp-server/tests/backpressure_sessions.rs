//! Two pipes into one server pace apart: while one peer's requests wait for room in the full
//! CPU lanes (and its stream is not read), another peer's stream is still read, so its `ping`
//! is answered at once and its own search waits its turn in the lanes, never `-32011`.

use std::time::{Duration, Instant};

use rcp_server::{HandlerResult, Lane, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

/// An engine whose every search is 600 ms of blocking work on the read lane.
struct Slow;

impl Retrieve for Slow {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        ctx.run_cpu(Lane::Read, || std::thread::sleep(Duration::from_millis(600))).await?;
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

struct Peer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    w: WriteHalf<DuplexStream>,
}

impl Peer {
    async fn connect(server: &Server) -> Self {
        let (client, server_side) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_side);
        let server = server.clone();
        tokio::spawn(async move { server.serve((server_read, server_write)).await });
        let (read, w) = tokio::io::split(client);
        let mut peer = Peer { lines: BufReader::new(read).lines(), w };
        peer.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}})).await;
        assert!(peer.next().await["result"].is_object());
        peer
    }

    async fn send(&mut self, frame: &Value) {
        self.w.write_all(format!("{frame}\n").as_bytes()).await.expect("write");
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("an answer within 30 s")
            .expect("read")
            .expect("the stream is open");
        serde_json::from_str(&line).expect("json")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_waiting_for_the_lanes_does_not_stop_reading_another() {
    // One worker, one queued job: the third concurrent search waits for room.
    let server = Server::builder("slow", "0").retrieve(Slow).cpu_threads(1).cpu_queue(1).build();
    let mut flooder = Peer::connect(&server).await;
    let mut other = Peer::connect(&server).await;

    // 4 searches of 600 ms on one worker and one queue place: the third waits for room (and
    // the flooder's stream is not read further) until the first is done, at 600 ms.
    for id in 1..=4 {
        flooder.send(&json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":"q","k":1}})).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;

    // The other peer's stream is still read: its ping comes back at once, not when the
    // flooder's waiting search finds room.
    let asked = Instant::now();
    other.send(&json!({"jsonrpc":"2.0","id":"p","method":"ping"})).await;
    let pong = other.next().await;
    assert_eq!(pong["id"], "p", "{pong}");
    assert!(asked.elapsed() < Duration::from_millis(250), "ping took {:?}", asked.elapsed());

    // Its own search waits its turn in the lanes (a pipe is paced, never refused).
    other.send(&json!({"jsonrpc":"2.0","id":"s","method":"retrieve","params":{"query":"q","k":1}})).await;
    let answer = other.next().await;
    assert!(answer["result"]["hits"].is_array(), "{answer}");

    for _ in 1..=4 {
        let answer = flooder.next().await;
        assert!(answer["result"]["hits"].is_array(), "{answer}");
    }
}
