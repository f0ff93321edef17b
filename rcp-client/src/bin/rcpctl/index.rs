//! `rcpctl index add FILE.jsonl` and `rcpctl index delete ID...`: writes to a running engine
//! (`index/add` §7.10, `index/delete` §7.11), gated on its `index` capability by the client.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use rcp_client::{Client, ClientError};
use rcp_corpus::CorpusDoc;
use rcp_wire::ErrorCode;
use rcp_wire::index::{Document, IndexAddParams, IndexDeleteParams};
use rcp_wire::request;
use serde_json::{Value, json};

/// What `index add` did.
#[derive(Debug, Default)]
pub(crate) struct AddSummary {
    /// Documents the engine acknowledged.
    pub added: u64,
    /// Lines that could not be read, and documents the engine refused (each reported on
    /// stderr as `FILE:LINE: ...`).
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

/// After this many documents refused one after another with none acknowledged in between, the
/// engine is taken to refuse everything and the run stops (each refusal costs a round trip).
const MAX_REFUSALS_IN_A_ROW: u32 = 100;

/// One line of the file on its way to the engine.
struct Line {
    /// 1-based line number.
    no: usize,
    /// The document it holds.
    doc: Document,
}

/// The state of one `index add` run: where lines come from and what became of them.
struct Run<'a> {
    client: &'a Client,
    path: &'a Path,
    bar: ProgressBar,
    summary: AddSummary,
    /// Documents refused since the last one acknowledged.
    refused_in_a_row: u32,
}

/// One JSONL line as a document: an RCP document (`{id?, text, meta}`) or a BEIR corpus record
/// (`{_id, title, text, ...}`, the title and other keys becoming metadata).
pub(crate) fn document(line: &str) -> Result<Document, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let rcp_shaped = v.get("meta").is_some_and(Value::is_object) && v.get("_id").is_none() && v.get("title").is_none();
    let doc: Document = if rcp_shaped {
        serde_json::from_value(v).map_err(|e| format!("not an RCP document: {e}"))?
    } else {
        CorpusDoc::from_json(v).map(|d| d.to_document()).map_err(|e| e.to_string())?
    };
    if doc.id.as_deref() == Some("") {
        return Err("'id' must not be empty".into());
    }
    Ok(doc)
}

/// Sends the documents of `path` in batches of `batch`. A line that cannot be read is reported
/// on stderr (`FILE:LINE: skipped: REASON`) and counted as failed. When the engine refuses a
/// batch because of one document (-32602 naming `documents[i]`, §12.1 `data.field`), that
/// document is reported (`FILE:LINE: ID: FIELD: REASON`) and counted as failed, and the rest
/// of the batch is sent again, so one bad line never costs the valid ones; a batch too large
/// for the engine (-32013) is sent in halves. A refusal naming no document fails its batch,
/// every line reported. The connection dying, or the engine refusing
/// [`MAX_REFUSALS_IN_A_ROW`] documents in a row, stops the run.
pub(crate) async fn add(client: &Client, path: &Path, batch: usize) -> Result<AddSummary, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let total = rcp_corpus::count_lines(path)?;
    let bar =
        if std::io::stderr().is_terminal() { rcp_corpus::progress::bar(total, "") } else { ProgressBar::hidden() };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut run = Run { client, path, bar, summary: AddSummary::default(), refused_in_a_row: 0 };
    let mut pending: Vec<Line> = Vec::with_capacity(batch);
    let mut ids: HashSet<String> = HashSet::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        match document(&line) {
            Ok(doc) => {
                // A repeated id is an upsert of the earlier line: send that one first, since a
                // batch may not hold one id twice.
                if let Some(id) = &doc.id
                    && !ids.insert(id.clone())
                {
                    run.send(std::mem::take(&mut pending)).await?;
                    ids = HashSet::from([id.clone()]);
                }
                pending.push(Line { no: i + 1, doc });
            }
            Err(e) => {
                run.bar.suspend(|| eprintln!("{}:{}: skipped: {e}", path.display(), i + 1));
                run.summary.failed += 1;
                run.bar.inc(1);
            }
        }
        if pending.len() >= batch {
            run.send(std::mem::take(&mut pending)).await?;
            ids.clear();
        }
    }
    run.send(pending).await?;
    run.bar.finish_and_clear();
    run.summary.elapsed = started.elapsed();
    Ok(run.summary)
}

