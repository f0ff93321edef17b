//! A deliberately broken RCP server, the fixture that proves the conformance checks can fail.
//!
//! ```sh
//! cargo run -p rcp-conformance --example broken_engine -- <mode>
//! ```
//!
//! A correct server built on `rcp-server` runs in-process behind a stdio proxy that breaks the
//! protocol in one chosen way. Modes:
//!
//! - `none`: a transparent proxy (a correct L1 server; the control case)
//! - `answer-notifications`: answers every notification with `{"id": null, "result": {}}`
//! - `string-ids`: echoes numeric request ids as strings
//! - `too-many-hits`: returns k + 1 hits
//! - `unsorted`: returns hits in ascending score order
//! - `no-nonce`: drops the nonce from ping results
//! - `log-spam`: sends `notifications/log` after every response although nobody opted in
//! - `overclaim`: declares `_meta.conformance: "L2"` while returning k + 1 hits (fails L1)
//! - `overclaim-only`: an embed-only server (no retrieve, so no L1) declaring L2; no check fails
//! - `rerank-results`: also serves `rerank`, but answers `{"results": [{"index", "relevance_score"}]}`
//!   instead of `{"scores": [...]}` (one result-shape defect)
//! - `session-repeats`: advertises `session: {dedup: true}` but keeps no trajectory state, so a
//!   second retrieve with the same `sessionId` returns the same hits (a MAY missed, not a MUST)
//! - `session-refused`: answers any request carrying `params.sessionId` with `-32602`
//! - `graph-shapes`: also serves `graph` (ops `local`, `communities`, `neighbors`) and `feedback`,
//!   but answers `communities` with `{"hits": []}` (valid against the schema's `anyOf`, not the
//!   op's shape), a `neighbors` edge to a node it does not list, and `accepted` larger than the
//!   number of signals sent
//! - `filter-ignored`: drops a plain `{"field": "topic", "op": "eq", ...}` filter before the
//!   server sees it (any other filter, malformed ones included, still reaches it), so the hits
//!   of a valid filter are the unfiltered ones
//! - `min-score-ignored`: drops a numeric `minScore` before the server sees it
//! - `min-score-after-paging`: serves `pagination` (offset cursors), but cuts each page before
//!   dropping the hits below `minScore` and keeps the cursor it minted for the uncut page, so a
//!   page short of `k`, or empty, still carries a `nextCursor`
//! - `pages-skip-a-hit`: serves `pagination` (offset cursors) over 14 documents that every
//!   query matches, but each cursor skips the hit after its page, so the pages are disjoint and
//!   stable yet not the top of one request's ranking (no rule of §10: a WARN, not a FAIL)
//! - `rewrite-ignored`: drops `params.rewrite` before the server sees it, so an unadvertised
//!   rewrite is silently not done instead of being rejected with `-32005`
//! - `blocks-unread`: reads a `blob` query block as a server that looks only at `.text` would:
//!   as an empty text block, so a query by `uri` or by inline text `data` runs as no query (§4.8)

use std::collections::HashMap;

use rcp_server::{
    Embed, EmbedRequest, Feedback, Graph, HandlerResult, RequestContext, Rerank, RerankRequest, Retrieve,
    RetrieveRequest, Server,
};
use rcp_wire::capabilities::{EmbedCapability, GraphCapability, RerankCapability, RetrieveCapability};
use rcp_wire::feedback::{FeedbackParams, FeedbackResult};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::graph::{GraphEdge, GraphNode, GraphParams, GraphResult};
use rcp_wire::lifecycle::ConformanceLevel;
use rcp_wire::{Hit, RcpError, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

const DOCS: &[(&str, &str, &str)] = &[
    ("a", "rust async runtimes and futures", "rust"),
    ("b", "the borrow checker and memory safety", "rust"),
    ("c", "bm25 ranks documents by term frequency", "ir"),
    ("d", "dense retrieval embeds queries and passages", "ir"),
    ("e", "reciprocal rank fusion of ranked lists", "ir"),
    ("f", "transformers use attention over tokens", "ml"),
];

/// Word-overlap retrieval over `DOCS`.
struct Words;

impl Retrieve for Words {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(20), modes: Some(vec!["sparse".into()]), ..Default::default() }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([("topic", FieldType::Keyword)]))
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let mut hits = ranked(&req, req.min_score);
        hits.truncate(req.k);
        Ok(RetrieveResult::from_hits(hits))
    }
}

