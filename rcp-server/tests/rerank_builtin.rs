//! The inline rerank stage (`ServerBuilder::rerank_builtin`, §3.3, §7.7) through
//! `Server::serve` over an in-memory duplex stream: what the engine's handler is asked, what
//! the reranker scores, and the funnel's errors.

use std::time::Duration;

use rcp_server::{HandlerResult, RequestContext, Rerank, RerankRequest, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{RerankCapability, RetrieveCapability};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

/// Thirty passages `"passage N"`, recalled in id order (`d0` best, score `30 - N`); each hit's
/// `meta.askedK` is the `k` the handler was asked for, `meta.sawText` whether texts were asked.
struct Corpus;

impl Retrieve for Corpus {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(50), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let text = req.include_text;
        let hits = (0..30)
            .take(req.k)
            .map(|i| {
                let h = Hit::new(format!("d{i}"), f64::from(30 - i)).with_meta("askedK", req.k as u64);
                if text { h.with_text(format!("passage {i}")) } else { h }
            })
            .collect();
        let mut res = RetrieveResult::from_hits(hits);
        res.next_cursor = Some("next".into());
        Ok(res)
    }
}

/// Scores a passage by its number (so it reverses the recall order), at most 10 per call;
/// `cross-encoder` and `colbert` (colbert scores are negated).
struct ByNumber;

impl Rerank for ByNumber {
    fn capability(&self) -> RerankCapability {
        RerankCapability {
            methods: vec!["cross-encoder".into(), "colbert".into()],
            max_candidates: Some(10),
            ..Default::default()
        }
    }

    async fn rerank(&self, req: RerankRequest, _ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        let sign = if req.method == "colbert" { -1.0 } else { 1.0 };
        Ok(req
            .passages
            .iter()
            .map(|p| sign * p.text().rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()).unwrap_or(-100.0))
            .collect())
    }

    /// The cross-encoder has a map (its score / 10); ColBERT none.
    fn confidence(&self, method: &str, score: f64) -> Option<f64> {
        (method == "cross-encoder").then_some(score / 10.0)
    }
}

type Out = Lines<BufReader<ReadHalf<DuplexStream>>>;

struct Peer {
    write: WriteHalf<DuplexStream>,
    lines: Out,
    next_id: u64,
}

impl Peer {
    async fn start(server: Server) -> (Self, Value) {
        let (client, server_side) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_side);
        tokio::spawn(async move { server.serve((server_read, server_write)).await });
        let (read, write) = tokio::io::split(client);
        let mut peer = Self { write, lines: BufReader::new(read).lines(), next_id: 0 };
        let init = peer.call("initialize", json!({"protocolVersion": 1})).await;
        (peer, init["result"]["capabilities"].clone())
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let frame = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.write.write_all(format!("{frame}\n").as_bytes()).await.expect("write");
        let line = tokio::time::timeout(Duration::from_secs(5), self.lines.next_line())
            .await
            .expect("answer in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).expect("json")
    }
}

fn ids(v: &Value) -> Vec<String> {
    v["result"]["hits"]
        .as_array()
        .map_or_else(Vec::new, |hs| hs.iter().map(|h| h["id"].as_str().unwrap_or_default().to_owned()).collect())
}

async fn reranking() -> (Peer, Value) {
    Peer::start(Server::builder("rr", "0").rerank_builtin(ByNumber).retrieve(Corpus).build()).await
}

#[tokio::test]
async fn advertised_only_when_registered_with_retrieve() {
    let (_, caps) = reranking().await;
    assert_eq!(caps["retrieve"]["rerankBuiltin"], json!(true), "{caps}");
    assert_eq!(caps["rerank"]["methods"], json!(["cross-encoder", "colbert"]), "{caps}");
    assert_eq!(caps["retrieve"]["x-rcp-rerankFusion"], json!(["convex", "rrf", "none"]), "{caps}");
    let (mut plain, caps) = Peer::start(Server::builder("p", "0").retrieve(Corpus).build()).await;
    assert!(caps["retrieve"].get("rerankBuiltin").is_none(), "{caps}");
    let r = plain.call("retrieve", json!({"query": "q", "k": 2, "rerank": {"method": "cross-encoder"}})).await;
    assert_eq!(r["error"]["code"], json!(-32005), "{r}");
    let (_, caps) = Peer::start(Server::builder("r", "0").rerank_builtin(ByNumber).build()).await;
    assert!(caps.get("retrieve").is_none() && caps["rerank"].is_object(), "{caps}");
}

