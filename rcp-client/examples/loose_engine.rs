//! A scripted engine that speaks RCP loosely, the way some public SDKs' servers do, for the
//! client's interoperability tests (`tests/interop.rs`). Not an example to copy: it is written
//! by hand on the standard library, without the framework, precisely so that it can break the
//! rules our own server keeps.
//!
//! What it does that a strict peer would not:
//! - `embed` metadata without `identity`, with `dimensions` (not `dimension`) and a key the
//!   spec does not define (`vendorNote`); `sparseEmbed`
//!   as `{}`; `rerank.methods` as a string, not a list (metadata that cannot be read);
//! - `rerank` answers `{results: [{index, score}]}` best first, without `scores`;
//! - over HTTP it keeps one process-wide session: the first `initialize` wins and every later
//!   one, from any client, gets -32600 (`info` and the other methods work for everyone).
//!
//! Usage: `loose_engine` (NDJSON over stdio) or `loose_engine --http 127.0.0.1:0` (prints
//! `listening http://ADDR/rcp` on stdout once bound).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

const DOCS: [(&str, &str); 4] = [
    ("d1", "The Eiffel Tower is a wrought-iron lattice tower in Paris"),
    ("d2", "Photosynthesis turns light into chemical energy in plants"),
    ("d3", "Paris is the capital of France, on the river Seine"),
    ("d4", "Wrought iron is a tough, malleable form of iron"),
];

/// The one session of the process: over HTTP it is shared by every client.
#[derive(Default)]
struct Session {
    initialized: bool,
}

fn info() -> Value {
    json!({
        "protocolVersion": 1,
        "server": {"name": "loose-engine", "version": "0.0.1"},
        "capabilities": {
            "embed": {"dimensions": 4, "modes": ["dense"], "vendorNote": "kept verbatim"},
            "sparseEmbed": {},
            "rerank": {"methods": "cross-encoder", "maxCandidates": 100},
            "retrieve": {"maxK": 100, "modes": ["sparse"], "citations": true, "defaultCandidateK": 50},
            "x-loose": {}
        }
    })
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// How many of the query's words `text` contains.
fn overlap(query: &str, text: &str) -> f64 {
    let have = words(text);
    words(query).iter().filter(|w| have.contains(w)).count() as f64
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
    }
}

fn retrieve(params: &Value) -> Value {
    let query = text_of(params.get("query").unwrap_or(&Value::Null));
    let k = params.get("k").and_then(Value::as_u64).unwrap_or(5) as usize;
    let mut hits: Vec<(f64, &str, &str)> =
        DOCS.iter().map(|(id, text)| (overlap(&query, text), *id, *text)).filter(|h| h.0 > 0.0).collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let hits: Vec<Value> =
        hits.into_iter().take(k).map(|(score, id, text)| json!({"id": id, "score": score, "text": text})).collect();
    json!({"hits": hits})
}

fn rerank(params: &Value) -> Value {
    let query = text_of(params.get("query").unwrap_or(&Value::Null));
    let passages = params.get("passages").and_then(Value::as_array).cloned().unwrap_or_default();
    let top_n = params.get("topN").and_then(Value::as_u64).map_or(passages.len(), |n| n as usize);
    let mut results: Vec<(usize, f64)> =
        passages.iter().enumerate().map(|(i, p)| (i, overlap(&query, &text_of(p)))).collect();
    results.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let results: Vec<Value> =
        results.into_iter().take(top_n).map(|(index, score)| json!({"index": index, "score": score})).collect();
    json!({"results": results})
}

fn embed(params: &Value) -> Value {
    let n = params.get("inputs").and_then(Value::as_array).map_or(0, Vec::len);
    json!({"vectors": vec![[0.5, 0.5, 0.5, 0.5]; n], "dimensions": 4})
}

/// Answers one message; `None` for a notification. The second value asks the caller to stop.
fn answer(line: &str, session: &Mutex<Session>) -> (Option<Value>, bool) {
    let Ok(msg) = serde_json::from_str::<Value>(line) else {
        let e = json!({"code": -32700, "message": "not JSON"});
        return (Some(json!({"jsonrpc": "2.0", "id": null, "error": e})), false);
    };
    let Some(id) = msg.get("id").cloned() else { return (None, false) };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    let mut session = match session.lock() {
        Ok(s) => s,
        Err(poisoned) => poisoned.into_inner(),
    };
    let outcome = match method {
        "initialize" if session.initialized => Err((-32600, "already initialized")),
        "initialize" => {
            session.initialized = true;
            Ok(info())
        }
        "info" => Ok(info()),
        "ping" => Ok(params.get("nonce").map_or_else(|| json!({}), |n| json!({"nonce": n}))),
        "shutdown" => Ok(json!({})),
        _ if !session.initialized => Err((-32001, "call 'initialize' first")),
        "retrieve" => Ok(retrieve(&params)),
        "rerank" => Ok(rerank(&params)),
        "embed" => Ok(embed(&params)),
        _ => Err((-32601, "unknown method")),
    };
    let frame = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    };
    (Some(frame), method == "shutdown")
}

fn serve_stdio() {
    let session = Mutex::new(Session::default());
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let (frame, stop) = answer(&line, &session);
        if let Some(frame) = frame {
            let mut out = stdout.lock();
            if writeln!(out, "{frame}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
        if stop {
            break;
        }
    }
}

/// One HTTP/1.1 exchange: a POST with a `Content-Length` body, answered and closed.
fn serve_connection(stream: TcpStream, session: &Mutex<Session>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let (frame, _) = answer(&String::from_utf8_lossy(&body), session);
    let mut stream = stream;
    match frame {
        Some(frame) => {
            let payload = frame.to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            )?;
        }
        None => write!(stream, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")?,
    }
    stream.flush()
}

fn serve_http(addr: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    println!("listening http://{}/rcp", listener.local_addr()?);
    std::io::stdout().flush()?;
    let session = Arc::new(Mutex::new(Session::default()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let session = Arc::clone(&session);
        std::thread::spawn(move || {
            let _ = serve_connection(stream, &session);
        });
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => serve_stdio(),
        [flag, addr] if flag == "--http" => {
            if let Err(e) = serve_http(addr) {
                eprintln!("loose_engine: {e}");
                std::process::exit(1);
            }
        }
        _ => {
            eprintln!("usage: loose_engine [--http ADDR]");
            std::process::exit(2);
        }
    }
}
