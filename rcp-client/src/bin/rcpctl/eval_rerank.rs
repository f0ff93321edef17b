//! `rcpctl eval --rerank ENGINE`: the evaluated ranking (the RRF fusion of the engines, or the one
//! engine's list) reranked by a separate engine's `rerank` (§7.6), the way a client drives the
//! stages itself (§3.4): the top `--rerank-top-n` candidates of each query are scored with
//! each `--rerank-method`, ordered by score (ties keep the first-stage order), and the rest of
//! the list follows unchanged.

use std::collections::HashMap;

use futures::StreamExt;
use rcp_client::Client;
use rcp_client::eval::{Collection, Scores, evaluate};
use rcp_wire::rerank::RerankParams;
use rcp_wire::{Hit, InputItem};

/// Reranking calls in flight at once (the reranker is CPU-bound; its sessions run them side by
/// side).
const CONCURRENCY: usize = 2;

/// The reranking engine and what to ask it.
pub(crate) struct Reranker {
    /// The engine's label (its registry id or server name).
    pub label: String,
    /// Its connection.
    pub client: Client,
    /// The methods to evaluate (each one row); empty means the engine's first.
    pub methods: Vec<String>,
    /// Candidates rescored per query.
    pub top_n: usize,
}

impl Reranker {
    /// The methods evaluated: those asked, else the engine's first advertised one.
    fn methods(&self) -> Vec<String> {
        if !self.methods.is_empty() {
            return self.methods.clone();
        }
        self.client.capabilities().rerank.and_then(|r| r.methods.first().cloned()).into_iter().collect()
    }

    /// One row per method: `lists` (query id → first-stage hits) reranked and scored; the
    /// row is named `"{name} → {method}"`.
    pub(crate) async fn rows(
        &self,
        c: &Collection,
        name: &str,
        lists: &HashMap<String, Vec<Hit>>,
    ) -> Result<Vec<(String, Scores)>, String> {
        let texts: HashMap<&str, &str> = c.queries.iter().map(|(q, t)| (q.as_str(), t.as_str())).collect();
        let mut rows = Vec::new();
        for method in self.methods() {
            let rankings: HashMap<String, Vec<String>> = futures::stream::iter(lists.iter())
                .map(|(qid, hits)| {
                    let query = texts.get(qid.as_str()).copied().unwrap_or_default();
                    let method = method.clone();
                    async move { Ok::<_, String>((qid.clone(), self.rerank(query, hits, method).await?)) }
                })
                .buffer_unordered(CONCURRENCY)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_, _>>()?;
            rows.push((format!("{name} → {method}"), evaluate(c, &rankings)));
        }
        Ok(rows)
    }

    /// The ids of `hits` with the top `top_n` reordered by the reranker's scores.
    async fn rerank(&self, query: &str, hits: &[Hit], method: String) -> Result<Vec<String>, String> {
        let n = self.top_n.min(hits.len());
        if hits[..n].iter().any(|h| h.text.is_none()) {
            return Err("a candidate carries no text: the evaluated engine must return hit texts to rerank".into());
        }
        let ids: Vec<String> = hits.iter().map(Hit::key).collect();
        if n == 0 {
            return Ok(ids);
        }
        let passages = hits[..n].iter().map(|h| InputItem::Text(h.text.clone().unwrap_or_default())).collect();
        let params = RerankParams {
            query: query.to_owned().into(),
            passages,
            method: Some(method.clone()),
            model: None,
            top_n: None,
            strict: Some(true),
            meta: None,
        };
        let scores =
            self.client.rerank(params).await.map_err(|e| format!("reranker '{}' ({method}): {e}", self.label))?.scores;
        if scores.len() != n {
            return Err(format!("reranker '{}' returned {} scores for {n} passages", self.label, scores.len()));
        }
        let mut head: Vec<usize> = (0..n).collect();
        head.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
        Ok(head.into_iter().map(|i| ids[i].clone()).chain(ids[n..].iter().cloned()).collect())
    }
}
