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
        let text = req.params.include_text != Some(false);
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
