//! The gateway against engines that misbehave after a correct `initialize` (the
//! `hostile_engine` fixture): an endless stdio line, an endless HTTP body, endless and stalled
//! SSE events, an engine that stops reading, log floods on stdout and stderr, a byte that is
//! not UTF-8 on stderr, an engine that crashes on every call. Each time the gateway (a real
//! `rcp-gateway` process) answers the other requests, names the limit the engine broke, and
//! its peak RSS stays within 64 MB of its idle RSS.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::Engine;
use rcp_testkit::{MemField, status_kb};
use serde_json::{Value, json};

/// The headroom over idle RSS the gateway may use under any hostile engine.
const RSS_HEADROOM_KB: u64 = 64 * 1024;

fn hostile() -> String {
    env!("CARGO_BIN_EXE_hostile_engine").to_owned()
}

fn stdio_entry(id: &str, args: &[&str]) -> Value {
    let mut command = vec![hostile(), "--name".into(), id.into()];
    command.extend(args.iter().map(|s| (*s).to_owned()));
    json!({"id": id, "transport": "stdio", "command": command})
}

/// A process serving HTTP (a hostile engine, or a gateway), killed when dropped.
struct HttpEngine {
    child: Child,
    url: String,
}

impl HttpEngine {
    fn start(mode: &str) -> Self {
        let mut child = Command::new(hostile())
            .args(["--name", "h", "--mode", mode, "--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the HTTP fixture");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its URL");
        Self { child, url: line.trim().to_owned() }
    }

    fn entry(&self) -> Value {
        json!({"id": "h", "transport": "http", "url": self.url})
    }
}

impl Drop for HttpEngine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway over `entries`, with its stderr in a file, initialized.
struct Gateway {
    engine: Engine,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gateway {
    fn start(entries: Vec<Value>, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let registry = dir.path().join("rcp.json");
        std::fs::write(&registry, json!({"engines": entries}).to_string()).expect("registry");
        let stderr = dir.path().join("gateway.stderr");
        let gateway = rcp_testkit::workspace_bin("rcp-gateway", "rcp-gateway");
        // `exec` keeps the pid: the shell only redirects stderr to the file.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exec \"$0\" \"$@\" 2>\"$GATEWAY_STDERR\""])
            .arg(gateway)
            .args(["serve", "--registry"])
            .arg(&registry)
            .args(extra)
            .env("GATEWAY_STDERR", &stderr);
        let mut engine = Engine::from_command(cmd);
        engine.initialize();
        Self { engine, stderr, _dir: dir }
    }

    fn retrieve(&mut self, meta: Value) -> Value {
        self.engine.call("retrieve", json!({"query": "wing", "k": 3, "_meta": meta}))
    }

    /// Resident set now, in kB.
    fn rss_kb(&self) -> u64 {
        status_kb(self.engine.pid(), MemField::Rss)
    }

    /// Peak resident set since the start, in kB.
    fn peak_kb(&self) -> u64 {
        status_kb(self.engine.pid(), MemField::Peak)
    }

    fn stderr_bytes(&self) -> u64 {
        std::fs::metadata(&self.stderr).map(|m| m.len()).unwrap_or(0)
    }

    fn assert_answers(&mut self) {
        let r = self.engine.call("ping", json!({"nonce": 7}));
        assert_eq!(r["result"]["nonce"], 7, "{r}");
    }

    fn assert_peak_within(&self, idle_kb: u64, case: &str) {
        let peak = self.peak_kb();
        assert!(peak > 0 && idle_kb > 0, "{case}: RSS readings of the gateway");
        eprintln!("{case}: gateway idle RSS {idle_kb} kB, peak {peak} kB (+{} kB)", peak.saturating_sub(idle_kb));
        assert!(peak <= idle_kb + RSS_HEADROOM_KB, "{case}: peak RSS {peak} kB over idle {idle_kb} kB + 64 MB");
    }
}

fn ids(r: &Value) -> Vec<String> {
    r["result"]["hits"].as_array().into_iter().flatten().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect()
}

fn notes(r: &Value) -> String {
    r["result"]["usage"]["notes"].to_string()
}

/// A gateway over a good engine `a` and the hostile `h`, warmed by one retrieve; its idle RSS.
fn warm(entries: Vec<Value>, extra: &[&str]) -> (Gateway, u64) {
    let mut gw = Gateway::start(entries, extra);
    gw.assert_answers();
    let idle = gw.rss_kb();
    (gw, idle)
}

#[test]
fn an_endless_stdio_line_is_discarded_as_it_streams_and_the_gateway_keeps_serving() {
    // 2 GiB, streamed by the engine; the gateway refuses it at 16 MiB (the default limit).
    let entries = vec![stdio_entry("a", &[]), stdio_entry("h", &["--mode", "huge-line"])];
    let (mut gw, idle) = warm(entries, &[]);
    let started = Instant::now();
    let r = gw.retrieve(json!({}));
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert!(notes(&r).contains("engine 'h' failed") && notes(&r).contains("max_frame_bytes"), "{r}");
    assert!(started.elapsed() < Duration::from_secs(8), "the line was not cut short: {:?}", started.elapsed());
    gw.assert_answers();
    gw.assert_peak_within(idle, "2 GiB stdio line");
}

#[test]
fn an_endless_http_body_fails_its_call_at_the_frame_limit() {
    let h = HttpEngine::start("endless-body");
    let (mut gw, idle) = warm(vec![stdio_entry("a", &[]), h.entry()], &[]);
    let r = gw.retrieve(json!({}));
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert!(notes(&r).contains("max_frame_bytes"), "{r}");
    gw.assert_answers();
    gw.assert_peak_within(idle, "endless HTTP body");
}

#[test]
fn an_sse_event_that_never_ends_neither_grows_nor_stretches_the_deadline() {
    let h = HttpEngine::start("sse-flood");
    let (mut gw, idle) = warm(vec![stdio_entry("a", &[]), h.entry()], &[]);
    let started = Instant::now();
    let r = gw.retrieve(json!({"deadlineMs": 2000}));
    let took = started.elapsed();
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert!(notes(&r).contains("max_frame_bytes"), "{r}");
    assert!(took < Duration::from_millis(3500), "a 2 s deadline answered after {took:?}");
    gw.assert_answers();
    gw.assert_peak_within(idle, "endless SSE event");
}

#[test]
fn a_stalled_sse_event_fails_within_the_frame_timeout() {
    let h = HttpEngine::start("sse-stall");
    let (mut gw, idle) = warm(vec![stdio_entry("a", &[]), h.entry()], &["--frame-timeout-ms", "500"]);
    let started = Instant::now();
    let r = gw.retrieve(json!({}));
    let took = started.elapsed();
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert!(notes(&r).contains("frame_timeout"), "{r}");
    assert!(took < Duration::from_secs(5), "the stalled event held the call {took:?} (engine timeout 10 s)");
    gw.assert_answers();
    gw.assert_peak_within(idle, "stalled SSE event");
}

#[test]
fn an_engine_that_stops_reading_gets_calls_refused_once_its_queue_is_full() {
    let mut stalled = stdio_entry("h", &["--mode", "stall-stdin"]);
    stalled["collection"] = json!("stalled");
    let entries = vec![stdio_entry("a", &[]), stalled];
    let (mut gw, idle) = warm(entries, &["--engine-timeout-ms", "2000", "--max-queued-bytes", "1000000"]);
    // 40 pipelined queries of 100 KB to the engine that reads nothing: 4 MB, over a 1 MB
    // queue (the default is 8 MiB).
    let query = "wing ".repeat(20_000);
    let params = json!({"query": query, "k": 3, "_meta": {"collections": ["stalled"]}});
    let ids_sent: Vec<Value> = (0..40)
        .map(|i| {
            let id = json!(format!("q{i}"));
            gw.engine.send(&json!({"jsonrpc": "2.0", "id": id, "method": "retrieve", "params": params}));
            id
        })
        .collect();
    let answers: Vec<Value> = ids_sent.iter().map(|id| gw.engine.response_for(id, Duration::from_secs(30))).collect();
    let refused = answers.iter().filter(|r| r["error"].to_string().contains("max_queued_bytes")).count();
    assert!(refused >= 20, "{refused} calls refused for a full queue: {}", answers[39]);
    // The other engine still serves, and a query to both names the stalled one's failure.
    let r = gw.retrieve(json!({}));
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert!(notes(&r).contains("engine 'h' failed"), "{r}");
    gw.assert_answers();
    gw.assert_peak_within(idle, "engine not reading stdin");
}

#[test]
fn log_floods_on_stdout_and_stderr_are_rate_limited_into_the_gateway_log() {
    let entries = vec![
        stdio_entry("a", &["--mode", "log-flood", "--lines", "20000"]),
        stdio_entry("b", &["--mode", "stderr-flood", "--lines", "20000"]),
    ];
    let (mut gw, idle) = warm(entries, &[]);
    for _ in 0..3 {
        let r = gw.retrieve(json!({}));
        assert_eq!(ids(&r).len(), 2, "{r}");
    }
    // 3 × 2 × 20,000 lines of ~220 bytes (26 MB) reach the gateway.
    let logged = gw.stderr_bytes();
    let log = std::fs::read_to_string(&gw.stderr).unwrap_or_default();
    eprintln!("log floods: the gateway logged {logged} bytes for 3 queries");
    assert!(logged < 2_000_000, "the gateway logged {logged} bytes");
    assert!(log.contains("suppressed"), "no 'suppressed N lines' summary:\n{}", &log[..log.len().min(2000)]);
    gw.assert_peak_within(idle, "log floods");
}

#[test]
fn a_byte_that_is_not_utf8_on_stderr_does_not_kill_the_engine() {
    let (mut gw, _) = warm(vec![stdio_entry("h", &["--mode", "bad-stderr"])], &[]);
    for _ in 0..3 {
        let r = gw.retrieve(json!({}));
        assert_eq!(ids(&r), ["h-1"], "the engine died: {r}");
    }
    let log = std::fs::read_to_string(&gw.stderr).unwrap_or_default();
    assert!(log.contains("boot \u{FFFD}"), "the line is relayed, lossily:\n{log}");
}

#[test]
fn an_engine_that_crashes_after_initialize_is_backed_off_not_respawned_per_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spawns = dir.path().join("spawns");
    let log = spawns.to_string_lossy().into_owned();
    let entries = vec![stdio_entry("a", &[]), stdio_entry("h", &["--mode", "crash", "--spawn-log", &log])];
    let (mut gw, _) = warm(entries, &["--reconnect-after-ms", "1500", "--breaker-threshold", "3"]);
    for _ in 0..30 {
        let r = gw.retrieve(json!({}));
        assert_eq!(ids(&r), ["a-1"], "{r}");
    }
    let count = |p: &Path| std::fs::read_to_string(p).unwrap_or_default().lines().count();
    // The start-up spawn, then one respawn per failure below the threshold (2); the breaker
    // opens at the third failure and holds for 1.5 s ± 20%.
    let spawned = count(&spawns);
    eprintln!("crash loop: {spawned} spawns for 30 queries");
    assert!(spawned <= 4, "{spawned} spawns for 30 requests");
    let catalog = gw.engine.call("catalog/list", json!({}));
    let health = &catalog["result"]["_meta"]["health"]["h"];
    assert_eq!(health["state"], "open", "{catalog}");
    assert!(health["consecutiveFailures"].as_u64() >= Some(3), "{health}");
    assert!(health["retryInMs"].as_u64().is_some_and(|ms| ms <= 1800), "{health}");
    assert!(health["lastError"].as_str().is_some_and(|e| !e.is_empty()), "{health}");
    assert_eq!(catalog["result"]["_meta"]["health"]["a"]["state"], "closed", "{catalog}");
    // After the back-off one probe goes through (half-open), fails, and the breaker opens
    // again for longer.
    std::thread::sleep(Duration::from_millis(1900));
    let r = gw.retrieve(json!({}));
    assert_eq!(ids(&r), ["a-1"], "{r}");
    let r = gw.retrieve(json!({}));
    assert_eq!(ids(&r), ["a-1"], "{r}");
    assert_eq!(count(&spawns), spawned + 1, "one probe after the back-off");
    let stderr = std::fs::read_to_string(&gw.stderr).unwrap_or_default();
    assert!(stderr.contains("circuit open"), "the breaker opening is logged:\n{stderr}");
}

/// `rcpctl retrieve --stdio "<hostile_engine> --mode MODE" wing`: its exit status, its output
/// and stderr, and its peak RSS (sampled) in kB.
fn rcp_retrieve(mode: &str) -> (bool, String, u64) {
    let rcp = rcp_testkit::workspace_bin("rcp-client", "rcpctl");
    let engine = format!("{} --mode {mode}", hostile());
    let child = Command::new(rcp)
        .args(["retrieve", "--stdio", &engine, "wing", "-k", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rcp");
    let pid = child.id();
    let sampler = rcp_testkit::PeakSampler::start(0, Duration::from_millis(5), move || status_kb(pid, MemField::Rss));
    let out = child.wait_with_output().expect("rcp runs");
    let peak = sampler.stop();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text, peak)
}

#[test]
fn rcp_survives_non_utf8_stderr_and_refuses_an_endless_line_without_holding_it() {
    let (ok, text, _) = rcp_retrieve("bad-stderr");
    assert!(ok && text.contains("hostile-1"), "{text}");
    let (ok, text, peak) = rcp_retrieve("huge-line");
    assert!(!ok && text.contains("max_frame_bytes"), "{text}");
    eprintln!("rcp under a 2 GiB line: peak RSS {peak} kB");
    assert!(peak < 96 * 1024, "rcp peaked at {peak} kB");
}

/// One HTTP/1.1 exchange with `addr`; the response, headers and body (empty while nothing
/// listens).
fn http(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else { return String::new() };
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

#[test]
fn the_breaker_is_on_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = dir.path().join("rcp.json");
    let entries = vec![stdio_entry("a", &[]), stdio_entry("h", &["--mode", "crash"])];
    std::fs::write(&registry, json!({"engines": entries}).to_string()).expect("registry");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let addr = format!("127.0.0.1:{port}");
    let gateway = rcp_testkit::workspace_bin("rcp-gateway", "rcp-gateway");
    let child = Command::new(gateway)
        .args(["serve", "--registry"])
        .arg(&registry)
        .args(["--http", &addr, "--reconnect-after-ms", "5000"])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the gateway");
    let _gateway = HttpEngine { child, url: String::new() };
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"query": "wing", "k": 3}}).to_string();
    let post = format!(
        "POST /rcp/retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !http(&addr, &post).contains("a-1") {
        assert!(Instant::now() < deadline, "the gateway never served");
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..5 {
        assert!(http(&addr, &post).contains("a-1"));
    }
    let metrics = http(&addr, "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    assert!(metrics.contains("rcp_gateway_engine_breaker_state{engine=\"h\"} 2"), "{metrics}");
    assert!(metrics.contains("rcp_gateway_engine_breaker_state{engine=\"a\"} 0"), "{metrics}");
    assert!(metrics.contains("rcp_gateway_engine_consecutive_failures{engine=\"h\"} 3"), "{metrics}");
}
