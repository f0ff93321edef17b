//! `hostile_engine`: an RCP engine that answers `initialize`, `ping` and `info` correctly and
//! then misbehaves on `retrieve` as `--mode` says, to attack whatever sits between a client
//! and an engine (the gateway, `rcpctl`, the inspector, the MCP bridge). The flags are documented
//! in `reliability/README.md`.
//!
//! Over stdio by default; `--http ADDR` serves HTTP instead (one request per connection) and
//! prints its base URL (`http://HOST:PORT/rcp`) as the first line of stdout.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

const USAGE: &str = "usage: hostile_engine [--name NAME] [--mode MODE] [--bytes N] [--lines N] \
[--http ADDR] [--spawn-log FILE]
modes: good huge-line stall-stdin log-flood stderr-flood bad-stderr crash endless-body sse-flood sse-stall";

/// What the engine does on `retrieve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Answers one hit, `<name>-1`.
    Good,
    /// Answers with one line of `--bytes` bytes (default 2 GiB), streamed, never buffered.
    HugeLine,
    /// Stops reading stdin (and answering) for good; exits when its parent is gone.
    StallStdin,
    /// Sends `--lines` `notifications/log` frames (default 100,000), then the good answer.
    LogFlood,
    /// Writes `--lines` lines to stderr (default 100,000), then the good answer.
    StderrFlood,
    /// Writes `boot \xff` (not UTF-8) to stderr at start and a line to stderr for every
    /// request, with `eprintln!`, which kills the process (exit 101) if stderr was closed.
    BadStderr,
    /// Exits (status 3) instead of answering.
    Crash,
    /// HTTP: a `200` JSON body without a length that never ends.
    EndlessBody,
    /// HTTP: an SSE event that never ends, written as fast as it is read.
    SseFlood,
    /// HTTP: an SSE event that never ends, one byte every 50 ms.
    SseStall,
}

impl Mode {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "good" => Self::Good,
            "huge-line" => Self::HugeLine,
            "stall-stdin" => Self::StallStdin,
            "log-flood" => Self::LogFlood,
            "stderr-flood" => Self::StderrFlood,
            "bad-stderr" => Self::BadStderr,
            "crash" => Self::Crash,
            "endless-body" => Self::EndlessBody,
            "sse-flood" => Self::SseFlood,
            "sse-stall" => Self::SseStall,
            _ => return None,
        })
    }
}

#[derive(Debug)]
struct Config {
    name: String,
    mode: Mode,
    bytes: u64,
    lines: u64,
    http: Option<String>,
    spawn_log: Option<String>,
}

fn config() -> Result<Config, String> {
    let mut c = Config {
        name: "hostile".into(),
        mode: Mode::Good,
        bytes: 2 << 30,
        lines: 100_000,
        http: None,
        spawn_log: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--name" => c.name = value()?,
            "--mode" => {
                let v = value()?;
                c.mode = Mode::parse(&v).ok_or_else(|| format!("unknown mode '{v}'\n{USAGE}"))?;
            }
            "--bytes" => c.bytes = value()?.parse().map_err(|e| format!("--bytes: {e}"))?,
            "--lines" => c.lines = value()?.parse().map_err(|e| format!("--lines: {e}"))?,
            "--http" => c.http = Some(value()?),
            "--spawn-log" => c.spawn_log = Some(value()?),
            _ => return Err(format!("unknown flag '{flag}'\n{USAGE}")),
        }
    }
    Ok(c)
}

fn main() {
    let c = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hostile_engine: {e}");
            std::process::exit(2);
        }
    };
    if let Some(path) = &c.spawn_log {
        let line = format!("{}\n", std::process::id());
        let appended = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(e) = appended.and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("hostile_engine: --spawn-log {path}: {e}");
        }
    }
    if c.mode == Mode::BadStderr {
        let _ = io::stderr().write_all(b"boot \xff\n");
    }
    let outcome = match &c.http {
        Some(addr) => serve_http(&c, addr),
        None => serve_stdio(&c),
    };
    if let Err(e) = outcome {
        // The peer hung up (a broken pipe is how a client refuses an endless line).
        let _ = writeln!(io::stderr(), "hostile_engine: {e}");
    }
}

fn initialize_result(c: &Config) -> Value {
    json!({
        "protocolVersion": 1,
        "server": {"name": c.name, "version": "0.0.1"},
        "capabilities": {"retrieve": {"maxK": 100, "modes": ["sparse"]}}
    })
}

fn good_hits(c: &Config) -> Value {
    json!({"hits": [{"id": format!("{}-1", c.name), "score": 1.0, "text": "wing"}]})
}

fn response(id: &Value, result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string().into_bytes()
}

fn error(id: &Value, code: i64, message: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string().into_bytes()
}

