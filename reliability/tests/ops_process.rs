//! The operations surface of a real engine process (`rcp-bm25`): JSON log lines on stderr with
//! one start-up line naming what is served, then `/metrics`, `/readyz` and `/healthz` over a
//! real socket; text logs carry no colour codes when stderr is not a terminal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rcp_testkit::workspace_bin;
use serde_json::Value;

const TOKEN: &str = "ops-token";

/// Kills the engine however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One `GET path` on a fresh connection: the status code and the body.
fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n").expect("write");
    exchange(s)
}

fn post(addr: &str, method: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    write!(
        s,
        "POST /rcp/{method} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    exchange(s)
}

fn exchange(mut s: TcpStream) -> (u16, String) {
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned())
}

/// A running engine serving HTTP with JSON logs, its stderr lines, and its start-up line.
struct Served {
    _child: Killed,
    lines: mpsc::Receiver<String>,
    startup: Value,
    addr: String,
}

/// Spawns `bin serve --http 127.0.0.1:0 --tokens-env OPS_TOKENS --log-format json ARGS...` and
/// reads stderr up to the start-up line, checking that every line before it is JSON.
fn serve_http(bin: &std::path::Path, args: &[&str]) -> Served {
    let child = Command::new(bin)
        .args(["serve", "--http", "127.0.0.1:0", "--tokens-env", "OPS_TOKENS", "--log-format", "json"])
        .args(args)
        .env("OPS_TOKENS", TOKEN)
        .env_remove("RUST_LOG")
        .env_remove("RCP_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the engine");
    let mut child = Killed(child);
    let stderr = child.0.stderr.take().expect("stderr");
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    loop {
        let line = lines.recv_timeout(Duration::from_secs(60)).expect("a start-up line within 60 s");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{line}");
        if v["fields"]["message"] == "serving" {
            let addr = v["fields"]["addr"].as_str().expect("the bound address").to_owned();
            assert!(!addr.ends_with(":0"), "port 0 must be resolved: {addr}");
            return Served { _child: child, lines, startup: v, addr };
        }
    }
}

/// The value of the sample `series` (name and labels exactly as rendered).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn json_logs_name_what_is_served_and_metrics_report_the_engine() {
    let served = serve_http(&workspace_bin("rcp-bm25", "rcp-bm25"), &[]);
    let (addr, fields) = (&served.addr, &served.startup["fields"]);
    assert_eq!((fields["engine"].as_str(), fields["transport"].as_str()), (Some("rcp-bm25"), Some("http")));
    assert_eq!(fields["documents"], 30, "{}", served.startup);

    assert_eq!(get(addr, "/healthz", None).0, 200);
    assert_eq!(get(addr, "/readyz", None).0, 200);
    assert_eq!(get(addr, "/metrics", None).0, 401);
    let (status, body) =
        post(addr, "retrieve", r#"{"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"tantivy","k":2}}"#);
    assert_eq!(status, 200);
    assert!(body.contains("\"result\""), "{body}");
    let (status, metrics) = get(addr, "/metrics", Some(TOKEN));
    assert_eq!(status, 200);
    for (series, value) in [
        ("rcp_engine_documents{engine=\"rcp-bm25\"}", 30.0),
        ("rcp_requests_total{method=\"retrieve\",outcome=\"ok\"}", 1.0),
        ("rcp_rejections_total{reason=\"auth\"}", 1.0),
    ] {
        assert_eq!(sample(&metrics, series), Some(value), "{series} in:\n{metrics}");
    }
    // Every line logged meanwhile is JSON too.
    while let Ok(line) = served.lines.recv_timeout(Duration::from_millis(200)) {
        assert!(serde_json::from_str::<Value>(&line).is_ok(), "not a JSON log line: {line}");
    }
}

#[test]
fn the_dense_engine_reports_documents_index_version_and_log_size() {
    let dir = tempfile::Builder::new().prefix("rcp-ops-dense").tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bin = workspace_bin("rcp-dense", "rcp-dense");
    let served = serve_http(&bin, &["--fetch-model", "--create", "--data-dir", data.to_str().expect("utf-8 path")]);
    let addr = &served.addr;
    assert_eq!(served.startup["fields"]["documents"], 0, "{}", served.startup);
    let add = r#"{"jsonrpc":"2.0","id":1,"method":"index/add","params":{"documents":[{"id":"a","text":"alpha"},{"id":"b","text":"beta"}]}}"#;
    let (status, body) = post(addr, "index/add", add);
    assert!(status == 200 && body.contains("\"result\""), "{status} {body}");
    let (_, metrics) = get(addr, "/metrics", Some(TOKEN));
    assert_eq!(sample(&metrics, "rcp_engine_documents{engine=\"rcp-dense\"}"), Some(2.0), "{metrics}");
    assert!(sample(&metrics, "rcp_engine_index_version{engine=\"rcp-dense\"}").is_some_and(|v| v >= 1.0), "{metrics}");
    assert!(sample(&metrics, "rcp_engine_wal_bytes{engine=\"rcp-dense\"}").is_some_and(|v| v > 0.0), "{metrics}");
}

#[test]
fn text_logs_have_a_start_up_line_and_no_colour_off_a_terminal() {
    let out = Command::new(workspace_bin("rcp-bm25", "rcp-bm25"))
        .arg("serve")
        .env_remove("RUST_LOG")
        .env_remove("RCP_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run rcp-bm25");
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "stdout carries protocol frames only");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.contains("serving")).unwrap_or_else(|| panic!("no start-up line:\n{stderr}"));
    assert!(line.contains("engine=rcp-bm25") && line.contains("transport=\"stdio\""), "{line}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escape codes on a non-terminal stderr:\n{stderr}");
}