/// The hits of `req` over `DOCS`, best first, those scoring below `min_score` left out.
fn ranked(req: &RetrieveRequest, min_score: Option<f64>) -> Vec<Hit> {
    let query = req.query.text().to_lowercase();
    let q: Vec<&str> = query.split_whitespace().collect();
    let mut hits: Vec<Hit> = DOCS
        .iter()
        .map(|(id, text, topic)| {
            let score = text.split_whitespace().filter(|w| q.contains(w)).count() as f64;
            let mut h = Hit::new(*id, score).with_text(*text);
            h.meta = json!({"topic": topic}).as_object().cloned();
            h
        })
        .filter(|h| h.score > 0.0 && min_score.is_none_or(|m| h.score >= m))
        .filter(|h| req.filter.as_ref().is_none_or(|f| f.matches(h.meta.as_ref().unwrap_or(&Default::default()))))
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
    hits
}

/// `Words` with offset cursors (`pagination`) and the defect of the `min-score-after-paging`
/// mode: the page is cut from the whole ranking, its cursor minted, and only then are the hits
/// below `minScore` dropped.
struct PagedAfterCut;

impl Retrieve for PagedAfterCut {
    fn capability(&self) -> RetrieveCapability {
        Words.capability()
    }

    fn filter(&self) -> Option<FilterCapability> {
        Words.filter()
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let offset: usize = match req.cursor.as_deref() {
            None => 0,
            Some(c) => c.parse().map_err(|_| RcpError::invalid_params("cursor", "not a cursor this server issued"))?,
        };
        let all = ranked(&req, None);
        let total = all.len();
        let mut page: Vec<Hit> = all.into_iter().skip(offset).take(req.k).collect();
        let next = (offset + page.len() < total).then(|| (offset + page.len()).to_string());
        page.retain(|h| req.min_score.is_none_or(|m| h.score >= m));
        Ok(RetrieveResult { hits: page, next_cursor: next, ..Default::default() })
    }
}

/// The `pages-skip-a-hit` mode: 14 documents (`p00`, scored 14, to `p13`, scored 1) match
/// every query, more than a page of 10, with offset cursors (`pagination`) of which each
/// `nextCursor` points one hit past the end of its page.
struct PagesSkipAHit;

impl Retrieve for PagesSkipAHit {
    fn capability(&self) -> RetrieveCapability {
        Words.capability()
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let offset: usize = match req.cursor.as_deref() {
            None => 0,
            Some(c) => c.parse().map_err(|_| RcpError::invalid_params("cursor", "not a cursor this server issued"))?,
        };
        let all: Vec<Hit> = (0..14u32)
            .map(|i| Hit::new(format!("p{i:02}").as_str(), f64::from(14 - i)).with_text(format!("page document {i}")))
            .filter(|h| req.min_score.is_none_or(|m| h.score >= m))
            .collect();
        let total = all.len();
        let page: Vec<Hit> = all.into_iter().skip(offset).take(req.k).collect();
        let skip_to = offset + page.len() + 1;
        let next = (skip_to < total).then(|| skip_to.to_string());
        Ok(RetrieveResult { hits: page, next_cursor: next, ..Default::default() })
    }
}

/// A 4-dimensional toy embedding.
struct Toy;

impl Embed for Toy {
    fn capability(&self) -> EmbedCapability {
        EmbedCapability { dimension: 4, identity: "toy-4".into(), ..Default::default() }
    }

    async fn embed(&self, req: EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        Ok(req.inputs.iter().map(|i| format!("{i:?}")).map(|s| vec![s.len() as f32, 1.0, 0.0, 0.5]).collect())
    }
}

/// Word-overlap reranking: a passage's score is the number of query words it contains.
struct Overlap;

impl Rerank for Overlap {
    fn capability(&self) -> RerankCapability {
        RerankCapability { methods: vec!["cross-encoder".into()], max_candidates: Some(16), ..Default::default() }
    }

