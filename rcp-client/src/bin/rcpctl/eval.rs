//! `rcpctl eval DATASET_DIR`: runs a BEIR collection's queries against one engine or every engine
//! of a registry and reports nDCG@10, Recall@50, Recall@100 and MRR@10 per engine and, with two engines or
//! more, for their RRF and convex fusions (§16.3), with the metric code of `rcp_client::eval`;
//! with `--rerank`, that ranking reranked by a separate engine ([`super::eval_rerank`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use futures::StreamExt;
use rcp_client::eval::{Collection, Scores, evaluate};
use rcp_client::{Client, ClientError};
use rcp_wire::fusion::{self, EngineList, FusionMethod};
use rcp_wire::{Hit, RetrieveParams};
use serde_json::{Value, json};

use crate::eval_rerank::Reranker;
use crate::out::outln;

/// How many hits are asked per query (Recall@100 needs 100).
const DEPTH: u64 = 100;

/// Queries in flight at once.
const CONCURRENCY: usize = 4;

/// Every engine's hits for one query, in engine order.
type Answers = Vec<Vec<Hit>>;

/// The report of one evaluation.
pub(crate) struct Report {
    /// The collection's directory.
    pub dataset: String,
    /// Queries evaluated.
    pub queries: usize,
    /// Per engine, in registry order.
    pub engines: Vec<(String, Scores)>,
    /// Per engine, in the same order: how many queries it returned no hits for.
    pub empty: Vec<usize>,
    /// Per fusion method asked (`rrf`, `convex`): the scores and the method actually used.
    pub fused: Vec<(&'static str, &'static str, Scores)>,
    /// With `--rerank`: one row per method, named `"{list} → {method}"`.
    pub reranked: Vec<(String, Scores)>,
}

