//! The frame log behind the Wire panel: every JSON-RPC frame the inspector exchanged with an
//! engine, both ways, in order, in a bounded ring.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

/// How many frames the log keeps before dropping the oldest.
pub const CAPACITY: usize = 5000;

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the inspector to the engine.
    Sent,
    /// From the engine to the inspector.
    Received,
}

/// One logged frame.
#[derive(Debug, Clone, Serialize)]
pub struct WireEntry {
    /// Position in the log, increasing from 1.
    pub seq: u64,
    /// Milliseconds since the inspector started.
    pub ms: u64,
    /// The engine's id.
    pub engine: String,
    /// Which way it went.
    pub dir: Direction,
    /// Who caused it: `page` (a panel of the inspector page), `compare` (the federation behind
    /// the Compare panel) or `inspector` (the stdio handshake).
    pub source: String,
    /// The frame, or the raw text when it was not JSON.
    pub frame: Value,
    /// The frame's bytes as they crossed the wire, when they were JSON (keeps the peer's key
    /// order, which `frame` does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// The log; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct WireLog {
    started: Instant,
    inner: Mutex<(u64, VecDeque<WireEntry>)>,
}

impl Default for WireLog {
    fn default() -> Self {
        Self { started: Instant::now(), inner: Mutex::new((0, VecDeque::new())) }
    }
}

impl WireLog {
    /// Records a frame given as text (a line of NDJSON, a body, an SSE event's data).
    pub fn record_text(&self, engine: &str, dir: Direction, source: &str, text: &[u8]) {
        let lossy = String::from_utf8_lossy(text);
        match serde_json::from_slice(text) {
            Ok(frame) => self.push(engine, dir, source, frame, Some(lossy.into_owned())),
            Err(_) => self.push(engine, dir, source, Value::String(lossy.into_owned()), None),
        }
    }

    /// Records a frame parsed from `raw`, the text that crossed the wire.
    pub fn record_line(&self, engine: &str, dir: Direction, source: &str, frame: Value, raw: &str) {
        self.push(engine, dir, source, frame, Some(raw.to_owned()));
    }

    /// Records a frame the inspector built itself (its text is `frame` serialised).
    pub fn record(&self, engine: &str, dir: Direction, source: &str, frame: Value) {
        self.push(engine, dir, source, frame, None);
    }

    fn push(&self, engine: &str, dir: Direction, source: &str, frame: Value, raw: Option<String>) {
        let ms = self.started.elapsed().as_millis() as u64;
        let Ok(mut inner) = self.inner.lock() else { return };
        inner.0 += 1;
        let seq = inner.0;
        if inner.1.len() == CAPACITY {
            inner.1.pop_front();
        }
        inner.1.push_back(WireEntry { seq, ms, engine: engine.into(), dir, source: source.into(), frame, raw });
    }

    /// The entries after `after` (0 for all), oldest first.
    pub fn since(&self, after: u64) -> Vec<WireEntry> {
        let Ok(inner) = self.inner.lock() else { return Vec::new() };
        inner.1.iter().filter(|e| e.seq > after).cloned().collect()
    }

    /// Forgets every entry (sequence numbers keep increasing).
    pub fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.1.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_parses_frames() {
        let log = WireLog::default();
        log.record_text("e", Direction::Sent, "page", br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        log.record_text("e", Direction::Received, "page", b"not json");
        let all = log.since(0);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].frame["method"], "ping");
        assert_eq!(all[0].raw.as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert_eq!(all[1].raw, None);
        assert_eq!(all[1].frame, Value::String("not json".into()));
        assert_eq!(log.since(1).len(), 1);
        log.clear();
        assert!(log.since(0).is_empty());
        log.record("e", Direction::Sent, "page", Value::Null);
        assert_eq!(log.since(0)[0].seq, 3);
    }
}
