//! The inspector and the MCP bridge against engines that misbehave after a correct
//! `initialize` (the `hostile_engine` fixture), as `hostile_engine.rs` does for the gateway
//! and `rcpctl`: both sit on rcp-client's transport, so a 2 GiB stdio line, an endless HTTP body
//! or a byte that is not UTF-8 on stderr must fail one call with the limit named (or not at
//! all), keep the front end serving, and keep its peak RSS within 64 MB of idle.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rcp_testkit::{MemField, status_kb};
use serde_json::{Value, json};

/// The headroom over idle RSS a front end may use under any hostile engine.
const RSS_HEADROOM_KB: u64 = 64 * 1024;

fn hostile() -> &'static str {
    env!("CARGO_BIN_EXE_hostile_engine")
}

fn assert_peak_within(pid: u32, idle_kb: u64, case: &str) {
    let peak = status_kb(pid, MemField::Peak);
    assert!(peak > 0 && idle_kb > 0, "{case}: RSS readings of pid {pid}");
    eprintln!("{case}: idle RSS {idle_kb} kB, peak {peak} kB (+{} kB)", peak.saturating_sub(idle_kb));
    assert!(peak <= idle_kb + RSS_HEADROOM_KB, "{case}: peak RSS {peak} kB over idle {idle_kb} kB + 64 MB");
}

/// A child process killed when dropped.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `rcp-inspect ARGS`, with the address it listens on (`host:port`).
fn inspector(args: &[&str]) -> (Reaper, String) {
    let bin = rcp_testkit::workspace_bin("rcp-inspector", "rcp-inspect");
    let mut child =
        Command::new(bin).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start rcp-inspect");
    let stderr = child.stderr.take().expect("stderr");
    let reaper = Reaper(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Keeps reading to the end, so the inspector never blocks on a full stderr pipe.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("RCP_INSPECT_URL=") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).expect("RCP_INSPECT_URL=... on stderr");
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    (reaper, addr)
}

/// One HTTP/1.1 exchange with `addr`: the status code and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the inspector");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The id under which the inspector lists its one engine.
fn engine_id(addr: &str) -> String {
    let (status, body) = http(addr, "GET", "/api/targets", "");
    assert_eq!(status, 200, "{body}");
    let body = dechunk(&body);
    let targets: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("targets: {e}: {body}"));
    let list = targets.get("engines").or(targets.get("targets")).unwrap_or(&targets);
    let first = list.as_array().and_then(|a| a.first()).cloned().unwrap_or(Value::Null);
    first["id"].as_str().unwrap_or_else(|| panic!("an engine id in {targets}")).to_owned()
}

/// The body of a chunked HTTP/1.1 answer, or `body` as it is when it is not chunked.
fn dechunk(body: &str) -> String {
    let mut rest = body;
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { return body.to_owned() };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    if out.is_empty() { body.to_owned() } else { out }
}