    async fn rerank(&self, req: RerankRequest, _ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        let query = req.query.text().to_lowercase();
        let words: Vec<&str> = query.split_whitespace().collect();
        let score = |p: String| p.to_lowercase().split_whitespace().filter(|w| words.contains(w)).count() as f64;
        Ok(req.passages.iter().map(|p| score(format!("{p:?}"))).collect())
    }
}

/// A graph over `DOCS` with the defects of the `graph-shapes` mode.
struct BadGraph;

impl Graph for BadGraph {
    fn capability(&self) -> GraphCapability {
        GraphCapability { ops: vec!["local".into(), "communities".into(), "neighbors".into()], ..Default::default() }
    }

    async fn graph(&self, params: GraphParams, _ctx: RequestContext) -> HandlerResult<GraphResult> {
        Ok(match params.op.as_str() {
            "local" => GraphResult { hits: Some(vec![Hit::new("a", 1.0), Hit::new("b", 0.5)]), ..Default::default() },
            "neighbors" => GraphResult {
                nodes: Some(vec![GraphNode { id: "a".into(), score: Some(1.0) }]),
                edges: Some(vec![GraphEdge { src: json!("a"), dst: json!("not-listed"), weight: Some(0.5) }]),
                ..Default::default()
            },
            _ => GraphResult { hits: Some(Vec::new()), ..Default::default() },
        })
    }
}

/// Feedback that claims more signals than it was sent.
struct Overcount;

impl Feedback for Overcount {
    async fn feedback(&self, params: FeedbackParams, _ctx: RequestContext) -> HandlerResult<FeedbackResult> {
        Ok(FeedbackResult { accepted: params.signals.len() as u64 + 3, ..Default::default() })
    }
}

fn server(mode: &str) -> Server {
    if mode == "graph-shapes" {
        let builder = Server::builder("broken-engine", "0").retrieve(Words).graph(BadGraph).feedback(Overcount);
        return builder.conformance(ConformanceLevel::L1).build();
    }
    if mode == "overclaim-only" {
        return Server::builder("broken-engine", "0").embed(Toy).conformance(ConformanceLevel::L2).build();
    }
    if mode == "min-score-after-paging" {
        return Server::builder("broken-engine", "0").retrieve(PagedAfterCut).conformance(ConformanceLevel::L1).build();
    }
    if mode == "pages-skip-a-hit" {
        return Server::builder("broken-engine", "0").retrieve(PagesSkipAHit).conformance(ConformanceLevel::L1).build();
    }
    if mode == "rerank-results" {
        let builder = Server::builder("broken-engine", "0").retrieve(Words).rerank(Overlap);
        return builder.conformance(ConformanceLevel::L1).build();
    }
    Server::builder("broken-engine", "0").retrieve(Words).conformance(ConformanceLevel::L1).build()
}

/// Rewrites one outbound response according to the mode.
fn mutate_response(mode: &str, v: &mut Value, ks: &HashMap<String, usize>) {
    let id_key = v.get("id").map(Value::to_string).unwrap_or_default();
    if mode == "string-ids"
        && let Some(n) = v.get("id").filter(|i| i.is_number()).cloned()
    {
        v["id"] = Value::String(n.to_string());
    }
    let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) else { return };
    if mode == "overclaim"
        && let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut)
    {
        meta.insert("conformance".into(), json!("L2"));
    }
    if mode == "session-repeats"
        && let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut)
    {
        caps.insert("session".into(), json!({"dedup": true, "ttlSeconds": 60}));
    }
    if mode == "no-nonce" {
        result.remove("nonce");
    }
    if mode == "rerank-results"
        && let Some(Value::Array(scores)) = result.remove("scores")
    {
        let results: Vec<Value> =
            scores.into_iter().enumerate().map(|(i, s)| json!({"index": i, "relevance_score": s})).collect();
        result.insert("results".into(), Value::Array(results));
    }
    if let Some(hits) = result.get_mut("hits").and_then(Value::as_array_mut) {
        match mode {
            "unsorted" => hits.reverse(),
            "too-many-hits" | "overclaim" => {
                let k = ks.get(&id_key).copied().unwrap_or(hits.len());
                let mut i = 0;
                while hits.len() <= k {
                    hits.push(json!({"id": format!("extra-{i}"), "score": -1000.0 - f64::from(i)}));
                    i += 1;
                }
            }
            _ => {}
        }
    }
}