#[tokio::test]
async fn default_stage_reranks_every_candidate_the_reranker_takes() {
    let (mut p, _) = reranking().await;
    let r = p.call("retrieve", json!({"query": "q", "k": 3})).await;
    // The reranker takes 10 (maxCandidates, below the default topN of 20), so with no candidateK
    // of the request's own recall is asked for those 10, and the reranker reverses their order. By default its scores are merged with
    // recall's (convex, α = 0.5, each min-max normalised): recall's 30..21 and the reranker's
    // 0..9 cancel out, every hit scores 0.5 and recall's order stands.
    assert_eq!(ids(&r), ["d0", "d1", "d2"], "{r}");
    let usage = &r["result"]["usage"];
    assert_eq!((usage["candidates"].as_u64(), usage["reranked"].as_u64()), (Some(10), Some(10)), "{r}");
    let hit = &r["result"]["hits"][0];
    assert_eq!(hit["meta"]["askedK"], json!(10), "{r}");
    assert_eq!(hit["score"], json!(0.5), "{r}");
    assert_eq!(hit["scores"], json!({"rerank": 0.0, "sparse": 30.0}), "{r}");
    assert!(r["result"].get("nextCursor").is_none(), "{r}");
    // `fusion: "rrf"`: d0 (1st and 10th) ties d9 (10th and 1st) and keeps its recall place;
    // then d1 (2nd and 9th).
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"fusion": "rrf"}})).await;
    assert_eq!(ids(&r), ["d0", "d9", "d1"], "{r}");
    let fused = r["result"]["hits"][0]["score"].as_f64().unwrap_or_default();
    assert!((fused - (1.0 / 61.0 + 1.0 / 70.0)).abs() < 1e-12, "{r}");
    // `fusion: "none"`: the reranker's order and score alone, the best 3 of d0..d9 by number.
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"fusion": "none"}})).await;
    assert_eq!(ids(&r), ["d9", "d8", "d7"], "{r}");
    let hit = &r["result"]["hits"][0];
    assert_eq!(hit["score"], json!(9.0), "{r}");
    assert_eq!(hit["scores"], json!({"rerank": 9.0, "sparse": 21.0}), "{r}");
}

#[tokio::test]
async fn a_rescored_hit_carries_its_rerankers_confidence() {
    let (mut p, _) = reranking().await;
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"fusion": "none"}})).await;
    let confidences: Vec<Value> =
        r["result"]["hits"].as_array().into_iter().flatten().map(|h| h["confidence"].clone()).collect();
    assert_eq!(confidences, [json!(0.9), json!(0.8), json!(0.7)], "the map of each hit's scores.rerank: {r}");
    // A method without a map leaves the first stage's (here none).
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"method": "colbert"}})).await;
    assert!(
        r["result"]["hits"]
            .as_array()
            .is_some_and(|hs| !hs.is_empty() && hs.iter().all(|h| h.get("confidence").is_none())),
        "{r}"
    );
    // Not reranked: no confidence added.
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": false})).await;
    assert!(r["result"]["hits"][0].get("confidence").is_none(), "{r}");
}

#[tokio::test]
async fn explicit_funnel_is_honoured() {
    let (mut p, _) = reranking().await;
    let r = p
        .call(
            "retrieve",
            json!({"query": "q", "k": 2, "candidateK": 5, "rerank": {"method": "cross-encoder", "topN": 4, "fusion": "none"}}),
        )
        .await;
    assert_eq!(ids(&r), ["d3", "d2"], "{r}");
    assert_eq!(r["result"]["hits"][0]["meta"]["askedK"], json!(5), "{r}");
    assert_eq!(r["result"]["usage"]["reranked"], json!(4), "{r}");
    assert_eq!(r["result"]["usage"]["candidates"], json!(5), "{r}");
    let r = p
        .call(
            "retrieve",
            json!({"query": "q", "k": 2, "candidateK": 5, "rerank": {"method": "colbert", "fusion": "none"}}),
        )
        .await;
    assert_eq!(ids(&r), ["d0", "d1"], "{r}");
    assert_eq!(r["result"]["hits"][1]["scores"]["rerank"], json!(-1.0), "{r}");
}

