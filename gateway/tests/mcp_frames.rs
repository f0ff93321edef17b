//! The MCP bridge at its edges, through the real `rcp-gateway mcp` binary over stdio: frames
//! that are not messages are answered as JSON-RPC 2.0 requires (`-32700` / `-32600` with
//! `"id": null` unless the frame has a valid id), an over-long line is skipped unread and
//! answered, and the bridge keeps serving; an engine dead
//! from the start is reported with its cause (issue #29, case 9).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// How long one answer may take on a loaded machine.
const ANSWER: Duration = Duration::from_secs(30);

/// `rcp-gateway mcp --registry REG`, initialised, with its stdout read line by line.
struct Bridge {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Vec<u8>>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bridge {
    fn start(registry: &std::path::Path) -> Self {
        let mut child = Command::new(gateway_bin())
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
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut bridge = Self { child, stdin, lines };
        bridge.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "mcp-frames-test", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        let init = bridge.answer_to(&json!(0));
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        bridge.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        bridge
    }

    /// Writes `line` and a newline.
    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next frame the bridge writes; every line it writes must be JSON.
    fn next(&self) -> Value {
        match self.lines.recv_timeout(ANSWER) {
            Ok(line) => serde_json::from_slice(&line)
                .unwrap_or_else(|e| panic!("stdout carries frames only: {e}: {}", String::from_utf8_lossy(&line))),
            Err(RecvTimeoutError::Timeout) => panic!("no frame within {ANSWER:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the bridge closed its stdout"),
        }
    }

    /// Frames until the answer with `id` (skipping notifications).
    fn answer_to(&self, id: &Value) -> Value {
        let started = Instant::now();
        loop {
            let frame = self.next();
            if frame.get("id") == Some(id) && frame.get("method").is_none() {
                return frame;
            }
            assert!(started.elapsed() < ANSWER, "no answer to {id}");
        }
    }
}

fn code_and_id(frame: &Value) -> (i64, Value) {
    (frame["error"]["code"].as_i64().unwrap_or(0), frame["id"].clone())
}

#[test]
fn malformed_frames_get_json_rpc_errors_and_the_bridge_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write_registry(dir.path(), "rcp.json", vec![fixture("a", &["--doc", "a1:wing lift"])]);
    let mut bridge = Bridge::start(&reg);

    // Each malformed frame gets exactly one answer, in order; none carries an id to echo.
    let deep = "[".repeat(100_000);
    let unparsable: [(&str, &[u8]); 4] = [
        ("invalid JSON", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"),
        ("invalid UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"x\":\"\xff\xfe\"}"),
        ("100k-deep nesting", deep.as_bytes()),
        ("not JSON at all", b"hello"),
    ];
    for (what, line) in unparsable {
        bridge.send(line);
        let frame = bridge.next();
        assert_eq!(code_and_id(&frame), (-32700, Value::Null), "{what}: {frame}");
        assert_eq!(frame["jsonrpc"], "2.0", "{what}: {frame}");
    }
    let invalid: [(&str, &str, Value); 5] = [
        ("method not a string", r#"{"jsonrpc":"2.0","id":3,"method":5}"#, json!(3)),
        ("wrong jsonrpc", r#"{"jsonrpc":"1.0","id":"four","method":"ping"}"#, json!("four")),
        ("id an object", r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#, Value::Null),
        ("a bare number", "42", Value::Null),
        ("an empty batch", "[]", Value::Null),
    ];
    for (what, line, id) in invalid {
        bridge.send(line.as_bytes());
        let frame = bridge.next();
        assert_eq!(code_and_id(&frame), (-32600, id), "{what}: {frame}");
    }

    // A line over the 16 MiB frame cap is skipped unread and answered.
    let mut long = br#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{"pad":""#.to_vec();
    long.resize(17 << 20, b'x');
    long.extend_from_slice(br#""}}"#);
    bridge.send(&long);
    let frame = bridge.next();
    assert_eq!(code_and_id(&frame), (-32600, Value::Null), "{frame}");
    assert_eq!(frame["error"]["data"]["limit"], 16 << 20, "{frame}");

    // Still serving: a tool call after all of it is answered.
    bridge.send(
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
               "params": {"name": "search", "arguments": {"query": "wing", "k": 1}}})
        .to_string()
        .as_bytes(),
    );
    let answer = bridge.answer_to(&json!(9));
    assert_eq!(answer["result"]["structuredContent"]["hits"][0]["id"], "a1", "{answer}");
}

#[test]
fn an_engine_dead_from_the_start_is_reported_with_its_cause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "echo 'fatal: cannot open the index' >&2; exit 3";
    let dead = json!({"id": "dead", "transport": "stdio", "command": ["sh", "-c", script]});
    let missing = json!({"id": "missing", "transport": "stdio", "command": ["/nonexistent/rcp-engine", "serve"]});
    let reg = write_registry(dir.path(), "rcp.json", vec![dead, missing]);
    let mut bridge = Bridge::start(&reg);
    bridge.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "search", "arguments": {"query": "wing"}}})
        .to_string()
        .as_bytes(),
    );
    let answer = bridge.answer_to(&json!(5));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    eprintln!("the tool said: {text}");
    assert!(text.contains("backend unavailable"), "{text}");
    assert!(text.contains("'dead'") && text.contains("'missing'"), "names the engines: {text}");
    assert!(
        text.contains("cannot open the index") || text.contains("status 3"),
        "says why the engine that exited is unavailable (its stderr or its exit status): {text}"
    );
    assert!(text.contains("/nonexistent/rcp-engine"), "says which program could not be spawned: {text}");
}
