//! A small engine with the agentic capabilities (§7.7.2–§7.17) over a fixed document graph:
//! twelve documents about retrieval and the weighted links between them, served over stdio.
//!
//! ```sh
//! cargo run -p rcp-examples --example graph_engine
//! rcpctl graph --stdio target/debug/examples/graph_engine --op neighbors --seed bm25 --hops 2
//! ```
//!
//! - `graph`: all five ops ([`graph`]): `neighbors`, `local` (personalized PageRank), `global`,
//!   `drift`, `communities` (label propagation, two levels).
//! - `retrieve`: TF-IDF over the documents; `unit: "chunk"` returns sentences with
//!   `hit.chunk {docId, index}`. `tokenBudget` packing and `session` (dedup) come from the
//!   framework: the engine supplies its token counter (whitespace-separated words,
//!   [`Words`]).
//! - `memory`: `memory/build` keeps each document's key terms (the live corpus, or documents
//!   given inline); `memory/recall` turns a query into clues: a surrogate query of a document's key
//!   terms, its id as the seed, weighted by the match. A memory `global` over the corpus exists
//!   from the start; a recall without `memoryId` uses the memory built last.
//! - `feedback`: every signal is counted and logged (at debug level); none changes a ranking.
//!
//! It is the fixture the `rcpctl` CLI, the inspector's Graph panel and the conformance suite test
//! the agentic capabilities against.

