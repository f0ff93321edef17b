//! Scoped tokens on a real engine process (`rcp-bm25 serve --http --tokens-file`, issue #42):
//! a `read` token searches but its `index/add` is `-32012` and writes nothing; a `write` token
//! indexes; after the file is edited and the process gets SIGHUP, a removed token is refused
//! on its next request, over a keep-alive connection opened before the signal (no connection
//! is dropped); a file with a bad line is refused at start-up, naming the line and not the
//! token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::{HttpServer, workspace_bin};
use serde_json::{Value, json};

const READER: &str = "reader-3f9a1c";
const WRITER: &str = "writer-77b2e0";

/// One keep-alive HTTP/1.1 connection to the engine.
struct Conn {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(url: &str) -> Self {
        let addr = url.trim_start_matches("http://").trim_end_matches("/rcp").to_owned();
        let s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        Self { addr, reader: BufReader::new(s) }
    }

    /// `method` with `params` as `token`: the JSON-RPC answer (HTTP 200 expected).
    fn call(&mut self, token: &str, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let head = format!(
            "POST /rcp/{method} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let s = self.reader.get_mut();
        s.write_all(head.as_bytes()).and_then(|()| s.write_all(body.as_bytes())).expect("write");
        let mut status = String::new();
        self.reader.read_line(&mut status).expect("status line");
        assert!(status.starts_with("HTTP/1.1 200"), "{method}: {status}");
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("content-length");
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        serde_json::from_slice(&body).expect("json")
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

fn hits(v: &Value) -> usize {
    v["result"]["hits"].as_array().map_or(0, Vec::len)
}

fn serve(data: &Path, tokens: &Path) -> HttpServer {
    let mut cmd = Command::new(workspace_bin("rcp-bm25", "rcp-bm25"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data)
        .arg("--create")
        .args(["--http", "127.0.0.1:0", "--tokens-file"])
        .arg(tokens);
    HttpServer::spawn(cmd)
}

#[test]
fn a_read_token_cannot_write_and_a_revoked_token_is_refused_after_sighup() {
    let dir = tempfile::Builder::new().prefix("rcp-scoped-tokens").tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# test tokens\nread {READER}\nread,write {WRITER}\n")).expect("write");
    let engine = serve(&dir.path().join("data"), &tokens);
    let mut conn = Conn::open(&engine.url);

    let init = conn.call(READER, "initialize", json!({"protocolVersion": 1}));
    assert!(init["result"]["capabilities"].get("index").is_none(), "a read token is offered no index: {init}");
    let init = conn.call(WRITER, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(init["result"]["capabilities"]["index"]["writable"], true, "{init}");

    let query = json!({"query": "aardvark", "k": 10});
    assert_eq!(hits(&conn.call(READER, "retrieve", query.clone())), 0);
    let doc = |id: &str| json!({"documents": [{"id": id, "text": "the aardvark digs at night"}]});
    let refused = conn.call(READER, "index/add", doc("by-reader"));
    assert_eq!(code(&refused), -32012, "{refused}");
    assert_eq!(hits(&conn.call(READER, "retrieve", query.clone())), 0, "a refused index/add wrote something");
    let added = conn.call(WRITER, "index/add", doc("by-writer"));
    assert_eq!(code(&added), 0, "{added}");
    let found = conn.call(READER, "retrieve", query.clone());
    assert_eq!((hits(&found), &found["result"]["hits"][0]["id"]), (1, &json!("by-writer")), "{found}");

    // Revoke the reader: edit the file, SIGHUP. Its next request on the same connection is
    // refused; the writer on that connection goes on.
    std::fs::write(&tokens, format!("read,write {WRITER}\n")).expect("write");
    let hup = Command::new("kill").args(["-HUP", &engine.pid().to_string()]).status().expect("kill -HUP");
    assert!(hup.success());
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let r = conn.call(READER, "retrieve", query.clone());
        if code(&r) == -32012 {
            break;
        }
        assert!(Instant::now() < until, "the revoked token is still served 5 s after SIGHUP: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(hits(&conn.call(WRITER, "retrieve", query)), 1, "the connection survived the reload");
}

#[test]
fn a_tokens_file_with_a_bad_line_is_refused_at_start_up() {
    let dir = tempfile::Builder::new().prefix("rcp-scoped-tokens").tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("read {READER}\nsuperuser {WRITER}\n")).expect("write");
    let out = Command::new(workspace_bin("rcp-bm25", "rcp-bm25"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--create")
        .args(["--http", "127.0.0.1:0", "--tokens-file"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .output()
        .expect("run rcp-bm25");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a bad tokens file: {stderr}");
    assert!(stderr.contains("tokens:2:"), "the line is named: {stderr}");
    assert!(!stderr.contains(WRITER) && !stderr.contains(READER), "a token was echoed: {stderr}");
}
