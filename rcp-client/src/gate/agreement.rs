//! Client and server agree on every gated option (§7.7 `strict`, §14.4).
//!
//! One row per [`Gate`] of `rcp_wire::gating` (the match below is exhaustive, so a new gate
//! without a row does not compile, and every row must trigger its own gate). For each row the
//! client gate runs before any I/O and a real server built with `Server::builder` answers the
//! same request over `tokio::io::duplex`:
//! - `strict` (the default): the client refuses ⇔ the server answers an error, with one code;
//! - `strict:false`: where the gate has a fallback, the client lets the call through and the
//!   server answers with the fallback's note; where it has none, both still refuse.

use std::time::Duration;

use rcp_server::{
    Embed, EmbedRequest, Graph, HandlerResult, Index, Memory, RequestContext, Rerank, RerankRequest, Retrieve,
    RetrieveRequest, Server, Transform,
};
use rcp_wire::capabilities::{
    EmbedCapability, GraphCapability, IndexCapability, MemoryCapability, RerankCapability, RetrieveCapability,
    TransformCapability,
};
use rcp_wire::filter::FilterCapability;
use rcp_wire::gating::{self, Finding, Gate};
use rcp_wire::graph::{GraphParams, GraphResult};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_wire::methods::Method;
use rcp_wire::transform::{TransformParams, TransformResult};
use rcp_wire::{Capabilities, RcpError, RetrieveResult};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::*;
use crate::error::ClientError;

/// An engine that advertises exactly the capabilities of one row.
#[derive(Clone)]
struct Fixture(Capabilities);

fn unused() -> RcpError {
    RcpError::internal("fixture: accepted")
}

impl Retrieve for Fixture {
    fn capability(&self) -> RetrieveCapability {
        self.0.retrieve.clone().unwrap_or_default()
    }
    fn filter(&self) -> Option<FilterCapability> {
        self.0.filter.clone()
    }
    fn pagination(&self) -> bool {
        self.0.pagination.is_some()
    }
    async fn retrieve(&self, _: RetrieveRequest, _: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult::from_hits(Vec::new()))
    }
}

impl Embed for Fixture {
    fn capability(&self) -> EmbedCapability {
        self.0.embed.clone().unwrap_or_default()
    }
    async fn embed(&self, req: EmbedRequest, _: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        let dimension = self.0.embed.as_ref().map_or(1, |e| e.dimension as usize);
        Ok(vec![vec![1.0; dimension]; req.inputs.len()])
    }
}

impl Rerank for Fixture {
    fn capability(&self) -> RerankCapability {
        self.0.rerank.clone().unwrap_or_default()
    }
    async fn rerank(&self, req: RerankRequest, _: RequestContext) -> HandlerResult<Vec<f64>> {
        Ok(vec![0.5; req.passages.len()])
    }
}

impl Transform for Fixture {
    fn capability(&self) -> TransformCapability {
        self.0.transform.clone().unwrap_or_default()
    }
    async fn transform(&self, _: TransformParams, _: RequestContext) -> HandlerResult<TransformResult> {
        Err(unused())
    }
}

impl Graph for Fixture {
    fn capability(&self) -> GraphCapability {
        self.0.graph.clone().unwrap_or_default()
    }
    async fn graph(&self, _: GraphParams, _: RequestContext) -> HandlerResult<GraphResult> {
        Err(unused())
    }
}

impl Index for Fixture {
    fn capability(&self) -> IndexCapability {
        self.0.index.clone().unwrap_or_default()
    }
    async fn add(&self, _: IndexAddParams, _: RequestContext) -> HandlerResult<IndexAddResult> {
        Err(unused())
    }
    async fn delete(&self, _: IndexDeleteParams, _: RequestContext) -> HandlerResult<IndexDeleteResult> {
        Err(unused())
    }
}

impl Memory for Fixture {
    fn capability(&self) -> MemoryCapability {
        self.0.memory.clone().unwrap_or_default()
    }
    async fn build(&self, _: MemoryBuildParams, _: RequestContext) -> HandlerResult<MemoryBuildResult> {
        Err(unused())
    }
    async fn recall(&self, _: MemoryRecallParams, _: RequestContext) -> HandlerResult<MemoryRecallResult> {
        Err(unused())
    }
}

/// One request that uses an unadvertised option, and the capabilities it is sent against.
struct Row {
    caps: Value,
    method: &'static str,
    params: Value,
}

fn row(caps: Value, method: &'static str, params: Value) -> Row {
    Row { caps, method, params }
}

fn image() -> Value {
    json!({"type": "image", "mimeType": "image/png", "data": "AA=="})
}

fn retrieve_row(caps: Value, extra: Value) -> Row {
    let mut params = json!({"query": "cats", "k": 1});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    row(caps, "retrieve", params)
}

