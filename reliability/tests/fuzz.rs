//! Property-based fuzzing of the server's input surface (reliability suite).
//!
//! Every generated frame goes through the real dispatcher (`Server::process`) of a server that
//! registers retrieve (with typed filters, pagination), embed, rerank and index, with
//! streaming and logs on. Properties, for every input:
//! - no panic anywhere (decoding, params parsing, filter validation, handlers, finishing);
//! - every answer is a well-formed JSON-RPC 2.0 response that validates against the normative
//!   schema, and so is every notification emitted while it ran;
//! - a request (an object with `method` and `id`) is always answered, with its own id when
//!   the id is valid, and within a bounded time;
//! - a notification (no `id`) is never answered.
//!
//! `RCP_FUZZ_CASES` (default 2,500 per property, four properties) and `RCP_FUZZ_SEED` (default
//! fixed) make long runs: `RCP_FUZZ_CASES=200000 cargo test --release -p rcp-reliability --test fuzz`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rcp_server::transport::Reply;
use rcp_server::{
    Embed, EmbedRequest, HandlerResult, Index, RequestContext, Rerank, RerankRequest, Retrieve, RetrieveRequest, Server,
};
use rcp_wire::capabilities::{EmbedCapability, IndexCapability, RerankCapability, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------------
// The engine under test: small, deterministic, exercising every result-finishing path.

struct Fuzzed;

impl Retrieve for Fuzzed {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability {
            max_k: Some(20),
            modes: Some(vec![rcp_wire::Mode::Sparse, rcp_wire::Mode::Dense]),
            mmr: Some(true),
            ..Default::default()
        }
    }

    fn filter(&self) -> Option<FilterCapability> {
        Some(FilterCapability::typed([
            ("lang", FieldType::Keyword),
            ("year", FieldType::Int),
            ("title", FieldType::Text),
            ("score", FieldType::Float),
            ("published", FieldType::Date),
            ("open", FieldType::Bool),
        ]))
    }

    fn pagination(&self) -> bool {
        true
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        ctx.progress(0.5, "retrieve", "half way");
        let text = req.query.text();
        let hits = (0..req.k.min(25))
            .map(|i| Hit::new(format!("d{i}"), if i == 3 { f64::NAN } else { 1.0 / (i as f64 + 1.0) }).with_text(&text))
            .collect();
        Ok(RetrieveResult::from_hits(hits))
    }
}

impl Embed for Fuzzed {
    fn capability(&self) -> EmbedCapability {
        EmbedCapability {
            dimension: 3,
            identity: "fuzz-3".into(),
            batch_limit: Some(8),
            encodings: Some(vec!["json".into(), "f32-base64".into()]),
            ..Default::default()
        }
    }

    async fn embed(&self, req: EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        Ok(req.inputs.iter().enumerate().map(|(i, _)| vec![1.0, i as f32, -0.5]).collect())
    }
}

impl Rerank for Fuzzed {
    fn capability(&self) -> RerankCapability {
        RerankCapability { methods: vec!["cross-encoder".into()], max_candidates: Some(16), ..Default::default() }
    }

    async fn rerank(&self, req: RerankRequest, _ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        Ok(req.passages.iter().enumerate().map(|(i, _)| (i % 3) as f64).collect())
    }
}

impl Index for Fuzzed {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: true, ..Default::default() }
    }

    async fn add(&self, p: IndexAddParams, _ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let ids =
            p.documents.iter().enumerate().map(|(i, d)| d.id.clone().unwrap_or_else(|| format!("m{i}"))).collect();
        Ok(IndexAddResult { ids, ..Default::default() })
    }

    async fn delete(&self, p: IndexDeleteParams, _ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        Ok(IndexDeleteResult { deleted: p.ids.len() as u64, ..Default::default() })
    }
}

fn server() -> Server {
    Server::builder("fuzzed", "0").retrieve(Fuzzed).embed(Fuzzed).rerank(Fuzzed).index(Fuzzed).streaming().log().build()
}

// ---------------------------------------------------------------------------------------------
// Generators.

const METHODS: &[&str] = &[
    "initialize",
    "info",
    "ping",
    "shutdown",
    "retrieve",
    "embed",
    "embed/sparse",
    "embed/multi",
    "rerank",
    "query/transform",
    "graph",
    "index/add",
    "index/delete",
    "catalog/list",
    "feedback",
    "memory/build",
    "memory/recall",
    "notifications/cancel",
    "notifications/progress",
    "nope/method",
    "",
];