/// What the proxy does with one inbound line.
enum Inbound {
    /// Pass this line on to the server.
    Forward(String),
    /// Answer the client with this frame instead.
    Answer(String),
}

/// Rewrites (or answers) one inbound request according to the mode.
fn mutate_request(mode: &str, line: &str) -> Inbound {
    let Ok(mut v) = serde_json::from_str::<Value>(line) else { return Inbound::Forward(line.to_owned()) };
    let id = v.get("id").cloned();
    let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) else {
        return Inbound::Forward(line.to_owned());
    };
    if mode == "session-refused" && params.contains_key("sessionId") {
        let error = json!({"code": -32602, "message": "unknown sessionId", "data": {"field": "sessionId"}});
        return Inbound::Answer(json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string());
    }
    let plain_leaf = |f: &Value| {
        f.get("field") == Some(&json!("topic"))
            && f.get("op") == Some(&json!("eq"))
            && f.get("value").is_some_and(Value::is_string)
    };
    if mode == "filter-ignored" && params.get("filter").is_some_and(plain_leaf) {
        params.remove("filter");
        return Inbound::Forward(v.to_string());
    }
    if mode == "min-score-ignored" && params.get("minScore").is_some_and(Value::is_number) {
        params.remove("minScore");
        return Inbound::Forward(v.to_string());
    }
    if mode == "blocks-unread" && params.get("query").and_then(|q| q.get("type")) == Some(&json!("blob")) {
        params.insert("query".into(), json!({"type": "text", "text": ""}));
        return Inbound::Forward(v.to_string());
    }
    if mode == "rewrite-ignored" && params.remove("rewrite").is_some() {
        return Inbound::Forward(v.to_string());
    }
    Inbound::Forward(line.to_owned())
}

#[tokio::main]
async fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "none".into());
    let (client, inner) = tokio::io::duplex(1 << 20);
    let (inner_r, inner_w) = tokio::io::split(inner);
    let srv = server(&mode);
    tokio::spawn(async move { srv.serve((inner_r, inner_w)).await });
    let (from_server, mut to_server) = tokio::io::split(client);

    // One writer owns stdout.
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(format!("{line}\n").as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });

    let ks = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<String, usize>::new()));

    // stdin → server, remembering k per request id and answering notifications in that mode.
    let inbound = {
        let (ks, out_tx, mode) = (ks.clone(), out_tx.clone(), mode.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let members = if let Value::Array(a) = &v { a.clone() } else { vec![v] };
                    for m in members {
                        if let (Some(id), Some(k)) =
                            (m.get("id"), m.get("params").and_then(|p| p.get("k")).and_then(Value::as_u64))
                            && let Ok(mut map) = ks.lock()
                        {
                            map.insert(id.to_string(), k as usize);
                        }
                        if mode == "answer-notifications" && m.get("method").is_some() && m.get("id").is_none() {
                            let _ = out_tx.send(json!({"jsonrpc": "2.0", "id": null, "result": {}}).to_string());
                        }
                    }
                }
                let line = match mutate_request(&mode, &line) {
                    Inbound::Forward(line) => line,
                    Inbound::Answer(reply) => {
                        let _ = out_tx.send(reply);
                        continue;
                    }
                };
                if to_server.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                    break;
                }
            }
            let _ = to_server.shutdown().await;
        })
    };

    // server → stdout, mutated.
    let mut lines = BufReader::new(from_server).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(mut v) = serde_json::from_str::<Value>(&line) else {
            let _ = out_tx.send(line);
            continue;
        };
        let is_response = v.get("method").is_none();
        if let Ok(map) = ks.lock() {
            match &mut v {
                Value::Array(members) => members.iter_mut().for_each(|m| mutate_response(&mode, m, &map)),
                other if is_response => mutate_response(&mode, other, &map),
                _ => {}
            }
        }
        let _ = out_tx.send(v.to_string());
        if mode == "log-spam" && is_response {
            let _ = out_tx.send(json!({"jsonrpc": "2.0", "method": "notifications/log", "params": {"level": "info", "message": "spam"}}).to_string());
        }
    }
    inbound.abort();
    drop(out_tx);
    let _ = writer.await;
    // The blocking stdin reader cannot be cancelled; leave without waiting for it.
    std::process::exit(0)
}