/// Evaluates `engines` (label, client) on the collection in `dir`, its first `limit` queries.
/// With `rerank`, the RRF fusion (or the one engine's list) is reranked too.
pub(crate) async fn run(
    dir: &Path,
    limit: Option<usize>,
    engines: &[(String, Client)],
    rerank: Option<&Reranker>,
) -> Result<Report, String> {
    let mut c = Collection::load(dir).map_err(|e| e.to_string())?;
    if let Some(n) = limit {
        c = c.limit(n);
    }
    let answers: Vec<(String, Answers)> = futures::stream::iter(c.queries.iter().cloned())
        .map(|(qid, text)| async move {
            let mut per_engine = Vec::with_capacity(engines.len());
            for (label, client) in engines {
                let hits = client
                    .retrieve(RetrieveParams::new(text.clone(), DEPTH))
                    .await
                    .map_err(|e: ClientError| format!("engine '{label}', query {qid}: {e}"))?
                    .hits;
                per_engine.push(hits);
            }
            Ok::<_, String>((qid, per_engine))
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let ids = |hits: &[Hit]| hits.iter().map(Hit::key).collect::<Vec<String>>();
    let mut report = Report {
        dataset: dir.display().to_string(),
        queries: c.queries.len(),
        engines: Vec::new(),
        empty: Vec::new(),
        fused: Vec::new(),
        reranked: Vec::new(),
    };
    // The list a reranker rescores: the RRF fusion with two engines or more, else the engine's.
    let mut first_stage: (String, HashMap<String, Vec<Hit>>) = match engines {
        [(label, _)] => (label.clone(), answers.iter().map(|(q, a)| (q.clone(), a[0].clone())).collect()),
        _ => ("fused (rrf)".into(), HashMap::new()),
    };
    for (i, (label, _)) in engines.iter().enumerate() {
        let rankings: HashMap<String, Vec<String>> = answers.iter().map(|(q, a)| (q.clone(), ids(&a[i]))).collect();
        report.engines.push((label.clone(), evaluate(&c, &rankings)));
        report.empty.push(answers.iter().filter(|(_, a)| a[i].is_empty()).count());
    }
    if engines.len() >= 2 {
        let floors: Vec<Option<f64>> =
            engines.iter().map(|(_, c)| c.capabilities().retrieve.and_then(|r| r.score_floor)).collect();
        for method in [FusionMethod::rrf(), FusionMethod::convex(0.5)] {
            let mut used = method.name();
            let mut rankings = HashMap::new();
            for (qid, per_engine) in &answers {
                let lists: Vec<EngineList> = engines
                    .iter()
                    .zip(per_engine)
                    .zip(&floors)
                    .map(|(((label, _), hits), floor)| {
                        let list = EngineList::new(label.clone(), hits.clone());
                        match floor {
                            Some(f) => list.with_score_floor(*f),
                            None => list,
                        }
                    })
                    .collect();
                let out = fusion::fuse_or_fallback(&lists, &method, DEPTH as usize).map_err(|e| e.to_string())?;
                used = out.method.name();
                rankings.insert(qid.clone(), ids(&out.hits));
                if method.name() == "rrf" {
                    first_stage.1.insert(qid.clone(), out.hits);
                }
            }
            report.fused.push((method.name(), used, evaluate(&c, &rankings)));
        }
    }
    if let Some(r) = rerank {
        report.reranked = r.rows(&c, &first_stage.0, &first_stage.1).await?;
    }
    Ok(report)
}

impl Report {
    /// The report as JSON: `{dataset, queries, engines: {id: scores}, fused: {method: scores}}`.
    pub(crate) fn to_json(&self) -> Value {
        let engines: BTreeMap<&str, &Scores> = self.engines.iter().map(|(id, s)| (id.as_str(), s)).collect();
        let fused: BTreeMap<&str, Value> = self
            .fused
            .iter()
            .map(|(asked, used, s)| {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                v["used"] = json!(used);
                (*asked, v)
            })
            .collect();
        let reranked: BTreeMap<&str, &Scores> = self.reranked.iter().map(|(n, s)| (n.as_str(), s)).collect();
        json!({"dataset": self.dataset, "queries": self.queries, "engines": engines, "fused": fused, "reranked": reranked})
    }

    /// Warns on stderr about every engine that returned no hits for most queries (it most
    /// likely does not hold the collection's corpus) and says how to load it; their names.
    pub(crate) fn warn_empty(&self, dataset: &Path) -> Vec<String> {
        let mut empty = Vec::new();
        for ((id, _), &n) in self.engines.iter().zip(&self.empty) {
            if self.queries > 0 && n * 2 > self.queries {
                eprintln!(
                    "rcp: warning: engine '{id}' returned no hits for {n} of {} queries: it most likely does not \
                     hold the collection's corpus. Load it first, e.g. `rcpctl index add --http URL {}` to a \
                     running engine, or `rcp-bm25 index --data-dir DIR {}` and serve that directory",
                    self.queries,
                    dataset.join("corpus.jsonl").display(),
                    dataset.join("corpus.jsonl").display(),
                );
                empty.push(format!("'{id}'"));
            }
        }
        empty
    }

    /// The report as a table.
    pub(crate) fn print(&self) {
        outln!("{} ({} queries)", self.dataset, self.queries);
        outln!("{:<32} {:>8} {:>10} {:>11} {:>8}", "", "nDCG@10", "Recall@50", "Recall@100", "MRR@10");
        let row = |name: &str, s: &Scores| {
            outln!("{name:<32} {:>8.4} {:>10.4} {:>11.4} {:>8.4}", s.ndcg10, s.recall50, s.recall100, s.mrr10)
        };
        for (id, s) in &self.engines {
            row(id, s);
        }
        for (asked, used, s) in &self.fused {
            let name = if asked == used { format!("fused ({asked})") } else { format!("fused ({asked} → {used})") };
            row(&name, s);
        }
        for (name, s) in &self.reranked {
            row(name, s);
        }
    }
}
