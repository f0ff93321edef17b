//! `rcp index add FILE.jsonl` and `rcp index delete ID...`: writes to a running engine
//! (`index/add` §7.10, `index/delete` §7.11), gated on its `index` capability by the client.

use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rcp_client::{Client, ClientError};
use rcp_corpus::CorpusDoc;
use rcp_protocol::index::{Document, IndexAddParams, IndexDeleteParams};
use serde_json::{Value, json};

/// What `index add` did.
#[derive(Debug, Default)]
pub(crate) struct AddSummary {
    /// Documents the engine acknowledged.
    pub added: u64,
    /// Lines that could not be read, or documents of batches the engine refused.
    pub failed: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl AddSummary {
    /// The summary as JSON (`--json`).
    pub(crate) fn to_json(&self) -> Value {
        json!({"added": self.added, "failed": self.failed, "elapsedMs": self.elapsed.as_millis() as u64})
    }
}

/// One JSONL line as a document: an RCP document (`{id?, text, meta}`) or a BEIR corpus record
/// (`{_id, title, text, ...}`, the title and other keys becoming metadata).
pub(crate) fn document(line: &str) -> Result<Document, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let rcp_shaped = v.get("meta").is_some_and(Value::is_object) && v.get("_id").is_none() && v.get("title").is_none();
    if rcp_shaped {
        return serde_json::from_value(v).map_err(|e| format!("not an RCP document: {e}"));
    }
    CorpusDoc::from_json(v).map(|d| d.to_document()).map_err(|e| e.to_string())
}

/// Sends the documents of `path` in batches of `batch`; unreadable lines are reported on
/// stderr and counted as failed, and so is a batch the engine refuses. The connection dying
/// stops the run.
pub(crate) async fn add(client: &Client, path: &Path, batch: usize) -> Result<AddSummary, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let total = rcp_corpus::count_lines(path)?;
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} documents ({per_sec}, eta {eta})") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut summary = AddSummary::default();
    let mut pending = Vec::with_capacity(batch);
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        match document(&line) {
            Ok(doc) => pending.push(doc),
            Err(e) => {
                bar.suspend(|| eprintln!("{}:{}: skipped: {e}", path.display(), i + 1));
                summary.failed += 1;
                bar.inc(1);
            }
        }
        if pending.len() >= batch {
            send(client, std::mem::take(&mut pending), &mut summary, &bar).await?;
        }
    }
    if !pending.is_empty() {
        send(client, pending, &mut summary, &bar).await?;
    }
    bar.finish_and_clear();
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// Sends one batch; a refused batch counts as failed, a dead connection ends the run.
async fn send(
    client: &Client,
    documents: Vec<Document>,
    summary: &mut AddSummary,
    bar: &ProgressBar,
) -> Result<(), ClientError> {
    let n = documents.len() as u64;
    match client.index_add(IndexAddParams { documents, ..IndexAddParams::default() }).await {
        Ok(r) => {
            summary.added += r.ids.len() as u64;
            summary.failed += n.saturating_sub(r.ids.len() as u64);
        }
        Err(e @ (ClientError::Closed(_) | ClientError::CapabilityMissing { .. } | ClientError::Connect(_))) => {
            return Err(e);
        }
        Err(e) => {
            bar.suspend(|| eprintln!("a batch of {n} documents was refused: {e}"));
            summary.failed += n;
        }
    }
    bar.inc(n);
    Ok(())
}

/// Deletes `ids`; the number the engine removed.
pub(crate) async fn delete(client: &Client, ids: Vec<String>) -> Result<u64, ClientError> {
    Ok(client.index_delete(IndexDeleteParams { ids, meta: None }).await?.deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beir_and_rcp_lines_become_documents() {
        let d = document(r#"{"_id": 7, "title": "Wings", "text": "lift", "year": 1960}"#).unwrap();
        assert_eq!(d.id.as_deref(), Some("7"));
        let meta = d.meta.unwrap();
        assert_eq!((meta["title"].as_str(), meta["year"].as_i64()), (Some("Wings"), Some(1960)));
        let d = document(r#"{"id": "a", "text": "drag", "meta": {"lang": "en"}}"#).unwrap();
        assert_eq!((d.id.as_deref(), d.meta.unwrap()["lang"].as_str()), (Some("a"), Some("en")));
        assert!(document(r#"{"_id": "x"}"#).unwrap_err().contains("text"));
        assert!(document("{oops").unwrap_err().contains("not JSON"));
    }
}
