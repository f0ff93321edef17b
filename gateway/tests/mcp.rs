//! The MCP bridge: in-process with rmcp's own client over an in-memory duplex, and as a process
//! (`rcp-gateway mcp`) driven by the official Python `mcp` package, an independent client.
//! The tool list follows the federation's union (a tool per capability its engines advertise),
//! and the capability tools answer real calls through real engines: `feedback` through
//! `rcp-bm25`; `rerank`, `graph`, `memory_recall` and `feedback` through `rcp-dense --graph`
//! and `rcp-rerank` (their models fetched into the user cache on first use).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rcp_gateway::mcp::Bridge;
use rcp_gateway::{Gateway, GatewayOptions, GatewayRegistry};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn args(v: Value) -> rmcp::model::JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

type McpClient = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// A bridge over a gateway of `registry` (engines given `timeout` to start and to answer),
/// served in process to rmcp's client; the task serving it.
async fn bridge(registry: &Path, timeout: Duration) -> (McpClient, tokio::task::JoinHandle<()>) {
    let registry = GatewayRegistry::load(registry).unwrap();
    let options = GatewayOptions { engine_timeout: timeout, connect_timeout: timeout, ..GatewayOptions::default() };
    serve_bridge(Arc::new(Gateway::start(registry, options).await)).await
}

/// A bridge over `gateway`, served in process to rmcp's client; the task serving it.
async fn serve_bridge(gateway: Arc<Gateway>) -> (McpClient, tokio::task::JoinHandle<()>) {
    let (server_io, client_io) = tokio::io::duplex(1024 * 1024);
    let server = tokio::spawn(async move {
        let running = Bridge::new(gateway).serve(server_io).await.expect("serve");
        let _ = running.waiting().await;
    });
    (().serve(client_io).await.expect("client initialize"), server)
}

/// Calls `tool`; the structured content with the text content as `_content`, or the text of a
/// tool error as `Err`.
async fn call(client: &McpClient, tool: &'static str, arguments: Value) -> Result<Value, String> {
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    if r.is_error == Some(true) {
        return Err(text);
    }
    let mut structured = r.structured_content.unwrap_or_else(|| panic!("{tool}: no structured content"));
    structured["_content"] = json!(text);
    Ok(structured)
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_ref()).collect()
}

fn tool<'a>(tools: &'a [rmcp::model::Tool], name: &str) -> &'a rmcp::model::Tool {
    tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tool '{name}'"))
}