/// The rows of one gate: every gate has at least one, and each row triggers that gate.
fn rows(gate: Gate) -> Vec<Row> {
    let plain = json!({"retrieve": {}});
    let filtered = json!({"retrieve": {}, "filter": {"fields": {"lang": "keyword"}, "operators": ["eq"]}});
    match gate {
        Gate::RetrieveModality => vec![retrieve_row(plain, json!({"modality": "image"}))],
        Gate::RetrieveQueryModality => vec![
            retrieve_row(plain.clone(), json!({"query": [{"type": "text", "text": "cats"}, image()]})),
            retrieve_row(plain, json!({"query": image()})),
        ],
        Gate::RetrieveMode => vec![retrieve_row(json!({"retrieve": {"modes": ["sparse"]}}), json!({"mode": "dense"}))],
        Gate::RetrieveFusionMethod => vec![retrieve_row(
            json!({"retrieve": {"modes": ["hybrid"], "fusion": ["rrf"]}}),
            json!({"fusion": {"method": "convex"}}),
        )],
        Gate::RetrieveRerank => vec![retrieve_row(plain, json!({"rerank": {"topN": 5}}))],
        Gate::RetrieveRerankMethod => vec![retrieve_row(
            json!({"retrieve": {"rerankBuiltin": true}, "rerank": {"methods": ["cross-encoder"]}}),
            json!({"rerank": {"method": "llm"}}),
        )],
        Gate::RetrieveMmr => vec![retrieve_row(plain, json!({"mmr": {"lambda": 0.5}}))],
        Gate::RetrieveRewrite => {
            vec![retrieve_row(
                json!({"retrieve": {}, "transform": {"methods": ["hyde"]}}),
                json!({"rewrite": "step-back"}),
            )]
        }
        Gate::RetrieveFilter => {
            vec![retrieve_row(plain, json!({"filter": {"field": "lang", "op": "eq", "value": "en"}}))]
        }
        Gate::RetrieveFilterClause => vec![
            retrieve_row(filtered.clone(), json!({"filter": {"field": "lang", "op": "ne", "value": "en"}})),
            retrieve_row(filtered, json!({"filter": {"field": "year", "op": "eq", "value": 2024}})),
        ],
        Gate::RetrieveRecencyField => vec![retrieve_row(filtered, json!({"recency": {"field": "lang"}}))],
        Gate::RetrieveUnit => vec![retrieve_row(plain, json!({"unit": "document"}))],
        Gate::RetrieveLevel => vec![retrieve_row(json!({"retrieve": {"levels": 2}}), json!({"level": 2}))],
        Gate::RetrieveTokenBudget => vec![retrieve_row(plain, json!({"tokenBudget": 100}))],
        Gate::RetrieveIndexVersion => vec![retrieve_row(plain, json!({"indexVersion": "v1"}))],
        Gate::RetrieveCursor => vec![retrieve_row(plain, json!({"cursor": "c1"}))],
        Gate::RetrieveEncoding => vec![retrieve_row(plain, json!({"encoding": "f32-base64"}))],
        Gate::EmbedEncoding => vec![row(
            json!({"embed": {"dimension": 2, "identity": "m"}}),
            "embed",
            json!({"inputs": ["a"], "encoding": "f32-base64"}),
        )],
        Gate::EmbedModality => {
            vec![row(json!({"embed": {"dimension": 2, "identity": "m"}}), "embed", json!({"inputs": ["a", image()]}))]
        }
        Gate::RerankMethod => vec![row(
            json!({"rerank": {"methods": ["cross-encoder"]}}),
            "rerank",
            json!({"query": "q", "passages": ["a"], "method": "llm"}),
        )],
        Gate::RerankQueryModality => vec![row(
            json!({"rerank": {"methods": ["cross-encoder"]}}),
            "rerank",
            json!({"query": image(), "passages": ["a"]}),
        )],
        Gate::IndexChunk => vec![row(
            json!({"index": {"writable": true}}),
            "index/add",
            json!({"documents": [{"text": "a"}], "chunk": true}),
        )],
        Gate::IndexContextual => vec![row(
            json!({"index": {"writable": true, "chunking": true}}),
            "index/add",
            json!({"documents": [{"text": "a"}], "contextual": true}),
        )],
        Gate::TransformMethod => vec![row(
            json!({"transform": {"methods": ["hyde"]}}),
            "query/transform",
            json!({"query": "q", "method": "decompose"}),
        )],
        Gate::GraphOp => vec![row(json!({"graph": {"ops": ["local"]}}), "graph", json!({"op": "global"}))],
        Gate::MemoryScope => {
            vec![row(json!({"memory": {"scopes": ["session"]}}), "memory/build", json!({"scope": "global"}))]
        }
    }
}

fn parse<T: DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("row params parse")
}

/// What the shared gating module finds in the row.
fn findings(caps: &Capabilities, method: &str, p: &Value) -> Vec<Finding> {
    match method {
        "retrieve" => gating::retrieve(caps, &parse(p)),
        "embed" => gating::embed(caps, &parse(p)),
        "rerank" => gating::rerank(caps, &parse(p)),
        "index/add" => gating::index_add(caps, &parse(p)),
        "query/transform" => gating::transform(caps, &parse(p)).into_iter().collect(),
        "graph" => gating::graph(caps, &parse(p)).into_iter().collect(),
        "memory/build" => gating::memory_build(caps, &parse(p)).into_iter().collect(),
        other => panic!("no gating for {other}"),
    }
}