/// The position and the field of the document a -32602 names (`documents[148].meta.year` →
/// `(148, "meta.year")`), when it names one of a batch of `len`.
fn refused_document(e: &ClientError, len: usize) -> Option<(usize, String, String)> {
    let err = match e {
        ClientError::Rpc(err) | ClientError::InvalidParams(err) if err.code == ErrorCode::INVALID_PARAMS => err,
        _ => return None,
    };
    let rest = err.field()?.strip_prefix("documents[")?;
    let (index, field) = rest.split_once(']')?;
    let index: usize = index.parse().ok()?;
    if index >= len {
        return None;
    }
    let field = field.trim_start_matches('.');
    let detail = err.data.as_ref().and_then(|d| d.detail.clone()).unwrap_or_else(|| err.message.clone());
    Some((index, if field.is_empty() { "document".to_owned() } else { field.to_owned() }, detail))
}

impl Run<'_> {
    /// Reports one failed line.
    fn fail(&mut self, line: &Line, field: &str, reason: &str) {
        let id = line.doc.id.as_deref().unwrap_or("(no id)");
        self.bar.suspend(|| eprintln!("{}:{}: {id}: {field}: {reason}", self.path.display(), line.no));
        self.summary.failed += 1;
        self.bar.inc(1);
    }

    /// Sends `lines`, dropping the documents the engine names as invalid and halving batches
    /// it finds too large, until every document is acknowledged or reported. Only a dead
    /// connection or an engine refusing everything ends the run.
    async fn send(&mut self, lines: Vec<Line>) -> Result<(), Box<dyn std::error::Error>> {
        let mut queue = vec![lines];
        while let Some(mut batch) = queue.pop() {
            if batch.is_empty() {
                continue;
            }
            let documents: Vec<Document> = batch.iter().map(|l| l.doc.clone()).collect();
            let n = documents.len() as u64;
            match self.client.index_add(IndexAddParams { documents, ..IndexAddParams::default() }).await {
                Ok(r) => {
                    let acked = r.ids.len() as u64;
                    self.summary.added += acked.min(n);
                    if acked < n {
                        let (first, last) = (batch[0].no, batch[batch.len() - 1].no);
                        let file = self.path.display();
                        self.bar.suspend(|| {
                            eprintln!("{file}:{first}-{last}: the engine acknowledged {acked} of {n} documents")
                        });
                        self.summary.failed += n - acked;
                    }
                    self.refused_in_a_row = 0;
                    self.bar.inc(n);
                }
                Err(e @ (ClientError::Closed(_) | ClientError::CapabilityMissing { .. } | ClientError::Connect(_))) => {
                    return Err(e.into());
                }
                Err(e) => {
                    if let Some((i, field, reason)) = refused_document(&e, batch.len()) {
                        let line = batch.remove(i);
                        self.fail(&line, &field, &reason);
                        self.refused_in_a_row += 1;
                        if self.refused_in_a_row >= MAX_REFUSALS_IN_A_ROW {
                            return Err(format!(
                                "the engine refused {MAX_REFUSALS_IN_A_ROW} documents in a row (the last: {}:{}); \
                                 stopping after {} added, {} failed",
                                self.path.display(),
                                line.no,
                                self.summary.added,
                                self.summary.failed
                            )
                            .into());
                        }
                        queue.push(batch);
                    } else if matches!(&e, ClientError::Rpc(err) if err.code == ErrorCode::PAYLOAD_TOO_LARGE)
                        && batch.len() > 1
                    {
                        let back = batch.split_off(batch.len() / 2);
                        queue.push(back);
                        queue.push(batch);
                    } else {
                        let reason = crate::explain::client_error(&e);
                        for line in &batch {
                            self.fail(line, "batch", &reason);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Deletes `ids`; the number the engine removed.
pub(crate) async fn delete(client: &Client, ids: Vec<String>) -> Result<u64, ClientError> {
    Ok(client.request::<request::IndexDelete>(&IndexDeleteParams { ids, meta: None }).await?.deleted)
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
