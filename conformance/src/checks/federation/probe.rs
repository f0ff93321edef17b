//! The probe engine: a minimal RCP server over stdio that the federation checks put behind the
//! aggregator under test. It serves `initialize`, `ping`, `info`, `shutdown` and `retrieve`,
//! records the `_meta` of every `retrieve` it receives (one JSON line in its events file), and
//! answers with its fixed hits, or with the error it was told to fail with.
//!
//! It is the `rcp-conformance` binary itself, run as
//! `rcp-conformance --probe-engine --name N --events FILE [--fail CODE] [--hit ID|SCORE|TEXT]...`.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// The first argument that makes `rcp-conformance` a probe engine.
pub const PROBE_FLAG: &str = "--probe-engine";

/// What one probe engine is.
#[derive(Debug, Default)]
struct Probe {
    name: String,
    events: Option<String>,
    fail: Option<i64>,
    hits: Vec<Value>,
}

impl Probe {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut p = Probe { name: "probe".into(), ..Default::default() };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--name" => p.name = value()?,
                "--events" => p.events = Some(value()?),
                "--fail" => p.fail = Some(value()?.parse().map_err(|_| "--fail takes an error code".to_owned())?),
                "--hit" => {
                    let spec = value()?;
                    let mut parts = spec.splitn(3, '|');
                    let (Some(id), Some(score), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
                        return Err(format!("--hit '{spec}': expected ID|SCORE|TEXT"));
                    };
                    let score: f64 = score.parse().map_err(|_| format!("--hit '{spec}': bad score"))?;
                    p.hits.push(json!({"id": id, "score": score, "text": text}));
                }
                other => return Err(format!("unknown probe flag '{other}'")),
            }
        }
        Ok(p)
    }

    fn record(&self, meta: &Value) {
        let Some(path) = &self.events else { return };
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            // A probe that cannot write its events is seen by the check as one that was not asked.
            let _ = writeln!(f, "{meta}");
        }
    }

    /// The answer to one request (`None` for a notification).
    fn answer(&self, frame: &Value) -> Option<Value> {
        let id = frame.get("id")?.clone();
        let method = frame.get("method").and_then(Value::as_str).unwrap_or("");
        let server = json!({"name": self.name, "version": "0"});
        let capabilities = json!({"retrieve": {"maxK": 100}});
        let result = match method {
            "initialize" => json!({"protocolVersion": 1, "server": server, "capabilities": capabilities}),
            "info" => json!({"server": server, "capabilities": capabilities}),
            "ping" | "shutdown" => json!({}),
            "retrieve" => {
                self.record(frame.pointer("/params/_meta").unwrap_or(&Value::Null));
                if let Some(code) = self.fail {
                    let error = json!({"code": code, "message": format!("{} is a probe told to fail", self.name)});
                    return Some(json!({"jsonrpc": "2.0", "id": id, "error": error}));
                }
                json!({"hits": self.hits})
            }
            other => {
                let error = json!({"code": -32004, "message": format!("method not found: {other}")});
                return Some(json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}

/// Serves one probe engine on stdin/stdout until EOF or `shutdown`; `args` are the flags after
/// [`PROBE_FLAG`]. Returns why the flags are wrong, if they are.
pub fn serve(args: &[String]) -> Result<(), String> {
    let probe = Probe::parse(args)?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(frame) = serde_json::from_str::<Value>(&line) else { continue };
        if let Some(answer) = probe.answer(&frame)
            && writeln!(stdout, "{answer}").and_then(|()| stdout.flush()).is_err()
        {
            break;
        }
        if frame.get("method").and_then(Value::as_str) == Some("shutdown") {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_records() {
        let args: Vec<String> =
            ["--name", "p", "--hit", "a|2.5|some text", "--fail", "-32011"].map(String::from).into();
        let p = Probe::parse(&args).expect("flags");
        assert_eq!(p.hits, [json!({"id": "a", "score": 2.5, "text": "some text"})]);
        let init = p.answer(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"})).expect("answer");
        assert_eq!(init["result"]["server"]["name"], "p");
        let r = p.answer(&json!({"jsonrpc": "2.0", "id": 2, "method": "retrieve", "params": {}})).expect("answer");
        assert_eq!(r["error"]["code"], -32011);
        assert!(p.answer(&json!({"jsonrpc": "2.0", "method": "notifications/cancel"})).is_none());
        assert!(Probe::parse(&["--hit".into(), "x".into()]).is_err());
    }
}
