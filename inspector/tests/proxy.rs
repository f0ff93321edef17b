//! The inspector's HTTP surface without a browser: the RCP proxy in front of a stdio engine
//! and an HTTP engine (JSON and SSE), the wire log and its bounds, the guards, method paths
//! outside the method table, secrets kept off the page, engine failures, and `rcpctl inspect`
//! handing over to `rcp-inspect`.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Kills a child process when dropped.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `program args` and returns it with the URL it printed as `RCP_INSPECT_URL=...`.
fn start(program: &Path, args: &[&str]) -> (Reaper, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
    let stderr = child.stderr.take().expect("stderr");
    let reaper = Reaper(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("RCP_INSPECT_URL=") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).expect("RCP_INSPECT_URL=... on stderr");
    (reaper, url)
}

fn inspector() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rcp-inspect"))
}

/// `GET url` with a client of the test harness ([`rcp_testkit::http_client`]).
async fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    rcp_testkit::http_client().get(url).send().await
}

async fn post(url: &str, body: &Value, accept: Option<&str>) -> reqwest::Response {
    let mut req =
        rcp_testkit::http_client().post(url).header("content-type", "application/json").body(body.to_string());
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    req.send().await.expect("POST")
}

/// The data of each SSE event of `text`.
fn sse_frames(text: &str) -> Vec<Value> {
    text.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"))
        })
        .collect()
}

async fn wire(url: &str) -> Vec<Value> {
    let v: Value = get(format!("{url}api/wire")).await.expect("wire").json().await.expect("json");
    v["entries"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn stdio_engine_behind_the_proxy() {
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let command = format!("{} serve", bm25.display());
    let (_inspector, url) = start(inspector(), &["--stdio", &command]);
    let rpc = format!("{url}rpc/rcp-bm25");

    let targets: Value = get(format!("{url}api/targets")).await.expect("targets").json().await.expect("json");
    assert_eq!(targets["engines"][0]["id"], "rcp-bm25");
    assert_eq!(targets["engines"][0]["transport"], "stdio");
    assert_eq!(targets["registry"], false);

    // The session negotiated once; initialize is answered from that handshake, with our id.
    let init = json!({"jsonrpc": "2.0", "id": "mine", "method": "initialize", "params": {"protocolVersion": 1}});
    let v: Value = post(&format!("{rpc}/initialize"), &init, None).await.json().await.expect("json");
    assert_eq!(v["id"], "mine");
    assert_eq!(v["result"]["capabilities"]["retrieve"]["scoreScale"], "bm25");

    // JSON: progress frames are dropped, the answer keeps the caller's id.
    let req = json!({"jsonrpc": "2.0", "id": 7, "method": "retrieve",
        "params": {"query": "search", "k": 2, "_meta": {"progressToken": "tok"}}});
    let v: Value = post(&format!("{rpc}/retrieve"), &req, None).await.json().await.expect("json");
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["hits"].as_array().map(Vec::len), Some(2));

    // SSE: progress frames, then exactly one response, last.
    let resp = post(&format!("{rpc}/retrieve"), &req, Some("text/event-stream")).await;
    assert!(resp.headers()["content-type"].to_str().unwrap_or("").starts_with("text/event-stream"));
    let frames = sse_frames(&resp.text().await.expect("body"));
    assert!(frames.len() >= 2, "progress then the response: {frames:?}");
    let (last, progress) = frames.split_last().expect("frames");
    assert_eq!(last["id"], 7);
    assert!(progress.iter().all(|f| f["method"] == "notifications/progress" && f["params"]["progressToken"] == "tok"));

    // A notification is forwarded and answered 204; a path/body method mismatch is -32600.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 99}});
    assert_eq!(post(&format!("{rpc}/notifications/cancel"), &cancel, None).await.status(), 204);
    let v: Value = post(&format!("{rpc}/ping"), &req, None).await.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32600);

    // The wire log holds the engine's side of each exchange: the session's own ids, both ways.
    let entries = wire(&url).await;
    let sent: Vec<&Value> =
        entries.iter().filter(|e| e["dir"] == "sent" && e["frame"]["method"] == "retrieve").collect();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|e| e["frame"]["id"].is_u64() && e["source"] == "page"));
    let answered = entries.iter().filter(|e| e["dir"] == "received" && e["frame"]["result"]["hits"].is_array()).count();
    assert_eq!(answered, 2);
    assert!(entries.iter().any(|e| e["dir"] == "sent" && e["frame"]["method"] == "notifications/cancel"));
    assert!(entries.iter().any(|e| e["source"] == "inspector" && e["frame"]["method"] == "initialize"));

    // Guards: another Host (DNS rebinding) and non-JSON POSTs are refused.
    let r = rcp_testkit::http_client().get(format!("{url}api/targets")).header("host", "evil.example:80").send().await;
    assert_eq!(r.expect("GET").status(), 403);
    let r = rcp_testkit::http_client()
        .post(format!("{rpc}/ping"))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await;
    assert_eq!(r.expect("POST").status(), 415);

    let health: Value = get(format!("{url}api/health/rcp-bm25")).await.expect("health").json().await.expect("json");
    assert_eq!(health["running"], true);
    assert!(health["pid"].is_u64());
}