/// The client's pre-I/O gate, called the way `client.rs` calls it.
fn client(caps: &Capabilities, method: &str, p: &Value) -> Result<(), ClientError> {
    match method {
        "retrieve" => retrieve(caps, &parse(p)),
        "embed" => embed(caps, &parse(p)),
        "rerank" => rerank(caps, &parse(p)),
        "index/add" => index_add(caps, &parse(p)),
        "query/transform" => {
            let p: TransformParams = parse(p);
            super::method(caps, Method::QueryTransform)?;
            one_of("method", &p.method, caps.transform.as_ref().map(|t| t.methods.as_slice()))
        }
        "graph" => {
            let p: GraphParams = parse(p);
            super::method(caps, Method::Graph)?;
            one_of("op", &p.op, caps.graph.as_ref().map(|g| g.ops.as_slice()))
        }
        "memory/build" => {
            let p: MemoryBuildParams = parse(p);
            super::method(caps, Method::MemoryBuild)?;
            match &p.scope {
                Some(scope) => one_of("scope", scope, caps.memory.as_ref().map(|m| m.scopes.as_slice())),
                None => Ok(()),
            }
        }
        other => panic!("no client gate for {other}"),
    }
}

/// A server advertising `caps`, asked `method` with `params` after `initialize`; the answer.
async fn server(caps: &Capabilities, method: &str, params: &Value) -> Value {
    let f = Fixture(caps.clone());
    let mut b = Server::builder("agreement", "0");
    if caps.retrieve.is_some() {
        b = b.retrieve(f.clone());
    }
    if caps.embed.is_some() {
        b = b.embed(f.clone());
    }
    if caps.rerank.is_some() {
        b = b.rerank(f.clone());
    }
    if caps.transform.is_some() {
        b = b.transform(f.clone());
    }
    if caps.graph.is_some() {
        b = b.graph(f.clone());
    }
    if caps.index.is_some() {
        b = b.index(f.clone());
    }
    if caps.memory.is_some() {
        b = b.memory(f);
    }
    let server = b.build();
    let (near, far) = tokio::io::duplex(1 << 16);
    let (far_read, far_write) = tokio::io::split(far);
    let task = tokio::spawn(async move { server.serve((far_read, far_write)).await });
    let (read, mut write) = tokio::io::split(near);
    let mut lines = BufReader::new(read).lines();
    let frames = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}),
    ];
    let mut answer = Value::Null;
    for frame in frames {
        write.write_all(format!("{frame}\n").as_bytes()).await.expect("write");
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("answer in time")
            .expect("read")
            .expect("a line");
        answer = serde_json::from_str(&line).expect("json");
    }
    drop(write);
    task.abort();
    answer
}

#[tokio::test]
async fn client_and_server_agree_on_every_gated_option() {
    for gate in Gate::ALL {
        for Row { caps, method, params } in rows(gate) {
            let caps: Capabilities = serde_json::from_value(caps).expect("row capabilities");
            let found = findings(&caps, method, &params);
            let finding = found
                .iter()
                .find(|f| f.gate == gate)
                .unwrap_or_else(|| panic!("{gate:?}: the row does not trigger its gate: {params}"))
                .clone();
            assert_eq!(gate.method().name(), method, "{gate:?}: row sent to the wrong method");

            // strict (the default): both refuse, with one code.
            let refused = client(&caps, method, &params).expect_err(&format!("{gate:?}: client let it through"));
            let answer = server(&caps, method, &params).await;
            let code =
                answer["error"]["code"].as_i64().unwrap_or_else(|| panic!("{gate:?}: server accepted: {answer}"));
            assert_eq!(refused.code().map(|c| c.0), Some(code), "{gate:?}: client {refused} vs server {answer}");
            assert_eq!(finding.error().code.0, code, "{gate:?}");

            // strict:false: both fall back (with the note), or both still refuse.
            let mut lenient = params.clone();
            lenient["strict"] = json!(false);
            let client_lenient = client(&caps, method, &lenient);
            let answer = server(&caps, method, &lenient).await;
            match finding.note() {
                Some(note) => {
                    assert!(client_lenient.is_ok(), "{gate:?}: client refused under strict:false: {client_lenient:?}");
                    assert!(answer.get("result").is_some(), "{gate:?}: server refused under strict:false: {answer}");
                    assert!(answer.to_string().contains(&note), "{gate:?}: note '{note}' missing from {answer}");
                }
                None => {
                    let refused =
                        client_lenient.expect_err(&format!("{gate:?}: client let through an option with no fallback"));
                    assert_eq!(
                        refused.code().map(|c| c.0),
                        answer["error"]["code"].as_i64(),
                        "{gate:?}: client {refused} vs server {answer}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_gate_has_a_row() {
    for gate in Gate::ALL {
        assert!(!rows(gate).is_empty(), "{gate:?} has no agreement row");
    }
}