#[tokio::test]
async fn rerank_false_min_score_and_include_text() {
    let (mut p, _) = reranking().await;
    let r = p.call("retrieve", json!({"query": "q", "k": 2, "rerank": false})).await;
    assert_eq!(ids(&r), ["d0", "d1"], "{r}");
    assert!(r["result"]["usage"].get("reranked").is_none(), "{r}");
    assert_eq!(r["result"]["nextCursor"], json!("next"), "{r}");
    // minScore on the reranker's scale, not the recall's (all recall scores are >= 21) nor the
    // merged one (all 0.5 here, so recall's order stands).
    let r = p.call("retrieve", json!({"query": "q", "k": 5, "minScore": 7.5, "includeText": false})).await;
    assert_eq!(ids(&r), ["d8", "d9"], "{r}");
    assert!(r["result"]["hits"][0].get("text").is_none(), "{r}");
}

#[tokio::test]
async fn funnel_errors() {
    let (mut p, _) = reranking().await;
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"method": "llm"}})).await;
    assert_eq!(r["error"]["code"], json!(-32005), "{r}");
    assert_eq!(r["error"]["data"]["option"], json!("rerank.method"), "{r}");
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"fusion": "mean"}})).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(r["error"]["data"]["field"], json!("rerank.fusion"), "{r}");
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"topN": 2}})).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "candidateK": 4, "rerank": {"topN": 5}})).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    // strict:false falls back to the default method, and says so.
    let r = p
        .call("retrieve", json!({"query": "q", "k": 1, "strict": false, "rerank": {"method": "llm", "fusion": "none"}}))
        .await;
    assert_eq!(ids(&r), ["d9"], "{r}");
    // More passages than maxCandidates on `rerank` itself: refused, never cut.
    let passages: Vec<String> = (0..11).map(|i| format!("passage {i}")).collect();
    let r = p.call("rerank", json!({"query": "q", "passages": passages})).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(r["error"]["data"]["field"], json!("passages"), "{r}");
}

