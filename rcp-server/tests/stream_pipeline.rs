//! The stream transports' pipeline end to end over an in-memory byte stream: a client that
//! stops reading gets backpressure (a bounded number of answers is produced, then the server
//! stops reading) and loses nothing once it reads again; handlers that do their CPU work
//! inline stop being polled on the reader's side, so a ping behind them is not held up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rcp_server::{HandlerResult, Lane, RequestContext, Retrieve, RetrieveRequest, Server, ServerOptions};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Bytes of text in each of [`Big`]'s answers.
const ANSWER: usize = 64 * 1024;

/// Answers every search at once with one hit of [`ANSWER`] bytes, counting its calls.
struct Big(&'static AtomicUsize);

impl Retrieve for Big {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let mut hit = Hit::new("big", 1.0);
        hit.text = Some("x".repeat(ANSWER));
        Ok(RetrieveResult::from_hits(vec![hit]))
    }
}

/// Spins for `ms` milliseconds before answering, without ever waiting (CPU work done inline,
/// not on the executor: what the pipeline must not keep polling on the reader's side).
struct Spins(u64);

impl Retrieve for Spins {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let until = Instant::now() + Duration::from_millis(self.0);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

fn request(id: u64) -> String {
    format!("{}\n", json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":"q","k":1}}))
}

/// A request with an 8 KB query, so that a few hundred outgrow every buffer on the way in.
fn long_request(id: u64) -> String {
    let query = "q ".repeat(4096);
    format!("{}\n", json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":query,"k":1}}))
}

const INITIALIZE: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_gets_backpressure_and_loses_nothing() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let options = ServerOptions { max_in_flight: 2, max_queued_output: 4 * ANSWER, ..ServerOptions::default() };
    let server = Server::builder("big", "0").retrieve(Big(&CALLS)).options(options).build();
    let (client, server_side) = tokio::io::duplex(ANSWER);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();

    w.write_all(INITIALIZE).await.expect("write");
    let init: Value = serde_json::from_str(&lines.next_line().await.expect("read").expect("line")).expect("json");
    assert!(init["result"].is_object(), "{init}");

    // 300 requests (2.4 MB) whose answers (19 MB) the client does not read for now. The
    // writes are in their own task: once the server stops reading, they block.
    const N: u64 = 300;
    let writer = tokio::spawn(async move {
        for id in 1..=N {
            w.write_all(long_request(id).as_bytes()).await.expect("write");
        }
        w
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let produced = CALLS.load(Ordering::SeqCst);
    // Bounded by the queue's budget (4 answers), the answers being written or held by the
    // reader's side (a few), the running slots (2) and the stream's buffer (1): never by N.
    assert!(produced <= 16, "{produced} answers produced for a client that reads nothing");
    assert!(!writer.is_finished(), "the server kept reading although nothing was read from it");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(CALLS.load(Ordering::SeqCst), produced, "no progress while the client does not read");

    // Reading again: every request is answered, once.
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < N as usize {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("answers keep coming")
            .expect("read")
            .expect("line");
        let v: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["result"]["hits"][0]["text"].as_str().map(str::len), Some(ANSWER), "{}", &line[..80]);
        assert!(seen.insert(v["id"].as_u64().expect("id")), "answered twice: {}", v["id"]);
    }
    let _ = writer.await.expect("writer");
    assert_eq!(CALLS.load(Ordering::SeqCst), N as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_that_work_inline_stop_holding_up_the_reader() {
    let server = Server::builder("spins", "0").retrieve(Spins(30)).build();
    let (client, server_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut next = async || -> Value {
        let line =
            tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.expect("answer").expect("read");
        serde_json::from_str(&line.expect("line")).expect("json")
    };
    w.write_all(INITIALIZE).await.expect("write");
    assert!(next().await["result"].is_object());

    // Three in a row run long on their first poll: the pipeline notices.
    for id in 1..=3 {
        w.write_all(request(id).as_bytes()).await.expect("write");
        assert_eq!(next().await["id"], id);
    }
    // Now a slow search and a ping in one write: the search runs elsewhere, the ping is
    // answered first.
    let ping = json!({"jsonrpc":"2.0","id":"p","method":"ping"});
    w.write_all(format!("{}{ping}\n", request(4)).as_bytes()).await.expect("write");
    let first = next().await;
    assert_eq!(first["id"], "p", "the ping waited behind a 30 ms inline handler: {first}");
    assert_eq!(next().await["id"], 4);
}

/// Waits `ms` on a timer (not the CPU), then answers; when asked for progress, its CPU job
/// keeps reporting for `ms` more after that, past any deadline.
struct Sleeps(u64);

impl Retrieve for Sleeps {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let ms = self.0;
        if ctx.wants_progress() {
            let job = ctx.clone();
            ctx.run_cpu(Lane::Read, move || {
                for i in 0..(2 * ms / 10) {
                    std::thread::sleep(Duration::from_millis(10));
                    job.progress(i as f64 / 100.0, "sleep", "still here");
                }
            })
            .await?;
        } else {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

/// A server on an in-memory stream, initialised; the client's writer and its lines.
async fn session(server: Server) -> (tokio::io::WriteHalf<tokio::io::DuplexStream>, Lines) {
    let (client, server_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    tokio::spawn(async move { server.serve((server_read, server_write)).await });
    let (read, mut w) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    w.write_all(INITIALIZE).await.expect("write");
    let line = lines.next_line().await.expect("read").expect("line");
    assert!(line.contains("\"result\""), "{line}");
    (w, lines)
}

async fn next(lines: &mut Lines, within: Duration) -> Option<Value> {
    let line = tokio::time::timeout(within, lines.next_line()).await.ok()?.expect("read")?;
    Some(serde_json::from_str(&line).expect("json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_holding_shutdown_is_answered_whole_and_last() {
    let server = Server::builder("sleeps", "0").retrieve(Sleeps(150)).build();
    let (mut w, mut lines) = session(server).await;
    // A slow request in flight, then a batch of another slow request and `shutdown`.
    let slow = request(1);
    let batch = json!([
        {"jsonrpc":"2.0","id":2,"method":"retrieve","params":{"query":"q","k":1}},
        {"jsonrpc":"2.0","id":3,"method":"shutdown"}
    ]);
    w.write_all(format!("{slow}{batch}\n").as_bytes()).await.expect("write");
    let first = next(&mut lines, Duration::from_secs(10)).await.expect("an answer");
    assert_eq!(first["id"], 1, "the request in flight is answered before the shutdown batch: {first}");
    let answer = next(&mut lines, Duration::from_secs(10)).await.expect("the batch is answered");
    let members = answer.as_array().expect("an array");
    let ids: Vec<&Value> = members.iter().map(|m| &m["id"]).collect();
    assert_eq!(members.len(), 2, "{answer}");
    assert!(ids.contains(&&json!(2)) && ids.contains(&&json!(3)), "{answer}");
    assert!(members.iter().all(|m| m["result"].is_object()), "{answer}");
    assert!(next(&mut lines, Duration::from_millis(300)).await.is_none(), "nothing after the shutdown answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_progress_follows_the_answer_of_a_timed_out_request() {
    let server = Server::builder("sleeps", "0").retrieve(Sleeps(150)).streaming().build();
    let (mut w, mut lines) = session(server).await;
    // The CPU job reports every 10 ms for 300 ms; the request times out after 50.
    let req = json!({"jsonrpc":"2.0","id":7,"method":"retrieve",
        "params":{"query":"q","k":1,"_meta":{"progressToken":"t","deadlineMs":50}}});
    w.write_all(format!("{req}\n").as_bytes()).await.expect("write");
    let mut answered = false;
    while let Some(frame) = next(&mut lines, Duration::from_millis(600)).await {
        if frame["id"] == 7 {
            assert_eq!(frame["error"]["code"], -32014, "{frame}");
            answered = true;
        } else {
            assert_eq!(frame["method"], "notifications/progress", "{frame}");
            assert!(!answered, "a progress frame came after the request's answer: {frame}");
        }
    }
    assert!(answered, "the request was answered");
}