/// The answer to a well-behaved method, `None` for `retrieve` (the mode decides).
fn plain_answer(c: &Config, method: &str, id: &Value, params: &Value) -> Option<Vec<u8>> {
    Some(match method {
        "initialize" | "info" => response(id, initialize_result(c)),
        "ping" => response(id, json!({"nonce": params.get("nonce").cloned().unwrap_or(Value::Null)})),
        "shutdown" => response(id, json!({})),
        "retrieve" => return None,
        other => error(id, -32601, &format!("method '{other}' not found")),
    })
}

fn serve_stdio(c: &Config) -> io::Result<()> {
    let stdin = io::stdin().lock();
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in stdin.split(b'\n') {
        let line = line?;
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else { continue };
        let Some(id) = msg.get("id").cloned() else { continue };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        if c.mode == Mode::BadStderr {
            // Panics (exit 101) once our stderr is closed: what a real engine's logging does.
            eprintln!("hostile_engine: handling {method}");
        }
        if let Some(answer) = plain_answer(c, &method, &id, &params) {
            out.write_all(&answer)?;
            out.write_all(b"\n")?;
            out.flush()?;
            continue;
        }
        match c.mode {
            Mode::HugeLine => {
                out.write_all(
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"hits\":[],\"pad\":\"").as_bytes(),
                )?;
                stream_padding(&mut out, c.bytes)?;
                out.write_all(b"\"}}\n")?;
                out.flush()?;
            }
            Mode::StallStdin => {
                // Reads nothing more, so it would never see its stdin end: it leaves when its
                // parent does instead (a killed client cannot leave it behind).
                let parent = std::os::unix::process::parent_id();
                while std::os::unix::process::parent_id() == parent {
                    std::thread::sleep(Duration::from_millis(100));
                }
                return Ok(());
            }
            Mode::LogFlood => {
                for i in 0..c.lines {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/log",
                        "params": {"level": "info", "message": format!("flood line {i} {}", "x".repeat(200))}});
                    out.write_all(note.to_string().as_bytes())?;
                    out.write_all(b"\n")?;
                }
                out.write_all(&response(&id, good_hits(c)))?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
            Mode::StderrFlood => {
                let mut err = io::BufWriter::new(io::stderr().lock());
                for i in 0..c.lines {
                    writeln!(err, "flood line {i} {}", "x".repeat(200))?;
                }
                err.flush()?;
                out.write_all(&response(&id, good_hits(c)))?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
            Mode::Crash => std::process::exit(3),
            _ => {
                out.write_all(&response(&id, good_hits(c)))?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
        }
    }
    Ok(())
}

/// Writes `bytes` bytes of `x`, 64 KiB at a time: the whole is never held.
fn stream_padding(out: &mut impl Write, bytes: u64) -> io::Result<()> {
    let chunk = [b'x'; 64 * 1024];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

fn serve_http(c: &Config, addr: &str) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "http://{local}/rcp")?;
        stdout.flush()?;
    }
    std::thread::scope(|s| {
        for stream in listener.incoming().flatten() {
            s.spawn(move || {
                let _ = serve_connection(c, stream);
            });
        }
    });
    Ok(())
}

/// One request, one answer, then the connection closes.
fn serve_connection(c: &Config, stream: TcpStream) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    let mut header = String::new();
    loop {
        header.clear();
        if reader.read_line(&mut header)? == 0 {
            return Ok(());
        }
        let h = header.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length.min(16 << 20)];
    reader.read_exact(&mut body)?;
    let mut out = io::BufWriter::new(stream);
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(id) = msg.get("id").cloned() else {
        out.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")?;
        return out.flush();
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let answer = plain_answer(c, &method, &id, &params);
    let endless = |out: &mut io::BufWriter<TcpStream>, content_type: &str, start: String, delay: Option<Duration>| {
        write!(out, "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n{start}")?;
        out.flush()?;
        let chunk = [b'x'; 64 * 1024];
        loop {
            match delay {
                Some(d) => {
                    out.write_all(b"x")?;
                    out.flush()?;
                    std::thread::sleep(d);
                }
                None => out.write_all(&chunk)?,
            }
        }
    };
    match (answer, c.mode) {
        (Some(answer), _) => write_json(&mut out, &answer),
        (None, Mode::EndlessBody) => endless(
            &mut out,
            "application/json",
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"pad\":\""),
            None,
        ),
        (None, Mode::SseFlood) => endless(&mut out, "text/event-stream", "data: {\"pad\":\"".into(), None),
        (None, Mode::SseStall) => {
            endless(&mut out, "text/event-stream", "data: {\"pad\":\"".into(), Some(Duration::from_millis(50)))
        }
        (None, Mode::Crash) => std::process::exit(3),
        (None, _) => write_json(&mut out, &response(&id, good_hits(c))),
    }
}

fn write_json(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}