/// A reranker that takes 50 ms per passage (one sleep per call) and scores a passage by its
/// number, like [`ByNumber`], with no `maxCandidates`; `calls` holds how many passages each call
/// was given.
#[derive(Clone, Default)]
struct Slow {
    calls: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

const PER_PASSAGE: Duration = Duration::from_millis(50);

impl Slow {
    fn calls(&self) -> Vec<usize> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Rerank for Slow {
    fn capability(&self) -> RerankCapability {
        RerankCapability { methods: vec!["cross-encoder".into()], ..Default::default() }
    }

    async fn rerank(&self, req: RerankRequest, ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(req.passages.len());
        }
        let n = u32::try_from(req.passages.len()).unwrap_or(u32::MAX);
        tokio::time::sleep(PER_PASSAGE * n).await;
        ByNumber.rerank(req, ctx).await
    }
}

async fn slow() -> (Peer, Slow) {
    let reranker = Slow::default();
    let (peer, _) =
        Peer::start(Server::builder("slow", "0").rerank_builtin(reranker.clone()).retrieve(Corpus).build()).await;
    (peer, reranker)
}

fn deadline_notes(r: &Value) -> Vec<String> {
    r["result"]["usage"]["notes"].as_array().map_or_else(Vec::new, |ns| {
        ns.iter().filter_map(Value::as_str).filter(|n| n.contains("deadline")).map(str::to_owned).collect()
    })
}

fn reranked(r: &Value) -> usize {
    r["result"]["usage"]["reranked"].as_u64().and_then(|n| usize::try_from(n).ok()).unwrap_or(usize::MAX)
}

/// A retrieve of `k` over `topN` 20 by the reranker's order alone, within `deadline_ms`.
fn within(k: usize, deadline_ms: u64) -> Value {
    json!({"query": "q", "k": k, "rerank": {"topN": 20, "fusion": "none"}, "_meta": {"deadlineMs": deadline_ms}})
}

#[tokio::test]
async fn a_short_deadline_reranks_what_fits() {
    let (mut p, reranker) = slow().await;
    // No deadline pressure: all 4 rescored, nothing noted; the server learns ~50 ms a passage.
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"topN": 4, "fusion": "none"}})).await;
    assert_eq!((ids(&r), reranked(&r)), (vec!["d3".to_owned(), "d2".into(), "d1".into()], 4), "{r}");
    assert!(deadline_notes(&r).is_empty(), "{r}");

    // 20 passages take 1 s, more than the 800 ms given: without the cut this is -32014. With
    // it, the best that fit (~13 after the margin) are rescored, and the answer is in time.
    let started = std::time::Instant::now();
    let r = p.call("retrieve", within(3, 800)).await;
    let took = started.elapsed();
    let n = reranked(&r);
    assert!((3..20).contains(&n), "{r}");
    assert!(took < Duration::from_millis(800), "{took:?} {r}");
    assert_eq!(reranker.calls().last(), Some(&n), "the reranker was given only {n}: {r}");
    let want: Vec<String> = (n - 3..n).rev().map(|i| format!("d{i}")).collect();
    assert_eq!(ids(&r), want, "the reranker's best of the {n} rescored: {r}");
    let notes = deadline_notes(&r);
    assert!(notes.iter().any(|m| m.starts_with(&format!("reranked {n} of 20 candidates"))), "{r}");

    // 500 ms fit fewer than k = 8 passages (at most 7 after the margin): those are rescored and
    // the rest of the 8 follow in first-stage order, their `score` below the rescored ones.
    let r = p.call("retrieve", within(8, 500)).await;
    let n = reranked(&r);
    assert!((1..8).contains(&n), "{r}");
    let mut want: Vec<String> = (0..n).rev().map(|i| format!("d{i}")).collect();
    want.extend((n..8).map(|i| format!("d{i}")));
    assert_eq!(ids(&r), want, "{r}");
    let hits = r["result"]["hits"].as_array().cloned().unwrap_or_default();
    let rescored: Vec<bool> = hits.iter().map(|h| h["scores"].get("rerank").is_some()).collect();
    assert_eq!(rescored, (0..8).map(|i| i < n).collect::<Vec<_>>(), "{r}");
    let scores: Vec<f64> = hits.iter().filter_map(|h| h["score"].as_f64()).collect();
    assert!(scores.windows(2).all(|w| w[0] > w[1]), "{r}");
    assert!(!deadline_notes(&r).is_empty(), "{r}");

    // 80 ms fit no passage at all: the reranker is not called, the answer is the first stage's.
    let calls = reranker.calls().len();
    let r = p.call("retrieve", within(3, 80)).await;
    assert_eq!((ids(&r), reranked(&r)), (vec!["d0".to_owned(), "d1".into(), "d2".into()], 0), "{r}");
    assert_eq!(r["result"]["hits"][0]["score"], json!(30.0), "{r}");
    assert!(deadline_notes(&r).iter().any(|m| m.starts_with("not reranked")), "{r}");
    assert_eq!(reranker.calls().len(), calls, "{r}");

    // No pressure again, with an estimate in hand: nothing is cut.
    let r = p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"topN": 6, "fusion": "none"}})).await;
    assert_eq!((ids(&r), reranked(&r)), (vec!["d5".to_owned(), "d4".into(), "d3".into()], 6), "{r}");
    assert!(deadline_notes(&r).is_empty(), "{r}");
    let r =
        p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"topN": 6}, "_meta": {"deadlineMs": 3000}})).await;
    assert_eq!(reranked(&r), 6, "{r}");
    assert!(deadline_notes(&r).is_empty(), "{r}");
}

#[tokio::test]
async fn a_first_call_is_never_cut() {
    let (mut p, reranker) = slow().await;
    // No estimate yet: the reranker is given all 10 passages (500 ms) and the 300 ms deadline
    // passes, as it would without the stage's cut.
    let r =
        p.call("retrieve", json!({"query": "q", "k": 3, "rerank": {"topN": 10}, "_meta": {"deadlineMs": 300}})).await;
    assert_eq!(r["error"]["code"], json!(-32014), "{r}");
    assert_eq!(reranker.calls(), [10], "{r}");
}
