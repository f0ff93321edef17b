//! The MCP bridge: in-process with rmcp's own client over an in-memory duplex, and as a process
//! (`rcp-gateway mcp`) driven by the official Python `mcp` package, an independent client.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::*;
use rcp_gateway::mcp::Bridge;
use rcp_gateway::{Gateway, GatewayOptions, GatewayRegistry};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn args(v: Value) -> rmcp::model::JsonObject {
    v.as_object().cloned().unwrap_or_default()
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
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["search", "list_engines", "fetch"]);
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