/// `rcp-bm25 serve --http` on a free port, requiring the bearer token `s3cret-token`, once it
/// answers `/readyz` 200.
async fn bm25_http() -> (Reaper, u16) {
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let server = Command::new(&bm25)
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--tokens-env", "INSPECT_TEST_TOKENS"])
        .env("INSPECT_TEST_TOKENS", "s3cret-token")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rcp-bm25 --http");
    let server = Reaper(server);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Ready, not only listening: the engine answers /readyz 200 once its index is open.
    loop {
        let ready = get(format!("http://127.0.0.1:{port}/readyz")).await.is_ok_and(|r| r.status() == 200);
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "rcp-bm25 --http was not ready within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (server, port)
}

#[tokio::test]
async fn http_engine_sse_is_passed_through_and_logged() {
    let (_server, port) = bm25_http().await;
    let base = format!("http://127.0.0.1:{port}/rcp");
    let (_inspector, url) = {
        // `start` inherits this process's environment; set the variable for the child only.
        let mut child = Command::new(inspector())
            .args(["--http", &base, "--token-env", "INSPECT_TEST_TOKEN"])
            .env("INSPECT_TEST_TOKEN", "s3cret-token")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rcp-inspect");
        let stderr = child.stderr.take().expect("stderr");
        let line = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("RCP_INSPECT_URL=").map(str::to_owned))
            .expect("RCP_INSPECT_URL=...");
        (Reaper(child), line)
    };
    let targets = get(format!("{url}api/targets")).await.expect("targets").text().await.expect("text");
    assert!(!targets.contains("s3cret"), "the token never reaches the page: {targets}");
    assert!(targets.contains("Authorization: Bearer $INSPECT_TEST_TOKEN"), "curl gets the variable: {targets}");
    let rpc = format!("{url}rpc/engine");
    let req = json!({"jsonrpc": "2.0", "id": "s1", "method": "retrieve",
        "params": {"query": "search", "k": 3, "_meta": {"progressToken": "p"}}});
    let body = post(&format!("{rpc}/retrieve"), &req, Some("text/event-stream")).await.text().await.expect("body");
    let frames = sse_frames(&body);
    assert_eq!(frames.last().map(|f| f["id"].clone()), Some(json!("s1")), "{body}");
    assert!(frames.len() >= 2, "the engine's progress frames came through: {frames:?}");

    // Every SSE event was logged as a received frame.
    let entries = wire(&url).await;
    let received = entries.iter().filter(|e| e["dir"] == "received").count();
    assert_eq!(received, frames.len());

    let health: Value = get(format!("{url}api/health/engine")).await.expect("health").json().await.expect("json");
    assert_eq!(health["healthz"]["status"], 200);
    assert_eq!(health["readyz"]["status"], 200);

    // The federation of the Compare panel needs a registry.
    let fed = json!({"params": {"query": "search", "k": 3}, "fusion": "nope"});
    assert_eq!(post(&format!("{url}api/federate"), &fed, None).await.status(), 400);
}

#[tokio::test]
async fn an_engine_that_cannot_start_is_reported_not_fatal() {
    let (_inspector, url) = start(inspector(), &["--stdio", "/nonexistent/rcp-engine serve"]);
    let targets: Value = get(format!("{url}api/targets")).await.expect("targets").json().await.expect("json");
    let message = targets["engines"][0]["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("cannot start /nonexistent/rcp-engine"), "{message}");
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}});
    let v: Value = post(&format!("{url}rpc/rcp-engine/ping"), &req, None).await.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(v["id"], 1);
}

