//! Human-readable tables: hits with their title, usage lines without debug formatting, and
//! the fused list with every engine that found each hit.

use rcp_wire::lifecycle::InitializeResult;
use rcp_wire::{Hit, Usage};
use serde_json::Value;

use crate::out::{out, outln};

/// `text` on one line, cut to `width` characters (with an ellipsis when cut).
pub(crate) fn clip(text: &str, width: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > width {
        format!("{}…", one_line.chars().take(width.saturating_sub(1)).collect::<String>())
    } else {
        one_line
    }
}

/// The hit's title: `citation.title`, else `meta.title`.
pub(crate) fn title(h: &Hit) -> Option<&str> {
    h.citation
        .as_ref()
        .and_then(|c| c.title.as_deref())
        .or_else(|| h.meta.as_ref().and_then(|m| m.get("title")).and_then(Value::as_str))
}

/// The text column: the body, without a leading copy of the title (BEIR corpora often start
/// the text with "title ." or "title:").
fn body<'a>(h: &'a Hit, title: &str) -> &'a str {
    let text = h.text.as_deref().unwrap_or("");
    match text.strip_prefix(title).filter(|_| !title.is_empty()).map(str::trim_start) {
        Some(rest) if rest.is_empty() || rest.starts_with(['.', ':', '-', '—', '\n']) => {
            rest.trim_start_matches(['.', ':', '-', '—']).trim_start()
        }
        _ => text,
    }
}

/// A ranked list: rank, id, score, title, text.
pub(crate) fn print_hits(hits: &[Hit]) {
    outln!("{:>4}  {:<16} {:>10}  {:<32}  text", "rank", "id", "score", "title");
    for (i, h) in hits.iter().enumerate() {
        let t = title(h).unwrap_or("");
        outln!("{:>4}  {:<16} {:>10.4}  {:<32}  {}", i + 1, h.key(), h.score, clip(t, 32), clip(body(h, t), 50));
    }
}

/// `candidates 100, latency 3 ms, notes: ...`, naming only what the usage has.
pub(crate) fn usage_line(u: &Usage) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = u.candidates {
        parts.push(format!("candidates {c}"));
    }
    if let Some(r) = u.reranked {
        parts.push(format!("reranked {r}"));
    }
    if let Some(t) = u.tokens {
        parts.push(format!("tokens {t}"));
    }
    if let Some(l) = u.latency_ms {
        parts.push(format!("latency {l} ms"));
    }
    if !u.notes.is_empty() {
        parts.push(format!("notes: {}", u.notes.join("; ")));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The engines that returned `h`, in `engines` order (from `meta.engineRanks`), joined by `+`.
pub(crate) fn found_by(h: &Hit, engines: &[&str]) -> String {
    let ranks = h.meta.as_ref().and_then(|m| m.get("engineRanks")).and_then(Value::as_object);
    match ranks {
        Some(r) => engines.iter().filter(|e| r.contains_key(**e)).copied().collect::<Vec<_>>().join("+"),
        None => h.meta.as_ref().and_then(|m| m.get("engine")).and_then(Value::as_str).unwrap_or("").to_owned(),
    }
}

/// The fused list: rank, id, the engines that found it, fused score, each engine's rank, title.
pub(crate) fn print_fused(hits: &[Hit], engines: &[&str]) {
    let width = engines.iter().map(|e| e.len()).sum::<usize>() + engines.len();
    out!("{:>4}  {:<16} {:<width$} {:>10}", "rank", "id", "found by", "fused");
    for e in engines {
        out!("  {:>w$}", format!("{e} rank"), w = e.len().max(4) + 5);
    }
    outln!("  title");
    for (i, h) in hits.iter().enumerate() {
        let ranks = h.meta.as_ref().and_then(|m| m.get("engineRanks")).and_then(Value::as_object);
        out!("{:>4}  {:<16} {:<width$} {:>10.5}", i + 1, h.key(), found_by(h, engines), h.score);
        for e in engines {
            let r = ranks.and_then(|r| r.get(*e)).map(|v| v.to_string()).unwrap_or_else(|| "-".into());
            out!("  {:>w$}", r, w = e.len().max(4) + 5);
        }
        outln!("  {}", clip(title(h).or(h.text.as_deref()).unwrap_or(""), 40));
    }
}

/// A JSON value as plain text: strings without quotes, the rest as compact JSON.
pub(crate) fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `rcpctl info`: identity, version, conformance level and each capability's metadata.
pub(crate) fn print_info(info: &InitializeResult) {
    outln!("server:       {} {}", info.server.name, info.server.version.clone().unwrap_or_default());
    outln!("protocol:     RCP/{}", info.protocol_version);
    if let Some(level) = info.meta.as_ref().and_then(|m| m.get("conformance")) {
        outln!("conformance:  {}", plain(level));
    }
    let keys = info.capabilities.keys();
    outln!("capabilities: {}", keys.join(", "));
    let v = serde_json::to_value(&info.capabilities).unwrap_or_default();
    for key in keys {
        let meta = v.get(&key).filter(|m| m.as_object().is_none_or(|o| !o.is_empty()));
        outln!("  {key:<12} {}", meta.map(plain).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn usage_and_origin_without_debug_text() {
        let u = Usage { candidates: Some(100), latency_ms: Some(0), ..Usage::default() };
        assert_eq!(usage_line(&u).as_deref(), Some("candidates 100, latency 0 ms"));
        assert_eq!(usage_line(&Usage::default()), None);
        let mut h = Hit::new("d", 1.0);
        h.meta =
            Some(serde_json::from_value(json!({"engine": "dense", "engineRanks": {"dense": 1, "bm25": 4}})).unwrap());
        assert_eq!(found_by(&h, &["bm25", "dense"]), "bm25+dense");
        assert_eq!(plain(&json!("L2")), "L2");
        assert_eq!(clip("a  long\ntitle here", 7), "a long…");
        let with = |t: &str| Hit::new("x", 1.0).with_text(t.to_owned());
        assert_eq!(body(&with("wings . lift of wings"), "wings"), "lift of wings");
        assert_eq!(body(&with("Tantivy is a library"), "Tantivy"), "Tantivy is a library");
    }
}