const KEYS: &[&str] = &[
    "query",
    "k",
    "mode",
    "filter",
    "candidateK",
    "rerank",
    "mmr",
    "fusion",
    "cursor",
    "strict",
    "_meta",
    "recency",
    "unit",
    "level",
    "tokenBudget",
    "encoding",
    "seed",
    "indexVersion",
    "minScore",
    "rewrite",
    "modality",
    "inputs",
    "texts",
    "kind",
    "passages",
    "documents",
    "topN",
    "method",
    "ids",
    "protocolVersion",
    "capabilities",
    "client",
    "nonce",
    "id",
    "deadlineMs",
    "progressToken",
    "logLevel",
    "idempotencyKey",
    "lambda",
    "alpha",
    "rrfK",
    "type",
    "text",
    "meta",
    "field",
    "op",
    "value",
];

const FIELDS: &[&str] = &["lang", "year", "title", "score", "published", "open", "nope", ""];
const OPS: &[&str] =
    &["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "exists", "contains", "prefix", "between", "near", "bogus"];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => prop::sample::select(KEYS).prop_map(str::to_owned), 1 => "[a-zA-Z_$]{0,6}"]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-3i64..200).prop_map(Value::from),
        prop::sample::select(&[0.5f64, -1.0, 1e300, -1e300, 3.0, 1e-9, 9.223372036854776e18][..]).prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        "[a-z ]{0,12}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(&["2024-01-31", "2024-13-45T99:00:00Z", "rust", "f32-base64", "json", "sparse"][..])
            .prop_map(Value::from),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn filter() -> impl Strategy<Value = Value> {
    let cond = (prop::sample::select(FIELDS), prop::sample::select(OPS), prop_oneof![leaf(), json()])
        .prop_map(|(f, o, v)| json!({"field": f, "op": o, "value": v}));
    cond.prop_recursive(6, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({"and": v})),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({"or": v})),
            inner.prop_map(|v| json!({"not": v})),
        ]
    })
}

/// Params: arbitrary JSON, or an object of known keys with arbitrary values and real filters.
fn params() -> impl Strategy<Value = Option<Value>> {
    let structured = prop::collection::vec((key(), prop_oneof![3 => json(), 1 => filter(), 1 => leaf()]), 0..7)
        .prop_map(|kv| {
            let mut m: Map<String, Value> = kv.into_iter().collect();
            if m.contains_key("query") || m.len().is_multiple_of(2) {
                m.entry("query").or_insert_with(|| json!("rust"));
                m.entry("k").or_insert_with(|| json!(3));
            }
            Value::Object(m)
        });
    prop_oneof![1 => Just(None), 1 => json().prop_map(Some), 4 => structured.prop_map(Some)]
}

fn id() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        1 => Just(None),
        4 => any::<i32>().prop_map(|i| Some(json!(i))),
        2 => "[a-z0-9-]{0,8}".prop_map(|s| Some(json!(s))),
        1 => leaf().prop_map(Some),
        1 => json().prop_map(Some),
    ]
}

fn request() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![8 => Just(Some(json!("2.0"))), 1 => Just(None), 1 => leaf().prop_map(Some)];
    let method = prop_oneof![
        8 => prop::sample::select(METHODS).prop_map(|m| Some(json!(m))),
        1 => Just(None),
        1 => leaf().prop_map(Some),
    ];
    (jsonrpc, id(), method, params()).prop_map(|(j, id, m, p)| {
        let mut o = Map::new();
        for (k, v) in [("jsonrpc", j), ("id", id), ("method", m), ("params", p)] {
            if let Some(v) = v {
                o.insert(k.to_owned(), v);
            }
        }
        Value::Object(o)
    })
}

/// A frame's text: a request, a batch of requests, or either damaged by a byte-level edit.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        6 => request().prop_map(|v| v.to_string()),
        1 => prop::collection::vec(request(), 0..5).prop_map(|v| Value::Array(v).to_string()),
    ];
    (text, 0usize..4, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(t, edit, at, byte)| {
        let mut b = t.into_bytes();
        let i = at.index(b.len() + 1);
        match edit {
            1 => b.truncate(i),
            2 => b.insert(i, byte),
            3 if i < b.len() => b[i] = byte,
            _ => {}
        }
        b
    })
}

// ---------------------------------------------------------------------------------------------
// The properties.

