//! A pipe pushes back instead of refusing: one peer pipelining far more searches than the CPU
//! lanes hold, over a real byte stream, gets every answer and no `-32011`, while the server
//! reads no further than the lanes have room for.
//!
//! One test in its own binary, so the counters it reads are its own.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcp_server::{HandlerResult, Lane, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const CPU_THREADS: usize = 2;
const CPU_QUEUE: usize = 8;
/// Requests pipelined at once: 25 times what the lanes hold.
const N: u64 = 250;

/// Handlers started and not yet finished, and the most there were at once.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
static PEAK_IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// An engine whose every search is 2 ms of blocking work on the read lane.
struct Busy;

impl Retrieve for Busy {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let now = IN_HANDLER.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK_IN_HANDLER.fetch_max(now, Ordering::SeqCst);
        let ran = ctx.run_cpu(Lane::Read, || std::thread::sleep(Duration::from_millis(2))).await;
        IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
        ran?;
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_deeper_than_the_lanes_is_paced_and_fully_answered() {
    let server = Server::builder("busy", "0").retrieve(Busy).cpu_threads(CPU_THREADS).cpu_queue(CPU_QUEUE).build();
    let (client, server_side) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("an answer within 30 s")
            .expect("read")
            .expect("the stream is open");
        serde_json::from_str(&line).expect("json")
    };

    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .await
        .expect("write");
    assert!(next().await["result"].is_object());

    // Every search in one write: the server has all of them in its buffer at once.
    let flood: String = (1..=N)
        .map(|id| format!("{}\n", json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":"q","k":1}})))
        .collect();
    w.write_all(flood.as_bytes()).await.expect("write");

    let mut answered = BTreeSet::new();
    for _ in 0..N {
        let answer = next().await;
        assert!(answer["result"]["hits"].is_array(), "a pipe is paced, never refused: {answer}");
        assert!(answered.insert(answer["id"].as_u64().expect("id")), "answered twice: {answer}");
    }
    assert_eq!(answered, (1..=N).collect::<BTreeSet<_>>());

    // Reading stopped while the lanes were full: the server never had more searches started
    // than the lanes hold, plus the few read before it saw them full.
    let peak = PEAK_IN_HANDLER.load(Ordering::SeqCst);
    let lanes = CPU_THREADS + CPU_QUEUE;
    assert!(peak <= lanes + 16, "{peak} searches were started at once; the lanes hold {lanes}");

    // The session still serves afterwards.
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n").await.expect("write");
    assert_eq!(next().await["id"], "p");
}
