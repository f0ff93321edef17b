//! `rcp-gateway mcp --http URL` authenticates like every other client: `--token-env VAR` and
//! `--header 'Name: value'` reach the engine (issue #28, item 9), through the real binaries.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{bm25_bin, gateway_bin};
use rcp_testkit::HttpServer;
use serde_json::{Value, json};

/// `rcp-bm25 serve --http 127.0.0.1:0 --token-env T` (token `s3cret`, built-in corpus) and its
/// base URL.
fn bm25_with_token() -> (HttpServer, String) {
    let mut cmd = Command::new(bm25_bin());
    cmd.args(["serve", "--http", "127.0.0.1:0", "--token-env", "RCP_MCP_AUTH_SERVER"])
        .env("RCP_MCP_AUTH_SERVER", "s3cret");
    let server = HttpServer::spawn(cmd);
    let url = server.url.clone();
    (server, url)
}

/// Runs `rcp-gateway mcp ARGS` with `env`, sends MCP `initialize` and a `search` call, and
/// returns the call's response (or `None` when the bridge ended first) and its stderr.
fn search_through_bridge(args: &[&str], env: &[(&str, &str)]) -> (Option<Value>, String) {
    let mut cmd = Command::new(gateway_bin());
    cmd.arg("mcp").args(args).env_remove("RCP_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn rcp-gateway");
    let mut stdin = child.stdin.take().expect("stdin");
    let frames = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "wing lift", "k": 3}}}),
    ];
    for f in frames {
        // A bridge that exited at start-up closed its stdin: its stderr says why.
        let _ = writeln!(stdin, "{f}");
    }
    let stdout = child.stdout.take().expect("stdout");
    let mut answer = None;
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let v: Value = serde_json::from_str(&line).expect("MCP frames only on stdout");
        if v["id"] == 2 {
            answer = Some(v);
            break;
        }
    }
    drop(stdin);
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    (answer, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn hit_count(answer: &Value) -> usize {
    answer["result"]["structuredContent"]["hits"].as_array().map_or(0, Vec::len)
}

#[test]
fn mcp_over_http_sends_the_token_and_headers_it_is_given() {
    let (_engine, url) = bm25_with_token();

    let (answer, stderr) = search_through_bridge(
        &["--http", &url, "--token-env", "RCP_MCP_AUTH_CLIENT", "--header", "X-Team: ir"],
        &[("RCP_MCP_AUTH_CLIENT", "s3cret")],
    );
    let answer = answer.unwrap_or_else(|| panic!("no answer to search; stderr:\n{stderr}"));
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert!(hit_count(&answer) >= 1, "the engine answered through the bridge: {answer}");

    // Without the token the engine refuses the bridge: no hits.
    let (answer, stderr) = search_through_bridge(&["--http", &url], &[]);
    assert!(answer.as_ref().is_none_or(|a| hit_count(a) == 0), "served without a token: {answer:?}\n{stderr}");

    // An unset variable is named before anything is sent.
    let (answer, stderr) = search_through_bridge(&["--http", &url, "--token-env", "RCP_MCP_AUTH_UNSET"], &[]);
    assert!(answer.is_none(), "{answer:?}");
    assert!(stderr.contains("--token-env: the token variable RCP_MCP_AUTH_UNSET is not set"), "{stderr}");

    // Auth flags belong to --http: elsewhere they are refused, saying where auth goes instead.
    let (_, stderr) = search_through_bridge(&["--stdio", "rcp-bm25 serve", "--token-env", "X"], &[]);
    assert!(stderr.contains("--header and --token-env apply to --http") && stderr.contains("tokenEnv"), "{stderr}");
    let (_, stderr) = search_through_bridge(&["--http", &url, "--header", "no colon"], &[]);
    assert!(stderr.contains("--header 'no colon': expected 'Name: value'"), "{stderr}");
}