fn rpc(addr: &str, engine: &str, id: u64, method: &str, params: Value) -> (u16, Value) {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let (status, body) = http(addr, "POST", &format!("/rpc/{engine}/{method}"), &frame.to_string());
    let body = dechunk(&body);
    (status, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

/// The inspector in front of `args` answers `initialize` and `ping`; `retrieve` misbehaves.
/// Returns the inspector, its address, the engine's id and the inspector's idle RSS.
fn warm_inspector(args: &[&str]) -> (Reaper, String, String, u64) {
    let (reaper, addr) = inspector(args);
    let engine = engine_id(&addr);
    let (_, init) = rpc(&addr, &engine, 1, "initialize", json!({"protocolVersion": 1}));
    assert!(init["result"].is_object(), "initialize through the inspector: {init}");
    let (_, pong) = rpc(&addr, &engine, 2, "ping", json!({"nonce": 7}));
    assert_eq!(pong["result"]["nonce"], 7, "{pong}");
    let idle = status_kb(reaper.0.id(), MemField::Rss);
    (reaper, addr, engine, idle)
}

#[test]
fn the_inspector_refuses_an_endless_stdio_line_without_holding_it() {
    let command = format!("{} --mode huge-line", hostile());
    let (reaper, addr, engine, idle) = warm_inspector(&["--stdio", &command]);
    let (_, answer) = rpc(&addr, &engine, 3, "retrieve", json!({"query": "wing", "k": 3}));
    assert!(answer["error"].is_object(), "a 2 GiB answer line is an error, not a result: {answer}");
    assert_peak_within(reaper.0.id(), idle, "inspector, 2 GiB stdio line");
    // The page itself keeps serving.
    assert_eq!(http(&addr, "GET", "/api/targets", "").0, 200);
}

#[test]
fn the_inspector_fails_an_endless_http_body_at_the_frame_limit() {
    let mut child = Command::new(hostile())
        .args(["--name", "h", "--mode", "endless-body", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the HTTP fixture");
    let mut url = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut url).expect("its URL");
    let _engine = Reaper(child);
    let (reaper, addr, engine, idle) = warm_inspector(&["--http", url.trim()]);
    let (status, answer) = rpc(&addr, &engine, 3, "retrieve", json!({"query": "wing", "k": 3}));
    assert_eq!(status, 502, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_frame_bytes"), "the limit is named: {answer}");
    assert_peak_within(reaper.0.id(), idle, "inspector, endless HTTP body");
    let (_, pong) = rpc(&addr, &engine, 4, "ping", json!({"nonce": 8}));
    assert_eq!(pong["result"]["nonce"], 8, "still forwarding: {pong}");
}

/// `rcp-gateway mcp` over a registry, initialised as an MCP client would, with its stdout read
/// line by line (MCP frames: the RCP schema does not apply).
struct Bridge {
    child: Reaper,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl Bridge {
    fn start(registry: &Path) -> Self {
        let gateway = rcp_testkit::workspace_bin("rcp-gateway", "rcp-gateway");
        let mut child = Command::new(gateway)
            .args(["mcp", "--registry"])
            .arg(registry)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rcp-gateway mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut bridge = Self { child: Reaper(child), stdin, lines, next_id: 0 };
        let init = bridge.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "hostile-front-ends", "version": "0"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        bridge.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        bridge
    }

    fn write(&mut self, frame: &Value) {
        writeln!(self.stdin, "{frame}").expect("write to the bridge");
        self.stdin.flush().expect("flush");
    }

    /// Sends a request; its answer (other frames are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).expect("an answer within 60 s");
            let frame: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if frame["id"] == id {
                return frame;
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

fn search(bridge: &mut Bridge) -> Value {
    bridge.call("tools/call", json!({"name": "search", "arguments": {"query": "wing", "k": 3}}))
}

#[test]
fn the_mcp_bridge_survives_a_2_gib_line_and_stderr_that_is_not_utf8() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = dir.path().join("rcp.json");
    let entry = |id: &str, mode: &str| json!({"id": id, "command": [hostile(), "--name", id, "--mode", mode]});
    let engines = json!({"engines": [entry("a", "bad-stderr"), entry("h", "huge-line")]});
    std::fs::write(&registry, engines.to_string()).expect("registry");
    let mut bridge = Bridge::start(&registry);
    let first = search(&mut bridge);
    let idle = status_kb(bridge.pid(), MemField::Rss);
    eprintln!("first search: {first}");
    // The engine that wrote `\xff` on stderr still answers (it would exit 101 at its next log
    // line if its stderr had been closed), whatever became of the 2 GiB line.
    for _ in 0..3 {
        let answer = search(&mut bridge);
        let hits = &answer["result"]["structuredContent"]["hits"];
        let ids: Vec<&str> = hits.as_array().into_iter().flatten().filter_map(|h| h["id"].as_str()).collect();
        assert!(ids.contains(&"a-1"), "the bad-stderr engine keeps answering: {answer}");
    }
    assert_peak_within(bridge.pid(), idle, "MCP bridge, 2 GiB line beside a bad-stderr engine");
}