/// A JSONL corpus of `docs` at `dir/corpus.jsonl`.
fn corpus(dir: &Path, docs: &[(&str, &str)]) -> std::path::PathBuf {
    let path = dir.join("corpus.jsonl");
    let lines: Vec<String> = docs.iter().map(|(id, text)| json!({"_id": id, "text": text}).to_string()).collect();
    std::fs::write(&path, lines.join("\n")).expect("write corpus");
    path
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn rmcp_client_lists_tools_searches_fetches_and_lists_engines() {
    let dir = tempfile::tempdir().unwrap();
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            fixture("a", &["--filter-field", "lang", "--doc", "a1:wing lift drag", "--doc", "a2:wing tip"]),
            fixture("b", &["--filter-field", "lang", "--doc", "b1:wing flutter"]),
        ],
    );
    let registry = GatewayRegistry::load(&reg).unwrap();
    let gateway = Arc::new(Gateway::start(registry, GatewayOptions::default()).await);
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        let running = Bridge::new(gateway).serve(server_io).await.expect("serve");
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.expect("client initialize");

    let tools = client.list_all_tools().await.expect("tools/list");
    // Engines with retrieval alone: no rerank, graph, memory_recall or feedback tool.
    assert_eq!(tool_names(&tools), ["search", "list_engines", "fetch"]);
    let search = &tools[0];
    let props = &search.input_schema["properties"];
    assert_eq!(props["where"]["properties"]["lang"]["type"], "string", "derived from the filter fields");
    assert_eq!(props["engine"]["enum"], json!(["a", "b"]));

    let r = client
        .call_tool(CallToolRequestParams::new("search").with_arguments(args(json!({"query": "wing", "k": 3}))))
        .await
        .expect("search");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let hits = r.structured_content.as_ref().expect("structured content")["hits"].as_array().unwrap().clone();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h["id"].is_string() && h["score"].is_number() && h["snippet"].is_string()));
    let text = r.content[0].as_text().expect("text content").text.clone();
    assert!(text.contains("a1") && text.contains("[a]"), "{text}");

    let r = client
        .call_tool(
            CallToolRequestParams::new("search")
                .with_arguments(args(json!({"query": "wing", "engine": "b", "where": {"lang": "x"}}))),
        )
        .await
        .unwrap();
    let hits = r.structured_content.unwrap()["hits"].clone();
    assert_eq!(
        hits,
        json!([{"id": "b1", "title": null, "snippet": "wing flutter", "score": hits[0]["score"], "engine": "b"}])
    );

    let r =
        client.call_tool(CallToolRequestParams::new("fetch").with_arguments(args(json!({"id": "a1"})))).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["text"], "wing lift drag");
    let r = client
        .call_tool(CallToolRequestParams::new("fetch").with_arguments(args(json!({"id": "nope"}))))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));

    let r = client.call_tool(CallToolRequestParams::new("list_engines")).await.unwrap();
    let engines = r.structured_content.unwrap()["engines"].clone();
    assert_eq!(engines[0]["id"], "a");
    assert_eq!(engines[1]["server"]["name"], "b");

    let bad = client
        .call_tool(CallToolRequestParams::new("search").with_arguments(args(json!({"query": ""}))))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    drop(client);
    server.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_list_follows_the_union_and_feedback_reaches_the_engine_of_the_hit() {
    let dir = tempfile::tempdir().unwrap();
    let docs = [
        ("wing-1", "Lift and drag of a swept wing at transonic speed."),
        ("wing-2", "Boundary layer transition on a swept wing."),
        ("heat-1", "Heat transfer to a blunt body at hypersonic speed."),
    ];
    let data = dir.path().join("bm25");
    let corpus = corpus(dir.path(), &docs);
    run(Command::new(bm25_bin()).args(["index", "--data-dir"]).arg(&data).arg(&corpus), "rcp-bm25 index");
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            fixture("fx", &["--doc", "fx-1:wing lift in ground effect"]),
            // With a data directory rcp-bm25 records feedback (the fixture does not).
            json!({"id": "bm25", "command": [bm25_bin(), "serve", "--data-dir", data.to_string_lossy()]}),
        ],
    );
    let (client, server) = bridge(&reg, Duration::from_secs(30)).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tool_names(&tools), ["search", "list_engines", "fetch", "feedback"], "no graph, rerank or memory");
    let feedback = tool(&tools, "feedback");
    assert!(feedback.description.as_deref().is_some_and(|d| d.contains("engine 'bm25'")), "{feedback:?}");
    let signal = &feedback.input_schema["properties"]["signals"]["items"]["properties"];
    for key in ["hitId", "used", "cited", "helpful", "reward", "poisonSuspected"] {
        assert!(signal.get(key).is_some(), "signal property '{key}' missing: {signal}");
    }
    // A tool the union does not offer is unknown to the bridge.
    let absent =
        client.call_tool(CallToolRequestParams::new("graph").with_arguments(args(json!({"op": "neighbors"})))).await;
    assert!(absent.is_err(), "{absent:?}");

    let found = call(&client, "search", json!({"query": "swept wing lift", "k": 5})).await.expect("search");
    let hits = found["hits"].as_array().cloned().unwrap_or_default();
    assert!(hits.iter().any(|h| h["id"] == "wing-1" && h["engine"] == "bm25"), "{found}");
    assert!(hits.iter().any(|h| h["id"] == "fx-1" && h["engine"] == "fx"), "{found}");

    let signals = json!([
        {"hitId": "wing-1", "used": true, "cited": true, "reward": 0.5},
        {"hitId": "fx-1", "used": true},
        {"hitId": "never-served", "helpful": false},
    ]);
    let r = call(&client, "feedback", json!({"signals": signals, "query": "swept wing lift"})).await.expect("feedback");
    assert_eq!(r["accepted"], 1, "{r}");
    assert_eq!(r["engines"], json!({"bm25": 1}), "the engine that returned the hit took it: {r}");
    assert_eq!(r["unrouted"], json!(["fx-1", "never-served"]), "the fixture records no feedback: {r}");
    assert!(r["_content"].as_str().is_some_and(|t| t.starts_with("Accepted 1 of 3 signal(s).")), "{r}");

    // The framework's rules apply before the gateway's handler: a reward outside [-1, 1].
    let bad = call(&client, "feedback", json!({"signals": [{"hitId": "wing-1", "reward": 2.0}]})).await;
    assert!(bad.as_ref().is_err_and(|t| t.contains("reward") && t.contains("-32602")), "{bad:?}");
    drop(client);
    server.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn rerank_graph_memory_and_feedback_tools_answer_through_real_engines() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dense");
    let corpus = corpus(dir.path(), &AERO_DOCS);
    run(
        Command::new(dense_bin()).args(["index", "--fetch-model", "--data-dir"]).arg(&data).arg(&corpus),
        "rcp-dense index",
    );
    run(Command::new(rerank_bin()).arg("fetch-model"), "rcp-rerank fetch-model");
    let dense = json!([dense_bin(), "serve", "--graph", "--data-dir", data.to_string_lossy()]);
    let reg = write_registry(
        dir.path(),
        "rcp.json",
        vec![
            json!({"id": "dense", "command": dense}),
            json!({"id": "rerank", "command": [rerank_bin(), "serve", "--encoder-sessions", "1"]}),
        ],
    );
    let (client, server) = bridge(&reg, Duration::from_secs(120)).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tool_names(&tools), ["search", "list_engines", "fetch", "rerank", "graph", "memory_recall", "feedback"]);
    let graph = tool(&tools, "graph");
    assert_eq!(
        graph.input_schema["properties"]["op"]["enum"],
        json!(["local", "global", "drift", "communities", "neighbors"]),
        "the dense engine's ops"
    );
    assert!(graph.description.as_deref().is_some_and(|d| d.contains("engine 'dense'")), "{graph:?}");
    let rerank = tool(&tools, "rerank");
    let methods = &rerank.input_schema["properties"]["method"]["enum"];
    assert!(methods.as_array().is_some_and(|m| m.contains(&json!("cross-encoder"))), "{methods}");
    assert!(rerank.description.as_deref().is_some_and(|d| d.contains("engine 'rerank'")), "{rerank:?}");
    let memory = tool(&tools, "memory_recall");
    assert!(memory.description.as_deref().is_some_and(|d| d.contains("engine 'dense'")), "{memory:?}");

    // rerank: the re-entry passages first.
    let passages: Vec<&str> = AERO_DOCS.iter().map(|(_, t)| *t).collect();
    let ask = json!({"query": "heating during re-entry", "passages": passages, "method": "cross-encoder"});
    let r = call(&client, "rerank", ask).await.expect("rerank");
    assert_eq!(r["scores"].as_array().map(Vec::len), Some(AERO_DOCS.len()), "{r}");
    assert_eq!(r["order"].as_array().map(Vec::len), Some(AERO_DOCS.len()), "{r}");
    let best = r["order"][0].as_u64().unwrap_or(99) as usize;
    assert!(AERO_DOCS.get(best).is_some_and(|(id, _)| id.starts_with("heat")), "{r}");
    assert!(r["notes"].to_string().contains("served by engine 'rerank'"), "{r}");

    // graph neighbors: nodes and edges around a seed.
    let r = call(&client, "graph", json!({"op": "neighbors", "seedIds": ["wing-1"], "k": 5})).await.expect("neighbors");
    assert!(r["nodes"].as_array().is_some_and(|n| !n.is_empty()), "{r}");
    assert!(r["edges"].as_array().is_some_and(|e| !e.is_empty()), "{r}");
    // graph local: hits, which fetch then answers without a search.
    let r = call(&client, "graph", json!({"op": "local", "query": "heat shield ablation during re-entry", "k": 3}))
        .await
        .expect("local");
    let hits = r["hits"].as_array().cloned().unwrap_or_default();
    assert!(!hits.is_empty() && hits.iter().all(|h| h["engine"] == "dense"), "{r}");
    let first = hits[0]["id"].as_str().unwrap_or_default().to_owned();
    let fetched = call(&client, "fetch", json!({"id": first})).await.expect("fetch a graph hit");
    let text = AERO_DOCS.iter().find(|(id, _)| *id == first).map(|(_, t)| *t);
    assert_eq!(fetched["text"].as_str(), text, "{fetched}");
    // An op the engines do not advertise: the framework's refusal, as a tool error.
    let bad = call(&client, "graph", json!({"op": "teleport"})).await;
    assert!(bad.as_ref().is_err_and(|t| t.contains("teleport")), "{bad:?}");

    // memory_recall: clues from the dense engine's memory of its index.
    let r = call(&client, "memory_recall", json!({"query": "re-entry heating", "n": 3})).await.expect("memory_recall");
    assert!(r["clues"].as_array().is_some_and(|c| !c.is_empty()), "{r}");

    // feedback on the graph hit reaches the engine that returned it.
    let r = call(&client, "feedback", json!({"signals": [{"hitId": first, "used": true}]})).await.expect("feedback");
    assert_eq!((&r["accepted"], &r["engines"]), (&json!(1), &json!({"dense": 1})), "{r}");
    drop(client);
    server.abort();
}

