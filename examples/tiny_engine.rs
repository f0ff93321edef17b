//! The smallest complete engine: a dozen in-memory documents served over stdio.
//!
//! ```sh
//! cargo run --example tiny_engine
//! {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
//! {"jsonrpc":"2.0","id":2,"method":"retrieve","params":{"query":"rust async","k":3}}
//! ```
//!
//! Scoring is TF-IDF over lower-cased words. Two `_meta` switches exist to demonstrate what
//! the framework does with slow and faulty handlers: `x-tiny-delayMs` simulates a slow
//! backend (the handler stops early when cancelled) and `x-tiny-panic` makes it panic.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rcp_server::cli::{EngineCli, ServeArgs};
use rcp_server::{HandlerResult, Index, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{IndexCapability, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::lifecycle::ConformanceLevel;
use rcp_wire::notifications::LogLevel;
use rcp_wire::retrieve::Citation;
use rcp_wire::{Hit, Meta, RcpError, RetrieveResult};
use serde_json::json;

const DOCS: &[(&str, &str, &str, i64)] = &[
    ("rust-1", "Rust async runtimes schedule futures on a pool of worker threads", "rust", 2021),
    ("rust-2", "The borrow checker proves memory safety at compile time", "rust", 2018),
    ("rust-3", "Tokio provides async IO, timers and channels for Rust", "rust", 2023),
    ("ir-1", "BM25 ranks documents by term frequency and inverse document frequency", "ir", 2009),
    ("ir-2", "Dense retrieval embeds queries and passages into one vector space", "ir", 2020),
    ("ir-3", "Reciprocal rank fusion merges ranked lists from several engines", "ir", 2009),
    ("ir-4", "Maximal marginal relevance trades relevance against diversity", "ir", 1998),
    ("ml-1", "Transformers use attention to weigh every token against every other", "ml", 2017),
    ("ml-2", "Sentence embeddings map text to vectors whose cosine reflects meaning", "ml", 2019),
    ("ml-3", "Cross-encoders rerank candidates by reading query and passage together", "ml", 2020),
    ("db-1", "A write-ahead log makes acknowledged writes durable across crashes", "db", 1992),
    ("db-2", "Snapshots let readers see a consistent view while writers proceed", "db", 2005),
];

/// A document with its words split once, so queries never re-tokenize the corpus.
struct Doc {
    text: String,
    meta: Meta,
    words: Vec<String>,
}

fn doc(text: String, meta: Meta) -> Doc {
    Doc { words: words(&text).collect(), text, meta }
}

struct Tiny {
    docs: RwLock<BTreeMap<String, Doc>>,
    minted: AtomicU64,
}

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

impl Retrieve for Tiny {
    fn capability(&self) -> RetrieveCapability {
        let (modes, scale) = (Some(vec![rcp_wire::Mode::Sparse]), Some("unbounded".into()));
        RetrieveCapability { max_k: Some(50), modes, score_scale: scale, score_floor: Some(0.0), ..Default::default() }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([("topic", FieldType::Keyword), ("year", FieldType::Int)]))
    }

    fn pagination(&self) -> bool {
        true
    }

    fn citations(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let meta = ctx.meta().cloned().unwrap_or_default();
        if let Some(ms) = meta.get("x-tiny-delayMs").and_then(|v| v.as_u64()) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancellation().cancelled() => return Err(RcpError::cancelled(Some("stopped early"))),
            }
        }
        assert!(meta.get("x-tiny-panic").is_none(), "x-tiny-panic requested");
        let query: Vec<String> = words(&req.query.text()).collect();
        let docs = self.docs.read().map_err(|_| RcpError::internal("index lock poisoned"))?;
        let n = docs.len() as f64;
        let df = |w: &String| docs.values().filter(|d| d.words.contains(w)).count() as f64;
        let idf: Vec<f64> = query.iter().map(|w| ((n + 1.0) / (df(w) + 0.5)).ln()).collect();
        let tf = |d: &Doc, w: &String| d.words.iter().filter(|x| *x == w).count() as f64;
        let mut hits: Vec<Hit> = docs
            .iter()
            .filter(|(_, d)| req.filter.as_ref().is_none_or(|f| f.matches(&d.meta)))
            .map(|(id, d)| (id, d, query.iter().zip(&idf).map(|(w, idf)| tf(d, w) * idf).sum::<f64>()))
            .filter(|(_, _, score)| *score > 0.0 && req.min_score.is_none_or(|m| *score >= m))
            .map(|(id, d, score)| {
                let mut hit = Hit::new(id.as_str(), score);
                hit.meta = Some(d.meta.clone());
                hit.citation =
                    Some(Citation { source: Some("tiny".into()), title: Some(id.clone()), ..Default::default() });
                hit.text = Some(d.text.clone());
                hit
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
        ctx.progress(0.5, "retrieve", format!("scored {} documents", docs.len()));
        ctx.log(LogLevel::Info, format!("{} matching documents", hits.len()));
        let offset: usize = req
            .cursor
            .as_deref()
            .map_or(Ok(0), str::parse)
            .map_err(|_| RcpError::invalid_params("cursor", "bad cursor"))?;
        let total = hits.len();
        let page: Vec<Hit> = hits.into_iter().skip(offset).take(req.k).collect();
        let next = (offset + page.len() < total).then(|| (offset + page.len()).to_string());
        Ok(RetrieveResult { hits: page, next_cursor: next, ..Default::default() })
    }
}

impl Index for Tiny {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, params: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let mut docs = self.docs.write().map_err(|_| RcpError::internal("index lock poisoned"))?;
        let ids = params.documents.into_iter().map(|d| {
            let mint = || (0..).map(|_| format!("doc-{}", self.minted.fetch_add(1, Ordering::Relaxed)));
            let id = d.id.unwrap_or_else(|| mint().find(|id| !docs.contains_key(id)).unwrap_or_default());
            docs.insert(id.clone(), doc(d.text, d.meta.unwrap_or_default()));
            id
        });
        Ok(IndexAddResult { ids: ids.collect(), ..Default::default() })
    }

    async fn delete(&self, params: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let mut docs = self.docs.write().map_err(|_| RcpError::internal("index lock poisoned"))?;
        let deleted = params.ids.iter().filter(|id| docs.remove(*id).is_some()).count() as u64;
        Ok(IndexDeleteResult { deleted, ..Default::default() })
    }
}