#[tokio::test]
async fn rcp_inspect_subcommand_runs_the_inspector() {
    let rcp = rcp_testkit::workspace_bin("rcp-client", "rcpctl");
    // `rcpctl` finds rcp-inspect beside itself; place both in a directory of their own so the test
    // does not depend on PATH.
    let dir = tempfile::tempdir().expect("tempdir");
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let local_rcp = dir.path().join("rcpctl");
    link_or_copy(&rcp, &local_rcp);

    // Without rcp-inspect anywhere: a clear error.
    let out = Command::new(&local_rcp).args(["inspect", "--stdio", "x"]).env("PATH", "").output().expect("run rcp");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rcp-inspect") && err.contains("cargo build -p rcp-inspector"), "{err}");

    link_or_copy(inspector(), &dir.path().join("rcp-inspect"));
    let command = format!("{} serve", bm25.display());
    let (_inspector, url) = start(&local_rcp, &["inspect", "--stdio", &command, "--port", "0"]);
    let page = get(&url).await.expect("GET /").text().await.expect("html");
    assert!(page.contains("<title>RCP Inspector</title>"));
    for asset in ["app.js", "app.css"] {
        let r = get(format!("{url}{asset}")).await.expect("asset");
        assert_eq!(r.status(), 200, "{asset}");
    }
}

/// Issue #29, case 10: a method path that climbs out of the base (`..%2F..%2Fmetrics`) was
/// forwarded to the engine's `/metrics` with the bearer token, and `X-Api-Key` values were
/// shown by `/api/targets`.
#[tokio::test]
async fn method_paths_outside_the_method_table_are_refused_and_secrets_are_not_shown() {
    let (_server, port) = bm25_http().await;
    let base = format!("http://127.0.0.1:{port}/rcp");
    let mut child = Command::new(inspector())
        .args(["--http", &base, "--token-env", "INSPECT_TEST_TOKEN", "--header", "X-Api-Key: k3y-s3cret-value"])
        .args(["--header", "X-Team: retrieval"])
        .env("INSPECT_TEST_TOKEN", "s3cret-token")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rcp-inspect");
    let stderr = child.stderr.take().expect("stderr");
    let _inspector = Reaper(child);
    let url = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("RCP_INSPECT_URL=").map(str::to_owned))
        .expect("RCP_INSPECT_URL=...");

    let targets = get(format!("{url}api/targets")).await.expect("targets").text().await.expect("text");
    assert!(!targets.contains("k3y-s3cret-value") && !targets.contains("s3cret-token"), "{targets}");
    assert!(targets.contains("X-Api-Key: $RCP_X_API_KEY"), "curl gets a variable: {targets}");
    assert!(targets.contains("X-Team: retrieval"), "other headers are shown: {targets}");

    // RCP methods are forwarded (and the engine's metrics now have something to show). Before
    // the fix `..%2F..%2Fmetrics` reached the engine's GET-only `/metrics` route (`405`).
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let v: Value = post(&format!("{url}rpc/engine/ping"), &ping, None).await.json().await.expect("json");
    assert_eq!(v["result"], json!({}), "{v}");
    for path in ["..%2F..%2Fmetrics", "..%2Fmetrics", "metrics", "x-acme%2Ffoo", "notifications%2Fprogress"] {
        let r = post(&format!("{url}rpc/engine/{path}"), &ping, None).await;
        let status = r.status();
        let text = r.text().await.expect("body");
        assert!(!text.contains("rcp_requests_total"), "{path}: the engine's metrics reached the page: {text}");
        assert_eq!(status, 404, "{path}: {text}");
        let v: Value = serde_json::from_str(&text).expect("a JSON-RPC error");
        assert_eq!((&v["error"]["code"], &v["id"]), (&json!(-32601), &json!(1)), "{path}: {v}");
    }
}

