//! The frame log behind the Wire panel: every JSON-RPC frame the inspector exchanged with an
//! engine, both ways, in order, in a ring bounded by bytes ([`WireLimits`]).
//!
//! A frame is kept as the text that crossed the wire, once. A frame longer than
//! [`WireLimits::entry_bytes`] keeps only its first bytes, with a marker
//! (`…[truncated: N bytes, first K kept]`), and its `frame` is a summary (`jsonrpc`, `id`,
//! `method`, the error's code and message, and `"[truncated]"` in place of `params` or
//! `result`); the entry says how long the frame was (`truncated`). When the entries hold more
//! than [`WireLimits::total_bytes`] (or more than [`WireLimits::entries`] entries), the oldest
//! are dropped. `GET /api/wire` streams the entries one by one
//! ([`WireLog::since`] hands out shared references, never copies), at most
//! [`RESPONSE_BYTES`] of them per request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::de::IgnoredAny;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The stored bytes of the entries one `GET /api/wire` returns, at most (the page asks again
/// with `after` for the rest; `more` says there is some).
pub const RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// What an entry costs beyond its text (bookkeeping, engine and source names), for the total.
const ENTRY_OVERHEAD: usize = 128;

/// Longest `method` or error message a summary keeps, in bytes.
const SUMMARY_TEXT: usize = 256;

/// Bounds of the wire log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    /// Bytes of one frame's text kept; a longer frame is truncated with a marker.
    pub entry_bytes: usize,
    /// Bytes the log holds in all; the oldest entries are dropped beyond it.
    pub total_bytes: usize,
    /// Entries the log holds at most.
    pub entries: usize,
}

impl Default for WireLimits {
    /// 64 KiB per frame, 16 MiB in all, 5,000 entries.
    fn default() -> Self {
        Self { entry_bytes: 64 * 1024, total_bytes: 16 * 1024 * 1024, entries: 5000 }
    }
}

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the inspector to the engine.
    Sent,
    /// From the engine to the inspector.
    Received,
}

/// One logged frame. Serialised as `seq`, `ms`, `engine`, `dir`, `source`, `frame` (the
/// frame as JSON, a string when it was not JSON, or a summary when it was truncated), `raw`
/// (its text, when it was JSON or truncated) and `truncated` (its length in bytes, when cut).
#[derive(Debug)]
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
    body: Body,
}

/// What an entry keeps of its frame.
#[derive(Debug)]
enum Body {
    /// Complete JSON text: both `frame` and `raw`.
    Json(Box<RawValue>),
    /// Text that is not JSON: `frame` is that string.
    Text(Box<str>),
    /// The first bytes of a longer frame and a summary of it.
    Truncated { raw: Box<str>, summary: Box<RawValue>, bytes: usize },
}

impl WireEntry {
    /// Bytes this entry counts against [`WireLimits::total_bytes`].
    fn cost(&self) -> usize {
        let body = match &self.body {
            Body::Json(j) => j.get().len(),
            Body::Text(t) => t.len(),
            Body::Truncated { raw, summary, .. } => raw.len() + summary.get().len(),
        };
        body + self.engine.len() + self.source.len() + ENTRY_OVERHEAD
    }

    /// The frame as parsed JSON (a string when it was not JSON, the summary when truncated).
    pub fn frame(&self) -> Value {
        match &self.body {
            Body::Json(j) => serde_json::from_str(j.get()).unwrap_or(Value::Null),
            Body::Text(t) => Value::String(t.to_string()),
            Body::Truncated { summary, .. } => serde_json::from_str(summary.get()).unwrap_or(Value::Null),
        }
    }

    /// The text kept of the frame when it was JSON (cut, with the marker, when truncated).
    pub fn raw(&self) -> Option<&str> {
        match &self.body {
            Body::Json(j) => Some(j.get()),
            Body::Text(_) => None,
            Body::Truncated { raw, .. } => Some(raw),
        }
    }

    /// The frame's length in bytes when it was truncated.
    pub fn truncated(&self) -> Option<usize> {
        match &self.body {
            Body::Truncated { bytes, .. } => Some(*bytes),
            _ => None,
        }
    }
}

impl Serialize for WireEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("ms", &self.ms)?;
        m.serialize_entry("engine", &self.engine)?;
        m.serialize_entry("dir", &self.dir)?;
        m.serialize_entry("source", &self.source)?;
        match &self.body {
            Body::Json(j) => {
                m.serialize_entry("frame", j)?;
                m.serialize_entry("raw", j.get())?;
            }
            Body::Text(t) => m.serialize_entry("frame", t)?,
            Body::Truncated { raw, summary, bytes } => {
                m.serialize_entry("frame", summary)?;
                m.serialize_entry("raw", raw)?;
                m.serialize_entry("truncated", bytes)?;
            }
        }
        m.end()
    }
}

