//! The bounded CPU executor end to end: a flood of pipelined slow requests on a session shared
//! transports serve (a [`rcp_server::transport::Connection`], as HTTP's are) gets `-32011`
//! beyond the bound, `ping` stays fast meanwhile, a cancelled queued request never runs, and
//! the process gains no more threads than the executor's. (A pipe's one peer is paced instead:
//! `backpressure.rs`.)
//!
//! One test in its own binary, so the thread count it reads is this test's alone.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rcp_server::{HandlerResult, Lane, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_testkit::PeakSampler;
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const CPU_THREADS: usize = 2;
const CPU_QUEUE: usize = 4;
const JOB: Duration = Duration::from_millis(300);

/// The ids of the requests whose job started, in start order.
static STARTED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn started() -> Vec<u64> {
    STARTED.lock().map(|s| s.clone()).unwrap_or_default()
}

/// An engine whose every search is 300 ms of blocking work on the read lane.
struct Slow;

impl Retrieve for Slow {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let id = ctx.request_id().to_string().parse::<u64>().unwrap_or(0);
        ctx.run_cpu(Lane::Read, move || {
            STARTED.lock().expect("started").push(id);
            std::thread::sleep(JOB);
        })
        .await?;
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

fn threads() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_refused_beyond_the_bound_while_ping_stays_fast() {
    let server = Server::builder("slow", "0").retrieve(Slow).cpu_threads(CPU_THREADS).cpu_queue(CPU_QUEUE).build();
    let conn = server.connect(|_| {});
    let (answers_tx, mut answers_rx) = mpsc::unbounded_channel::<Value>();
    // Each frame is dispatched now, in order; its answer is sent on as it completes.
    let send = |frame: &Value| {
        let reply = conn.handle(frame.to_string().as_bytes());
        let tx = answers_tx.clone();
        tokio::spawn(async move {
            if let Some(bytes) = reply.await {
                let _ = tx.send(serde_json::from_slice(&bytes).expect("json"));
            }
        });
    };
    let mut next =
        async |timeout: Duration| -> Option<Value> { tokio::time::timeout(timeout, answers_rx.recv()).await.ok()? };

    send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}));
    assert!(next(Duration::from_secs(5)).await.expect("initialize answered")["result"].is_object());
    let baseline = threads();
    let sampler = PeakSampler::start(baseline, Duration::from_millis(2), threads);

    // 40 pipelined searches at once: 2 run, 4 wait, the rest must be refused at once.
    const N: u64 = 40;
    for id in 1..=N {
        send(&json!({"jsonrpc":"2.0","id":id,"method":"retrieve","params":{"query":"q","k":1}}));
    }

    let mut refused = BTreeSet::new();
    while let Some(answer) = next(Duration::from_millis(150)).await {
        assert_eq!(answer["error"]["code"], -32011, "only refusals come back before a job ends: {answer}");
        assert!(answer["error"]["data"]["retryAfterMs"].as_u64().is_some_and(|ms| ms >= 1), "{answer}");
        refused.insert(answer["id"].as_u64().expect("id"));
    }
    let admitted: Vec<u64> = (1..=N).filter(|id| !refused.contains(id)).collect();
    assert!((CPU_THREADS + CPU_QUEUE..=CPU_THREADS + CPU_QUEUE + 2).contains(&admitted.len()), "admitted {admitted:?}");

    // Cancel an admitted request whose job has not started: it is queued.
    let running = started();
    assert_eq!(running.len(), CPU_THREADS, "as many jobs run as there are CPU threads: {running:?}");
    let cancelled = *admitted.iter().find(|id| !running.contains(id)).expect("a queued request");
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancel","params":{"id":cancelled}});
    let ping = json!({"jsonrpc":"2.0","id":"p","method":"ping"});
    let sent = Instant::now();
    send(&cancel);
    send(&ping);
    let mut answers = Vec::new();
    let ping_rtt = loop {
        let answer = next(Duration::from_secs(5)).await.expect("an answer");
        if answer["id"] == "p" {
            break sent.elapsed();
        }
        answers.push(answer);
    };
    assert!(ping_rtt < Duration::from_millis(100), "ping took {ping_rtt:?} while the executor was saturated");

    while answers.len() < admitted.len() {
        answers.push(next(Duration::from_secs(10)).await.expect("every admitted request is answered"));
    }
    for answer in &answers {
        if answer["id"] == cancelled {
            assert_eq!(answer["error"]["code"], -32006, "{answer}");
        } else {
            assert!(answer["result"]["hits"].is_array(), "{answer}");
        }
    }
    // Give a (wrongly) dequeued cancelled job time to run before counting.
    tokio::time::sleep(JOB + Duration::from_millis(100)).await;
    let ran = started();
    assert!(!ran.contains(&cancelled), "the cancelled queued job ran: {ran:?}");
    assert_eq!(ran.len(), admitted.len() - 1, "{ran:?}");

    // The sampler thread itself is one more; the executor adds at most CPU_THREADS.
    let grown = sampler.stop().saturating_sub(baseline);
    assert!(grown <= CPU_THREADS as u64 + 1, "threads grew by {grown} (baseline {baseline})");
}