/// The resident set of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Issue #29, case 10: 400 requests of 1.9 MB then `GET /api/wire` took the inspector from
/// 9.8 MB to 769 MB, then 2.9 GB (the wire log kept every frame whole, and the endpoint copied
/// it). The log is now a ring bounded by bytes, each frame cut with a marker, and the endpoint
/// streams: the peak stays within 64 MB of the idle process.
#[tokio::test]
async fn large_frames_keep_the_wire_log_bounded() {
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let command = format!("{} serve", bm25.display());
    let mut child = Command::new(inspector())
        .args(["--stdio", &command])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rcp-inspect");
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let _inspector = Reaper(child);
    let url = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("RCP_INSPECT_URL=").map(str::to_owned))
        .expect("RCP_INSPECT_URL=...");
    let rpc = format!("{url}rpc/rcp-bm25/ping");
    let small = json!({"jsonrpc": "2.0", "id": 0, "method": "ping"});
    for _ in 0..3 {
        assert_eq!(post(&rpc, &small, None).await.status(), 200);
        wire(&url).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = rss(pid);
    assert!(idle > 0, "no RSS reading for {pid}");
    let sampler = rcp_testkit::PeakSampler::start(idle, Duration::from_millis(10), move || rss(pid));

    let pad = "x".repeat(1_500_000);
    let frames = 50;
    for id in 1..=frames {
        let big = json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"pad": pad}});
        let status = post(&rpc, &big, None).await.status();
        assert_eq!(status, 200, "request {id}");
    }
    let mut logged = Vec::new();
    for _ in 0..3 {
        logged = wire(&url).await;
    }
    let peak = sampler.stop();
    let growth = peak.saturating_sub(idle);
    eprintln!("inspector RSS: idle {} MB, peak {} MB after {frames} frames of 1.5 MB", idle >> 20, peak >> 20);
    assert!(growth < 64 << 20, "RSS grew by {} MB (idle {} MB)", growth >> 20, idle >> 20);

    let big: Vec<&Value> = logged.iter().filter(|e| e["dir"] == "sent" && e["truncated"].is_u64()).collect();
    assert_eq!(big.len(), frames as usize, "every large frame is logged, truncated");
    let e = big[0];
    assert_eq!(e["frame"]["method"], "ping", "{}", e["frame"]);
    assert_eq!(e["frame"]["params"], "[truncated]");
    assert!(e["raw"].as_str().is_some_and(|r| r.len() < 100_000 && r.ends_with(" kept]")));
}

/// Hard-links `from` to `to` (cheap for large binaries), copying when linking is impossible.
fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

/// `examples/tiny_engine` (package rcp-examples), built when missing: its `_meta.x-tiny-delayMs`
/// makes a retrieve slow and stop early when cancelled.
fn tiny_engine() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let profile = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let bin = profile.join("examples").join(format!("tiny_engine{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = profile.parent().expect("target dir");
        let status = Command::new(cargo)
            .args(["build", "-p", "rcp-examples", "--example", "tiny_engine", "--target-dir"])
            .arg(target)
            .status()
            .expect("cargo build");
        assert!(status.success() && bin.is_file(), "building tiny_engine failed");
    }
    bin
}

#[tokio::test]
async fn cancel_by_the_callers_id_and_when_the_caller_goes_away() {
    let tiny = tiny_engine();
    let (_inspector, url) = start(inspector(), &["--stdio", tiny.to_str().expect("utf-8 path")]);
    let engine = tiny.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
    let rpc = format!("{url}rpc/{engine}");
    let slow = |id: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "retrieve",
            "params": {"query": "rust", "k": 3, "_meta": {"progressToken": id, "x-tiny-delayMs": 20000}}})
    };

    // notifications/cancel naming the caller's id reaches the engine as the session's id; the
    // stream ends with the engine's answer to the cancelled request.
    let started = Instant::now();
    let req = slow("c1");
    let target = format!("{rpc}/retrieve");
    let stream = tokio::spawn(async move { post(&target, &req, Some("text/event-stream")).await.text().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": "c1"}});
    assert_eq!(post(&format!("{rpc}/notifications/cancel"), &cancel, None).await.status(), 204);
    let body =
        tokio::time::timeout(Duration::from_secs(10), stream).await.expect("ended").expect("task").expect("body");
    let last = sse_frames(&body).pop().expect("a final frame");
    assert_eq!(last["id"], "c1");
    assert_eq!(last["error"]["code"], -32006, "cancelled: {last}");
    assert!(started.elapsed() < Duration::from_secs(10), "cancelled long before the 20 s delay");
    let entries = wire(&url).await;
    let sent_id = entries
        .iter()
        .find(|e| e["dir"] == "sent" && e["frame"]["method"] == "retrieve")
        .map(|e| e["frame"]["id"].clone())
        .expect("the retrieve");
    let cancel_sent = entries.iter().find(|e| e["dir"] == "sent" && e["frame"]["method"] == "notifications/cancel");
    assert_eq!(cancel_sent.map(|e| e["frame"]["params"]["id"].clone()), Some(sent_id), "remapped to the session's id");

    // A caller that goes away mid-request: the inspector cancels it at the engine.
    let req = slow("c2");
    let target = format!("{rpc}/retrieve");
    let gone = tokio::spawn(async move { post(&target, &req, Some("text/event-stream")).await.text().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gone.abort();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let entries = wire(&url).await;
        let cancels =
            entries.iter().filter(|e| e["dir"] == "sent" && e["frame"]["method"] == "notifications/cancel").count();
        let answered =
            entries.iter().filter(|e| e["dir"] == "received" && e["frame"]["error"]["code"] == -32006).count();
        if cancels == 2 && answered == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "no cancel after the caller went away: {entries:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