mod corpus;
mod graph;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rcp_server::{Feedback, HandlerResult, Memory, RequestContext, Retrieve, RetrieveRequest, Server, SessionOptions};
use rcp_wire::capabilities::{MemoryCapability, RetrieveCapability};
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use rcp_wire::lifecycle::ConformanceLevel;
use rcp_wire::memory::{Clue, MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_wire::retrieve::{ChunkRef, Unit};
use rcp_wire::{Hit, RcpError, RetrieveResult};

use corpus::{DOCS, Scorer};

/// Memories held at most; building one more forgets the oldest.
const MAX_MEMORIES: usize = 64;
/// Inline documents `memory/build` takes at most.
const MAX_INLINE_DOCS: usize = 1_000;
/// Key terms kept per document in a memory.
const TERMS_PER_DOC: usize = 4;

/// `retrieve` over the documents or their sentences.
struct Search {
    scorer: Scorer,
}

impl Retrieve for Search {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability {
            max_k: Some(50),
            modes: Some(vec![rcp_wire::Mode::Sparse]),
            units: Some(vec!["document".into(), "chunk".into()]),
            score_scale: Some("unbounded".into()),
            score_floor: Some(0.0),
            ..Default::default()
        }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let query = req.query.text();
        let chunked = req.unit == Some(Unit::Chunk);
        let mut hits: Vec<Hit> = Vec::new();
        for (id, text) in DOCS {
            let parts: Vec<(Option<usize>, &str)> = if chunked {
                corpus::chunks(text).into_iter().enumerate().map(|(i, c)| (Some(i), c)).collect()
            } else {
                vec![(None, *text)]
            };
            for (index, part) in parts {
                let score = self.scorer.score(&query, part);
                if score <= 0.0 || req.min_score.is_some_and(|m| score < m) {
                    continue;
                }
                let mut hit = match index {
                    Some(i) => {
                        let mut h = Hit::new(format!("{id}#{i}"), score);
                        h.chunk = Some(ChunkRef { doc_id: Some((*id).into()), index: Some(i as i64), context: None });
                        h
                    }
                    None => Hit::new(*id, score),
                };
                hit.unit = Some(if chunked { "chunk" } else { "document" }.into());
                hit.text = Some(part.to_owned());
                hits.push(hit);
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
        hits.truncate(req.k);
        Ok(RetrieveResult { hits, ..Default::default() })
    }
}

/// The engine's token counter for `tokenBudget`: whitespace-separated words.
struct Words;

impl rcp_server::TokenCounter for Words {
    fn name(&self) -> String {
        "whitespace-separated words".into()
    }
    fn count(&self, text: &str) -> usize {
        usize::try_from(corpus::tokens(text)).unwrap_or(usize::MAX)
    }
}

/// One built memory: the key terms of each document it covers.
struct Built {
    terms: Vec<(String, Vec<String>)>,
}

/// `memory/build` and `memory/recall`.
struct Memories {
    scorer: Scorer,
    next: AtomicU64,
    /// By id, with the order they were built in (oldest first).
    held: Mutex<(BTreeMap<String, Built>, Vec<String>)>,
}

impl Memories {
    fn build_over(&self, docs: &[(String, String)]) -> Built {
        let scorer = if docs.is_empty() { None } else { Some(Scorer::new(docs.iter().map(|(_, t)| t.as_str()))) };
        let scorer = scorer.as_ref().unwrap_or(&self.scorer);
        Built {
            terms: docs.iter().map(|(id, t)| (id.clone(), scorer.key_terms([t.as_str()], TERMS_PER_DOC))).collect(),
        }
    }
}

impl Memories {
    /// The memory every start holds: `global`, over the live corpus, so `memory/recall` answers
    /// before any `memory/build`.
    fn start_global(&self) {
        let docs: Vec<(String, String)> = DOCS.iter().map(|(id, t)| ((*id).to_owned(), (*t).to_owned())).collect();
        let built = self.build_over(&docs);
        if let Ok(mut held) = self.held.lock() {
            held.0.insert("global".into(), built);
            held.1.push("global".into());
        }
    }
}

impl Memory for Memories {
    fn capability(&self) -> MemoryCapability {
        MemoryCapability { scopes: vec!["global".into()], clues: Some(true), ..Default::default() }
    }

    async fn build(&self, p: MemoryBuildParams, _ctx: RequestContext) -> HandlerResult<MemoryBuildResult> {
        let docs: Vec<(String, String)> = match &p.documents {
            Some(d) if d.len() > MAX_INLINE_DOCS => {
                return Err(RcpError::invalid_params(
                    "documents",
                    format!("{} documents; at most {MAX_INLINE_DOCS}", d.len()),
                ));
            }
            Some(d) => d
                .iter()
                .enumerate()
                .map(|(i, d)| (d.id.clone().unwrap_or_else(|| format!("inline-{i}")), d.text.clone()))
                .collect(),
            None => DOCS.iter().map(|(id, t)| ((*id).to_owned(), (*t).to_owned())).collect(),
        };
        let tokens = docs.iter().map(|(_, t)| corpus::tokens(t)).sum();
        let built = self.build_over(&docs);
        let mut held = self.held.lock().map_err(|_| RcpError::internal("memory lock poisoned"))?;
        let id = match p.memory_id {
            Some(id) if held.0.contains_key(&id) => id,
            Some(id) => return Err(RcpError::not_found(format!("memoryId '{id}'"))),
            None => format!("mem-{}", self.next.fetch_add(1, Ordering::Relaxed)),
        };
        if !held.0.contains_key(&id) {
            held.1.push(id.clone());
        }
        held.0.insert(id.clone(), built);
        while held.1.len() > MAX_MEMORIES {
            let oldest = held.1.remove(0);
            held.0.remove(&oldest);
        }
        Ok(MemoryBuildResult { memory_id: id, tokens: Some(tokens), ..Default::default() })
    }

    async fn recall(&self, p: MemoryRecallParams, _ctx: RequestContext) -> HandlerResult<MemoryRecallResult> {
        let held = self.held.lock().map_err(|_| RcpError::internal("memory lock poisoned"))?;
        let memory = match &p.memory_id {
            Some(id) => held.0.get(id).ok_or_else(|| RcpError::not_found(format!("memoryId '{id}'")))?,
            None => match held.1.last().and_then(|id| held.0.get(id)) {
                Some(m) => m,
                None => return Err(RcpError::not_found("no memory built yet: call memory/build first")),
            },
        };
        let asked: Vec<String> = corpus::words(&p.query).collect();
        let mut clues: Vec<Clue> = memory
            .terms
            .iter()
            .filter_map(|(id, terms)| {
                let shared = terms.iter().filter(|t| asked.contains(t)).count();
                (shared > 0).then(|| Clue {
                    query: Some(terms.join(" ")),
                    seed_ids: Some(vec![id.clone()]),
                    weight: Some(shared as f64 / terms.len().max(1) as f64),
                })
            })
            .collect();
        clues.sort_by(|a, b| b.weight.unwrap_or(0.0).total_cmp(&a.weight.unwrap_or(0.0)));
        clues.truncate(p.n.unwrap_or(5) as usize);
        Ok(MemoryRecallResult { clues, ..Default::default() })
    }
}

/// `feedback`: counted and logged, never acted on.
struct Signals {
    received: AtomicU64,
}

impl Feedback for Signals {
    async fn feedback(&self, p: FeedbackParams, _ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        if let Some(i) = p.signals.iter().position(|s| s.reward.is_some_and(|r| !(-1.0..=1.0).contains(&r))) {
            return Err(RcpError::invalid_params(format!("signals[{i}].reward"), "a reward lies in [-1, 1]"));
        }
        let n = p.signals.len() as u64;
        let total = self.received.fetch_add(n, Ordering::Relaxed) + n;
        tracing::debug!(signals = n, total, "feedback recorded");
        Ok(FeedbackResult { accepted: n, ..Default::default() })
    }
}

/// The fixed graph engine over stdio. It takes no options.
#[derive(clap::Parser)]
#[command(name = "graph_engine", version)]
struct Args {}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let _: Args = clap::Parser::parse();
    rcp_server::init_tracing();
    let memories = Memories { scorer: corpus::corpus_scorer(), next: AtomicU64::new(1), held: Mutex::default() };
    memories.start_global();
    Server::builder("graph-engine", env!("CARGO_PKG_VERSION"))
        .retrieve(Search { scorer: corpus::corpus_scorer() })
        .token_counter(Words)
        .graph(graph::DocGraph::new())
        .memory(memories)
        .feedback(Signals { received: AtomicU64::new(0) })
        .session(SessionOptions::default())
        .conformance(ConformanceLevel::L1)
        .build()
        .serve_stdio()
        .await
}