/// The envelope of a frame, read without keeping its params or result.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    error: Option<ErrorHead>,
    #[serde(default)]
    params: Option<IgnoredAny>,
    #[serde(default)]
    result: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ErrorHead {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

impl Envelope {
    /// The summary a truncated frame is shown as.
    fn summary(self) -> Box<RawValue> {
        let mut s = json!({"jsonrpc": "2.0"});
        if let Some(id) = self.id.filter(|id| matches!(id, Value::String(_) | Value::Number(_) | Value::Null)) {
            s["id"] = match id {
                Value::String(text) => Value::String(cut(&text, SUMMARY_TEXT).to_owned()),
                other => other,
            };
        }
        if let Some(m) = self.method {
            s["method"] = json!(cut(&m, SUMMARY_TEXT));
        }
        if self.params.is_some() {
            s["params"] = json!("[truncated]");
        }
        if self.result.is_some() {
            s["result"] = json!("[truncated]");
        }
        if let Some(e) = self.error {
            s["error"] = json!({"code": e.code, "message": e.message.as_deref().map(|m| cut(m, SUMMARY_TEXT))});
        }
        raw_json(&s)
    }
}

fn raw_json(v: &Value) -> Box<RawValue> {
    // A Value always serialises; the fallback is never taken.
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The log; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct WireLog {
    started: Instant,
    limits: WireLimits,
    inner: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    seq: u64,
    bytes: usize,
    entries: VecDeque<Arc<WireEntry>>,
}

impl Default for WireLog {
    fn default() -> Self {
        Self::new(WireLimits::default())
    }
}

/// One page of the log: the entries and whether more follow.
#[derive(Debug)]
pub struct WirePage {
    /// Entries, oldest first.
    pub entries: Vec<Arc<WireEntry>>,
    /// Whether entries after the last one were left for the next request.
    pub more: bool,
}

impl WireLog {
    /// A log with these bounds.
    pub fn new(limits: WireLimits) -> Self {
        let limits = WireLimits {
            entry_bytes: limits.entry_bytes.max(SUMMARY_TEXT),
            total_bytes: limits.total_bytes.max(1),
            entries: limits.entries.max(1),
        };
        Self { started: Instant::now(), limits, inner: Mutex::new(Ring::default()) }
    }

    /// The bounds in force.
    pub fn limits(&self) -> WireLimits {
        self.limits
    }

    /// Records a frame given as text (a line of NDJSON, a body, an SSE event's data).
    pub fn record_text(&self, engine: &str, dir: Direction, source: &str, text: &[u8]) {
        let body = if text.len() > self.limits.entry_bytes {
            let summary = serde_json::from_slice::<Envelope>(text).ok().map(Envelope::summary);
            self.truncated(&String::from_utf8_lossy(text), summary)
        } else {
            match std::str::from_utf8(text).ok().and_then(|t| RawValue::from_string(t.to_owned()).ok()) {
                Some(json) => Body::Json(json),
                None => Body::Text(String::from_utf8_lossy(text).into()),
            }
        };
        self.push(engine, dir, source, body);
    }

    /// Records `frame`, parsed from `raw`, the text that crossed the wire.
    pub fn record_line(&self, engine: &str, dir: Direction, source: &str, frame: &Value, raw: &str) {
        let body = if raw.len() > self.limits.entry_bytes {
            self.truncated(raw, Envelope::deserialize(frame).ok().map(Envelope::summary))
        } else {
            match RawValue::from_string(raw.to_owned()) {
                Ok(json) => Body::Json(json),
                Err(_) => Body::Text(raw.into()),
            }
        };
        self.push(engine, dir, source, body);
    }

    /// Records a frame the inspector built itself (its text is `frame` serialised).
    pub fn record(&self, engine: &str, dir: Direction, source: &str, frame: &Value) {
        self.record_line(engine, dir, source, frame, &frame.to_string());
    }

    /// The first [`WireLimits::entry_bytes`] of `text`, with the marker, and the summary (or,
    /// for text that is not JSON, a string saying it was truncated).
    fn truncated(&self, text: &str, summary: Option<Box<RawValue>>) -> Body {
        let kept = cut(text, self.limits.entry_bytes);
        let raw = format!("{kept}…[truncated: {} bytes, first {} kept]", text.len(), kept.len());
        let summary = summary.unwrap_or_else(|| raw_json(&json!(format!("[truncated: {} bytes]", text.len()))));
        Body::Truncated { raw: raw.into(), summary, bytes: text.len() }
    }

    fn push(&self, engine: &str, dir: Direction, source: &str, body: Body) {
        let ms = self.started.elapsed().as_millis() as u64;
        let Ok(mut ring) = self.inner.lock() else { return };
        ring.seq += 1;
        let entry = WireEntry { seq: ring.seq, ms, engine: engine.into(), dir, source: source.into(), body };
        ring.bytes += entry.cost();
        ring.entries.push_back(Arc::new(entry));
        while ring.entries.len() > 1
            && (ring.bytes > self.limits.total_bytes || ring.entries.len() > self.limits.entries)
        {
            if let Some(old) = ring.entries.pop_front() {
                ring.bytes = ring.bytes.saturating_sub(old.cost());
            }
        }
    }

    /// The entries after `after` (0 for all), oldest first, up to [`RESPONSE_BYTES`] of them
    /// (at least one).
    pub fn since(&self, after: u64) -> WirePage {
        let Ok(ring) = self.inner.lock() else { return WirePage { entries: Vec::new(), more: false } };
        let start = ring.entries.partition_point(|e| e.seq <= after);
        let mut entries = Vec::new();
        let mut bytes = 0;
        for e in ring.entries.range(start..) {
            if !entries.is_empty() && bytes + e.cost() > RESPONSE_BYTES {
                return WirePage { entries, more: true };
            }
            bytes += e.cost();
            entries.push(Arc::clone(e));
        }
        WirePage { entries, more: false }
    }

    /// Bytes the entries hold now, as counted against [`WireLimits::total_bytes`].
    pub fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |ring| ring.bytes)
    }

    /// Forgets every entry (sequence numbers keep increasing).
    pub fn clear(&self) {
        if let Ok(mut ring) = self.inner.lock() {
            ring.entries.clear();
            ring.bytes = 0;
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
        let all = log.since(0).entries;
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].frame()["method"], "ping");
        assert_eq!(all[0].raw(), Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert_eq!(all[1].raw(), None);
        assert_eq!(all[1].frame(), Value::String("not json".into()));
        let v = serde_json::to_value(&*all[0]).expect("serialise");
        assert_eq!(v["frame"], json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
        assert_eq!(v["raw"], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(log.since(1).entries.len(), 1);
        log.clear();
        assert!(log.since(0).entries.is_empty());
        assert_eq!(log.bytes(), 0);
        log.record("e", Direction::Sent, "page", &Value::Null);
        assert_eq!(log.since(0).entries[0].seq, 3);
    }

    #[test]
    fn a_long_frame_is_cut_with_a_marker_and_summarised() {
        let log = WireLog::new(WireLimits { entry_bytes: 1024, ..WireLimits::default() });
        let big = json!({"jsonrpc": "2.0", "id": 7, "method": "retrieve", "params": {"query": "é".repeat(5000)}});
        let text = big.to_string();
        log.record_text("e", Direction::Sent, "page", text.as_bytes());
        log.record(
            "e",
            Direction::Received,
            "page",
            &json!({"jsonrpc": "2.0", "id": 7, "result": {"x": "y".repeat(4000)}}),
        );
        log.record_text("e", Direction::Received, "engine", "z".repeat(3000).as_bytes());
        let all = log.since(0).entries;
        let v = serde_json::to_value(&*all[0]).expect("serialise");
        assert_eq!(v["frame"], json!({"jsonrpc": "2.0", "id": 7, "method": "retrieve", "params": "[truncated]"}));
        assert_eq!(v["truncated"], text.len());
        let raw = v["raw"].as_str().expect("raw");
        let marker = format!("…[truncated: {} bytes, first ", text.len());
        assert!(raw.contains(&marker) && raw.ends_with(" kept]") && raw.len() < 1100, "{raw}");
        assert_eq!(all[1].frame(), json!({"jsonrpc": "2.0", "id": 7, "result": "[truncated]"}));
        assert_eq!(all[2].frame(), json!("[truncated: 3000 bytes]"));
        assert!(all.iter().all(|e| e.cost() < 1024 + 512 + ENTRY_OVERHEAD));
    }

    #[test]
    fn the_total_is_bounded_by_bytes_and_the_oldest_go_first() {
        let limits = WireLimits { entry_bytes: 1000, total_bytes: 10_000, entries: 5000 };
        let log = WireLog::new(limits);
        let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "p".repeat(5000)}});
        for _ in 0..100 {
            log.record("e", Direction::Sent, "page", &frame);
        }
        assert!(log.bytes() <= 10_000, "{}", log.bytes());
        let page = log.since(0);
        assert!(page.entries.len() < 10 && !page.more);
        assert_eq!(page.entries.last().map(|e| e.seq), Some(100), "the newest are kept");
        let counted = WireLog::new(WireLimits { entries: 3, ..WireLimits::default() });
        for _ in 0..5 {
            counted.record("e", Direction::Sent, "page", &Value::Null);
        }
        assert_eq!(counted.since(0).entries.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4, 5]);
    }

    #[test]
    fn a_page_is_bounded_and_says_more_follow() {
        let log = WireLog::new(WireLimits { entry_bytes: 64 * 1024, total_bytes: 64 << 20, entries: 5000 });
        let frame = json!({"params": "q".repeat(60_000)});
        for _ in 0..100 {
            log.record("e", Direction::Sent, "page", &frame);
        }
        let first = log.since(0);
        assert!(first.more && first.entries.len() < 100);
        let bytes: usize = first.entries.iter().map(|e| e.cost()).sum();
        assert!(bytes <= RESPONSE_BYTES);
        let last = first.entries.last().map_or(0, |e| e.seq);
        let rest = log.since(last);
        assert_eq!(rest.entries.first().map(|e| e.seq), Some(last + 1));
    }
}