/// The smallest complete RCP engine: a dozen in-memory documents, served over stdio (NDJSON
/// JSON-RPC on stdin/stdout, diagnostics on stderr) or HTTP with `--http ADDR`, on the engine
/// scaffold of `rcp_server::cli` (its `ServeArgs` flattened at the top: no subcommand). Talk to
/// it with `rcpctl info --stdio tiny_engine` or certify it with `rcp-conformance --stdio
/// tiny_engine`.
#[derive(clap::Parser)]
#[command(name = "tiny_engine", version)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
}

impl EngineCli for Cli {
    type Error = std::io::Error;

    fn serve_args(&self) -> Option<&ServeArgs> {
        Some(&self.serve)
    }

    fn run(self) -> std::io::Result<()> {
        let docs = DOCS.iter().map(|(id, text, topic, year)| {
            let meta = json!({"topic": topic, "year": year}).as_object().cloned().unwrap_or_default();
            (id.to_string(), doc(text.to_string(), meta))
        });
        let tiny = Arc::new(Tiny { docs: RwLock::new(docs.collect()), minted: AtomicU64::new(1) });
        let builder = Server::builder("tiny-engine", env!("CARGO_PKG_VERSION"))
            .retrieve(tiny.clone())
            .index(tiny)
            .streaming()
            .log()
            .conformance(ConformanceLevel::L2);
        self.serve.run(builder)
    }
}

fn main() -> ExitCode {
    rcp_server::cli::main::<Cli>()
}