fn config() -> Config {
    let cases = std::env::var("RCP_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2_500);
    let seed = std::env::var("RCP_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_f2c9);
    Config { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(seed), ..Config::default() }
}

struct Harness {
    server: Server,
    rt: tokio::runtime::Runtime,
}

impl Harness {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        Self { server: server(), rt }
    }

    /// Processes `frame` on a fresh session (initialised first when `init`) and checks every
    /// frame that comes out.
    fn check(&self, frame: &[u8], init: bool) -> Result<(), TestCaseError> {
        let emitted: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = Arc::clone(&emitted);
        let connection = self.server.connect(move |f| sink.lock().expect("sink").push(f));
        let _guard = self.rt.enter();
        if init {
            let hello = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"capabilities":{"log":{}}}}"#;
            let answer = self.run(connection.handle(hello))?;
            prop_assert!(answer.is_some_and(|a| a.windows(8).any(|w| w == b"\"result\"")), "initialize failed");
        }
        let answer = self.run(connection.handle(frame))?;
        let expected = expectation(frame);
        match (&answer, &expected) {
            (None, Expect::Answer(_)) => {
                return Err(TestCaseError::fail(format!(
                    "a request got no answer: {}",
                    String::from_utf8_lossy(frame)
                )));
            }
            (Some(a), Expect::Silence) => {
                return Err(TestCaseError::fail(format!(
                    "a notification was answered: {} -> {}",
                    String::from_utf8_lossy(frame),
                    String::from_utf8_lossy(a)
                )));
            }
            _ => {}
        }
        if let Some(a) = &answer {
            let v = well_formed(a)?;
            if let Expect::Answer(Some(id)) = &expected
                && !v.is_array()
            {
                // A duplicate in-flight id is answered with null; a fresh session has none.
                prop_assert_eq!(&v["id"], id, "answered with another id");
            }
        }
        for n in emitted.lock().expect("sink").iter() {
            let v: Value = serde_json::from_slice(n).map_err(|e| TestCaseError::fail(format!("notification: {e}")))?;
            rcp_testkit::assert_valid_frame(&v);
        }
        Ok(())
    }

    fn run(&self, reply: Reply) -> Result<Option<Vec<u8>>, TestCaseError> {
        self.rt
            .block_on(tokio::time::timeout(Duration::from_secs(10), reply))
            .map_err(|_| TestCaseError::fail("no answer within 10 s"))
    }
}

enum Expect {
    /// A request: answered, with this id when the id is valid.
    Answer(Option<Value>),
    /// A notification: never answered.
    Silence,
    /// Anything else (damaged, a response, a batch): any answer must still be well formed.
    Unknown,
}

fn expectation(frame: &[u8]) -> Expect {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(frame) else { return Expect::Unknown };
    let method_ok = o.get("method").is_some_and(Value::is_string);
    let version_ok = o.get("jsonrpc") == Some(&json!("2.0"));
    match o.get("id") {
        None if method_ok && version_ok => Expect::Silence,
        None => Expect::Unknown,
        Some(id @ (Value::String(_) | Value::Number(_))) => Expect::Answer(Some(id.clone())),
        Some(_) => Expect::Answer(None),
    }
}

/// The answer parses, is a response (or a non-empty batch of them) and validates against the
/// normative schema.
fn well_formed(answer: &[u8]) -> Result<Value, TestCaseError> {
    let v: Value = serde_json::from_slice(answer)
        .map_err(|e| TestCaseError::fail(format!("answer is not JSON ({e}): {}", String::from_utf8_lossy(answer))))?;
    let members: Vec<&Value> = match &v {
        Value::Array(a) => {
            prop_assert!(!a.is_empty(), "empty batch answer");
            a.iter().collect()
        }
        other => vec![other],
    };
    for m in members {
        prop_assert_eq!(&m["jsonrpc"], &json!("2.0"), "jsonrpc in {}", m);
        prop_assert!(matches!(m.get("id"), Some(Value::String(_) | Value::Number(_) | Value::Null)), "id in {}", m);
        prop_assert!(m.get("result").is_some() != m.get("error").is_some(), "result xor error in {}", m);
        if let Some(e) = m.get("error") {
            prop_assert!(e["code"].is_i64() && e["message"].is_string(), "error shape in {}", m);
            let message = e["message"].as_str().unwrap_or_default();
            prop_assert!(message.len() <= 4096, "an error message of {} bytes", message.len());
        }
    }
    rcp_testkit::assert_valid_frame(&v);
    Ok(v)
}

fn run<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(config());
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

#[test]
fn any_frame_on_an_initialized_session_gets_a_well_formed_answer() {
    let h = Harness::new();
    run(frame(), |f| h.check(&f, true));
}

#[test]
fn any_frame_on_a_fresh_session_gets_a_well_formed_answer() {
    let h = Harness::new();
    run(frame(), |f| h.check(&f, false));
}

#[test]
fn arbitrary_bytes_never_panic_the_decoder() {
    let h = Harness::new();
    run(prop::collection::vec(any::<u8>(), 0..256), |b| h.check(&b, true));
}

#[test]
fn filter_validation_is_total() {
    let cap = Fuzzed.filter().expect("filter capability");
    run(prop_oneof![filter(), json()], |f| {
        match cap.validate(&f) {
            Ok(parsed) => {
                // A valid filter evaluates on any metadata without panicking.
                let meta: Map<String, Value> =
                    [("lang".to_owned(), json!("en")), ("year".to_owned(), json!(2020))].into_iter().collect();
                let _ = parsed.matches(&meta);
            }
            Err(e) => prop_assert!(e.code.0 == -32602 || e.code.0 == -32005, "unexpected code {}", e.code.0),
        }
        Ok(())
    });
}