/// An RCP session on a gateway's own server (the one `rcp-gateway serve` runs), in process.
struct Rcp {
    _server: rcp_server::Server,
    connection: rcp_server::transport::Connection,
}

impl Rcp {
    async fn open(gateway: &Arc<Gateway>) -> Self {
        let server = gateway.builder().build();
        let connection = server.connect(|_| {});
        let rcp = Self { _server: server, connection };
        let client = rcp_wire::lifecycle::PeerInfo::new("mcp-test", "0");
        let init = json!({"protocolVersion": rcp_wire::PROTOCOL_VERSION, "client": client});
        rcp.call("initialize", init).await.expect("initialize");
        rcp
    }

    /// The result of `method`, or the error object it was answered with.
    async fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let frame = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer = self.connection.handle(frame.to_string().as_bytes()).await.expect("an answer");
        let mut answer: Value = serde_json::from_slice(&answer).expect("JSON");
        match answer.get_mut("error") {
            Some(error) => Err(error.take()),
            None => Ok(answer["result"].take()),
        }
    }
}

/// The text of the tool error an RCP error object becomes: its message, its cause (unless the
/// message says it), its code.
fn tool_error_text(e: &Value) -> String {
    let (message, code) = (e["message"].as_str().unwrap_or_default(), &e["code"]);
    match e["data"]["detail"].as_str().filter(|d| !d.is_empty() && !message.contains(d)) {
        Some(detail) => format!("{message}: {detail} (RCP error {code})"),
        None => format!("{message} (RCP error {code})"),
    }
}

/// `search` is a `retrieve` like any RCP client's: for each of its argument sets, the tool
/// answers with the hits and notes, or the error, that the gateway's own server gives the
/// same `retrieve` (`k` clamped to `maxK` with a note, the filter checked against what the
/// engines advertise, `k` and `query` refused as the framework refuses them, the collection
/// checked by the gateway) — the bridge restates none of these rules.
#[tokio::test(flavor = "multi_thread")]
async fn search_is_answered_as_the_gateways_retrieve() {
    let dir = tempfile::tempdir().unwrap();
    let docs = |mut flags: Vec<&'static str>| {
        flags.extend(["--doc", "a1:wing lift drag", "--doc", "a2:wing tip", "--doc", "a3:tail fin"]);
        flags
    };
    // Both engines filter on `lang`; with one that does not, the federation advertises no filter.
    let filtered = write_registry(
        dir.path(),
        "filtered.json",
        vec![fixture("a", &docs(vec!["--filter-field", "lang"])), fixture("b", &docs(vec!["--filter-field", "lang"]))],
    );
    let unfiltered = write_registry(
        dir.path(),
        "unfiltered.json",
        vec![fixture("a", &docs(vec!["--filter-field", "lang"])), fixture("b", &docs(vec![]))],
    );
    let lang = json!({"field": "lang", "op": "eq", "value": "x"});
    let year = json!({"field": "year", "op": "gte", "value": 2000});
    let cases = [
        // The fixtures' maxK is 100: clamped, with the framework's note.
        (&filtered, json!({"query": "wing", "k": 500}), json!({"query": "wing", "k": 500})),
        (&filtered, json!({"query": "wing"}), json!({"query": "wing", "k": 5})),
        (
            &filtered,
            json!({"query": "wing", "engine": "b", "where": {"lang": "x"}}),
            json!({"query": "wing", "k": 5, "filter": lang, "_meta": {"collections": ["b"]}}),
        ),
        (&filtered, json!({"query": "wing", "filter": year}), json!({"query": "wing", "k": 5, "filter": year})),
        (&filtered, json!({"query": "wing", "k": 0}), json!({"query": "wing", "k": 0})),
        (&filtered, json!({"query": "wing", "k": "three"}), json!({"query": "wing", "k": "three"})),
        (&filtered, json!({"query": "  "}), json!({"query": "  ", "k": 5})),
        (
            &filtered,
            json!({"query": "wing", "engine": "zzz"}),
            json!({"query": "wing", "k": 5, "_meta": {"collections": ["zzz"]}}),
        ),
        // The engines do not all filter: a filter is not advertised.
        (
            &unfiltered,
            json!({"query": "wing", "where": {"lang": "x"}}),
            json!({"query": "wing", "k": 5, "filter": lang}),
        ),
    ];
    let mut clamped = false;
    for registry in [&filtered, &unfiltered] {
        let gateway =
            Arc::new(Gateway::start(GatewayRegistry::load(registry).unwrap(), GatewayOptions::default()).await);
        let rcp = Rcp::open(&gateway).await;
        let (client, server) = serve_bridge(Arc::clone(&gateway)).await;
        for (_, search, retrieve) in cases.iter().filter(|(r, _, _)| *r == registry) {
            let tool = call(&client, "search", search.clone()).await;
            match (rcp.call("retrieve", retrieve.clone()).await, tool) {
                (Ok(want), Ok(got)) => {
                    let got_ids: Vec<&str> =
                        got["hits"].as_array().into_iter().flatten().filter_map(|h| h["id"].as_str()).collect();
                    assert_eq!(got_ids, ids(&want), "search {search}: {got}");
                    assert_eq!(got["notes"], json!(notes(&want)), "search {search}: {got}");
                    clamped |= notes(&want).iter().any(|n| n == "k clamped from 500 to maxK 100");
                }
                (Err(want), Err(got)) => assert_eq!(got, tool_error_text(&want), "search {search}"),
                (want, got) => panic!("search {search}: {got:?}; retrieve {retrieve}: {want:?}"),
            }
        }
        drop(client);
        server.abort();
    }
    assert!(clamped, "k above maxK is clamped with the framework's note");
}

/// A venv with the official `mcp` package under the test's target tmp dir; `None` (the test
/// skips) when Python or the package cannot be had.
fn python_with_mcp() -> Option<std::path::PathBuf> {
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))?;
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
    let py = venv.join("bin").join("python");
    let has_mcp = |py: &Path| Command::new(py).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
    if py.exists() && has_mcp(&py) {
        return Some(py);
    }
    let made = Command::new(python).args(["-m", "venv"]).arg(&venv).output().ok()?;
    if !made.status.success() {
        eprintln!("SKIP: cannot create a venv: {}", String::from_utf8_lossy(&made.stderr));
        return None;
    }
    let pip = Command::new(&py).args(["-m", "pip", "install", "--quiet", "mcp"]).output().ok()?;
    if !pip.status.success() || !has_mcp(&py) {
        eprintln!("SKIP: cannot install the Python `mcp` package: {}", String::from_utf8_lossy(&pip.stderr));
        return None;
    }
    Some(py)
}

const PY_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            search = await session.call_tool("search", {"query": "wing", "k": 2})
            engines = await session.call_tool("list_engines", {})
            # Dump by alias: the wire (camelCase) names, whatever the package calls its fields.
            dump = lambda m: m.model_dump(mode="json", by_alias=True)
            tools, search, engines = dump(tools), dump(search), dump(engines)
            print(json.dumps({
                "tools": [t["name"] for t in tools["tools"]],
                "schema": tools["tools"][0]["inputSchema"],
                "structured": search["structuredContent"],
                "text": search["content"][0]["text"],
                "engines": engines["structuredContent"],
            }))

asyncio.run(main())
"#;

#[test]
fn the_python_mcp_client_drives_the_bridge() {
    let Some(py) = python_with_mcp() else {
        eprintln!("SKIP the_python_mcp_client_drives_the_bridge: Python 3 with the `mcp` package is not available");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let reg =
        write_registry(dir.path(), "rcp.json", vec![fixture("a", &["--doc", "a1:wing lift", "--doc", "a2:wing tip"])]);
    let script = dir.path().join("client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    let out = Command::new(&py)
        .arg(&script)
        .arg(gateway_bin())
        .args(["mcp", "--registry"])
        .arg(&reg)
        .output()
        .expect("run the Python client");
    assert!(out.status.success(), "python client failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("python printed JSON");
    assert_eq!(v["tools"], json!(["search", "list_engines", "fetch"]));
    assert_eq!(v["schema"]["required"], json!(["query"]));
    let hits = v["structured"]["hits"].as_array().expect("structured hits");
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0]["engine"], "a");
    assert!(v["text"].as_str().unwrap().contains("a1"));
    assert_eq!(v["engines"]["engines"][0]["id"], "a");
}
