//! The MCP bridge: a gateway (a registry, or one engine) exposed as MCP tools over stdio, built
//! on the official Rust MCP SDK (`rmcp`), so assistants that speak MCP can search RCP engines.
//!
//! Tools:
//! - `search` — `query`, `k`, optional `engine` (a collection), `filter` (an RCP filter tree,
//!   §8) and `where` (field equalities; its properties are the federation's filter fields, so
//!   the input schema follows what the engines advertise). Returns the hits (id, title,
//!   snippet, score, origin) as text and as structured content.
//! - `list_engines` — the gateway's `catalog/list` (§7.13).
//! - `fetch` — one document's full text by id. RCP has no get-by-id method, so the bridge
//!   answers from the hits its recent searches returned (kept in full, most recent 1,000), and
//!   otherwise searches for the id itself (`retrieve` with the id as query) and returns the hit
//!   whose id matches exactly.
//!
//! And one tool per capability the federation advertises beyond retrieval (module `tools`), each
//! listed only when some engine advertises it, its schema and description built from what the
//! engines advertise and which engines provide it (the gateway's union and its provenance):
//! - `rerank` — `query`, `passages`, optional `method` (an advertised one), `topN`, `model`:
//!   the scores, one per passage, and the order, best first.
//! - `graph` — `op` (an advertised op), `query`, `seedIds`, `k`, `hops`, `level`: what the op
//!   returns (hits, nodes and edges, communities, a summary, follow-up questions), merged over
//!   the engines with the op.
//! - `memory_recall` — `query`, optional `memoryId`, `n`: clues and draft hits.
//! - `feedback` — `signals` (`hitId` with `used`, `cited`, `helpful`, `reward`,
//!   `poisonSuspected`, `injectionSuspected`), optional `query`: how many were accepted, by
//!   which engine, and the hits not routed.
//!
//! Every tool runs through the bridge's own RCP session on the gateway (module `session`):
//! `search` and `fetch` send a `retrieve`, `list_engines` a `catalog/list`, the others their
//! method, and the gateway's handlers answer after the framework's rules (`k` clamped to `maxK`
//! with a note, the filter checked against what the engines advertise, the funnel's defaults,
//! the result's finishing), as for an RCP client; the bridge restates none of them. Hits of
//! `graph` and `memory_recall` are kept for `fetch` like those of `search`, and every hit the
//! bridge relays is in the gateway's origin ledger, so `feedback` reaches the engine that
//! returned it.
//!
//! Over stdio ([`Bridge::serve_ndjson`]) frames are read by [`frames`]: bounded lines, and
//! malformed ones answered `-32700` / `-32600` / `-32602` as JSON-RPC 2.0 requires. A tool
//! whose engines fail says why (the cause rcp-client reports: the spawn error, the exit
//! status, the engine's last stderr lines), not only "backend unavailable".

pub mod frames;
mod session;
mod tools;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rcp_wire::catalog::CatalogListResult;
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::{Hit, RcpError, RetrieveResult};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext as McpContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::gateway::{Gateway, META_COLLECTIONS};

/// How many full hits `fetch` can answer from.
const CACHE: usize = 1000;
/// Longest snippet of a hit's text in `search` results, in characters.
const SNIPPET: usize = 300;
/// `search`'s `k` when the caller gives none.
const DEFAULT_K: u64 = 5;
/// The `k` of the `retrieve` `fetch` sends for an id it does not remember.
const FETCH_K: u64 = 10;
/// How long the bridge keeps writing queued frames after its input ends.
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// An MCP server whose tools query a [`Gateway`].
#[derive(Clone)]
pub struct Bridge {
    gateway: Arc<Gateway>,
    recent: Arc<Mutex<Recent>>,
    /// The RCP session on the gateway every tool calls through, opened on first use.
    session: Arc<tokio::sync::OnceCell<session::Session>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    hits: HashMap<String, Hit>,
}

impl Recent {
    fn remember(&mut self, hit: &Hit) {
        let key = hit.key();
        if self.hits.insert(key.clone(), hit.clone()).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > CACHE {
            if let Some(old) = self.order.pop_front() {
                self.hits.remove(&old);
            }
        }
    }
}

impl Bridge {
    /// A bridge over `gateway`.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self { gateway, recent: Arc::default(), session: Arc::default() }
    }

    /// Sends one RCP request through the bridge's session on the gateway; its result as `T`.
    async fn rcp<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, RcpError> {
        let session = self.session.get_or_try_init(|| session::Session::open(&self.gateway)).await?;
        let result = session.call(method, params).await?;
        serde_json::from_value(result).map_err(|e| RcpError::internal(format!("the gateway's '{method}' result: {e}")))
    }

    /// Keeps `hits` for `fetch`.
    fn remember(&self, hits: &[Hit]) {
        if let Ok(mut recent) = self.recent.lock() {
            hits.iter().for_each(|h| recent.remember(h));
        }
    }

    /// The names of the tools offered, in the order [`Bridge::tools`] lists them.
    pub fn tool_names(&self) -> Vec<&'static str> {
        let mut names = vec!["search", "list_engines", "fetch"];
        names.extend(tools::offered(self.gateway.union()));
        names
    }

    /// Serves MCP over NDJSON on `input` and `output` (stdin and stdout for `rcp-gateway
    /// mcp`) until the input ends, with the frame checks and bounds of [`frames`]; then writes
    /// what is still queued (for at most [`DRAIN`]).
    pub async fn serve_ndjson<R, W>(self, input: R, output: W, limits: frames::FrameLimits) -> std::io::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (transport, pump) = frames::transport(input, output, limits);
        let served = match self.serve(transport).await {
            Ok(running) => running.waiting().await.map(drop).map_err(std::io::Error::other),
            Err(e) => Err(std::io::Error::other(e)),
        };
        let drained = tokio::time::timeout(DRAIN, pump.finish())
            .await
            .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "stdout not drained")));
        served.and(drained)
    }

    /// The tools, with input schemas derived from what the engines advertise: the federation's
    /// filter fields for `search`, and one tool per capability beyond retrieval.
    pub fn tools(&self) -> Vec<Tool> {
        let fed = self.gateway.federated();
        let max_k = fed.and_then(|f| f.retrieve.max_k).unwrap_or(100).max(1);
        let collections: Vec<&str> = self.gateway.collections();
        let filter = fed.and_then(|f| f.filter.as_ref());
        let mut search = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
                "k": {"type": "integer", "minimum": 1, "maximum": max_k, "default": DEFAULT_K,
                      "description": "How many hits to return."},
                "engine": {"type": "string", "enum": collections,
                           "description": "Search only this engine (collection); all of them by default."},
            },
            "required": ["query"],
        });
        if let Some(f) = filter {
            search["properties"]["where"] = where_schema(f);
            search["properties"]["filter"] = json!({
                "type": "object",
                "description": format!(
                    "An RCP metadata filter (§8): a leaf {{\"field\",\"op\",\"value\"}} or {{\"and\"|\"or\":[...]}} / {{\"not\":{{...}}}}. Fields: {}. Operators: {}.",
                    describe_fields(f), f.advertised_operators().join(", ")),
            });
        }
        let list = json!({"type": "object", "properties": {}});
        let fetch = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The id of a hit returned by search, graph or memory_recall."},
                "engine": {"type": "string", "enum": collections, "description": "The engine the id came from."},
            },
            "required": ["id"],
        });
        let read_only = ToolAnnotations::default().read_only(true);
        let mut all = vec![
            Tool::new("search", "Search the connected retrieval engines (RCP) and return ranked hits with ids, titles, snippets, scores and the engine each came from.", object(search))
                .with_annotations(read_only.clone()),
            Tool::new("list_engines", "List the retrieval engines behind this bridge, with their identity and capabilities.", object(list))
                .with_annotations(read_only.clone()),
            Tool::new("fetch", "Return the full text of a document by the id a search, graph or memory_recall returned.", object(fetch))
                .with_annotations(read_only),
        ];
        all.extend(tools::tools(self.gateway.union()));
        all
    }

    /// Runs a tool; protocol-level problems (unknown tool, bad arguments) are MCP errors, engine
    /// failures are tool results with `isError`.
    pub async fn call(&self, name: &str, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        match name {
            "search" => Ok(self.search(&args).await.unwrap_or_else(tool_error)),
            "list_engines" => Ok(self.list_engines().await.unwrap_or_else(tool_error)),
            "fetch" => Ok(self.fetch(&args).await.unwrap_or_else(tool_error)),
            other if tools::offered(self.gateway.union()).contains(&other) => {
                Ok(self.capability_tool(other, &args).await.unwrap_or_else(tool_error))
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool '{other}'; tools: {}", self.tool_names().join(", ")),
                None,
            )),
        }
    }

    /// A `retrieve` of `query` (at most `k` hits, `DEFAULT_K` by default), in the collection
    /// `engine` when given (`_meta.collections`), filtered by `filter` and `where`.
    async fn search(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let mut p = picked(args, &["query", "k"]);
        if p.get("k").is_none() {
            p["k"] = json!(DEFAULT_K);
        }
        if let Some(filter) = build_filter(args)? {
            p["filter"] = filter;
        }
        if let Some(engine) = args.get("engine").filter(|e| !e.is_null()) {
            p["_meta"] = json!({META_COLLECTIONS: [engine]});
        }
        let result: RetrieveResult = self.rcp("retrieve", p).await?;
        self.remember(&result.hits);
        let (mut lines, hits) = listed(&result.hits);
        let notes = result.usage.map(|u| u.notes).unwrap_or_default();
        if lines.is_empty() {
            lines.push("No hits.".into());
        }
        if !notes.is_empty() {
            lines.push(format!("Notes: {}", notes.join("; ")));
        }
        Ok(with_structured(lines.join("\n"), json!({"hits": hits, "notes": notes})))
    }

    async fn list_engines(&self) -> Result<CallToolResult, RcpError> {
        let list: CatalogListResult = self.rcp("catalog/list", json!({})).await?;
        let mut lines = Vec::new();
        for e in &list.engines {
            let mut keys: Vec<String> = serde_json::to_value(&e.capabilities)
                .ok()
                .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect()))
                .unwrap_or_default();
            keys.sort();
            lines.push(format!(
                "{} — {} {} ({})",
                e.id,
                e.server.name,
                e.server.version.as_deref().unwrap_or("?"),
                keys.join(", ")
            ));
        }
        if let Some(unavailable) = list.meta.as_ref().and_then(|m| m.get("unavailable")).and_then(Value::as_array)
            && !unavailable.is_empty()
        {
            lines.push(format!(
                "Unavailable: {}",
                unavailable.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
            ));
        }
        let structured = serde_json::to_value(&list).map_err(|e| RcpError::internal(e.to_string()))?;
        Ok(with_structured(lines.join("\n"), structured))
    }

    /// A document's full text: a hit recently relayed with id `id` (from collection `engine`
    /// when given), or else the hit with exactly that id among those a `retrieve` of `id`
    /// returns.
    async fn fetch(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let id = args
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| RcpError::invalid_params("id", "a string is required"))?;
        let engine = args.get("engine").and_then(Value::as_str);
        let cached = self
            .recent
            .lock()
            .ok()
            .and_then(|r| r.hits.get(id).cloned())
            .filter(|h| engine.is_none_or(|e| origin(h).split('/').next() == Some(e)));
        let hit = match cached {
            Some(h) => Some(h),
            None => {
                let mut p = json!({"query": id, "k": FETCH_K});
                if let Some(e) = engine {
                    p["_meta"] = json!({META_COLLECTIONS: [e]});
                }
                let found: RetrieveResult = self.rcp("retrieve", p).await?;
                found.hits.into_iter().find(|h| h.key() == id)
            }
        };
        let Some(hit) = hit else {
            return Err(RcpError::not_found(format!(
                "document '{id}' (fetch answers ids returned by a recent search)"
            )));
        };
        let text = hit.text.clone().unwrap_or_default();
        let title = title(&hit);
        let body = format!("{}\n\n{text}", title.clone().unwrap_or_else(|| hit.key()));
        Ok(with_structured(
            body,
            json!({"id": hit.key(), "title": title, "text": text, "engine": origin(&hit), "meta": hit.meta}),
        ))
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rcp-gateway-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Search retrieval engines ({}) with `search`; `fetch` returns a hit's full text; `list_engines` describes the engines.{}",
                self.gateway.collections().join(", "),
                match tools::offered(self.gateway.union()).as_slice() {
                    [] => String::new(),
                    more => format!(" The engines also offer: {}.", more.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")),
                }
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: McpContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: McpContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(&request.name, request.arguments.unwrap_or_default()).await.map(CallToolResponse::from)
    }
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// The `where` property: one optional property per filter field, typed from the advertised
/// field types (§8).
fn where_schema(f: &FilterCapability) -> Value {
    let mut props = serde_json::Map::new();
    for name in f.fields.names() {
        let ty = match f.field_type(name).flatten() {
            Some(FieldType::Int) => json!({"type": "integer"}),
            Some(FieldType::Float) => json!({"type": "number"}),
            Some(FieldType::Bool) => json!({"type": "boolean"}),
            Some(FieldType::Keyword | FieldType::Text | FieldType::Date) => json!({"type": "string"}),
            _ => json!({}),
        };
        props.insert(name.to_owned(), ty);
    }
    json!({
        "type": "object",
        "properties": props,
        "additionalProperties": false,
        "description": "Only hits whose metadata field equals the value (all of them).",
    })
}

fn describe_fields(f: &FilterCapability) -> String {
    f.fields
        .names()
        .into_iter()
        .map(|n| match f.field_type(n).flatten() {
            Some(t) => format!("{n}:{}", t.as_str()),
            None => n.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The arguments named in `keys`, as RCP params (the framework checks their types).
fn picked(args: &JsonObject, keys: &[&str]) -> Value {
    let picked: serde_json::Map<String, Value> = keys
        .iter()
        .filter_map(|k| args.get(*k).filter(|v| !v.is_null()).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    Value::Object(picked)
}

/// `filter` and `where` combined into one RCP filter tree (`and` of both).
fn build_filter(args: &JsonObject) -> Result<Option<Value>, RcpError> {
    let mut parts = Vec::new();
    if let Some(f) = args.get("filter").filter(|f| !f.is_null()) {
        parts.push(f.clone());
    }
    match args.get("where") {
        None | Some(Value::Null) => {}
        Some(Value::Object(eqs)) => {
            for (field, value) in eqs {
                parts.push(json!({"field": field, "op": "eq", "value": value}));
            }
        }
        Some(other) => return Err(RcpError::invalid_params("where", format!("must be an object, got {other}"))),
    }
    Ok(match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(json!({"and": parts})),
    })
}

fn title(h: &Hit) -> Option<String> {
    h.citation
        .as_ref()
        .and_then(|c| c.title.clone())
        .or_else(|| h.meta.as_ref().and_then(|m| m.get("title")).and_then(Value::as_str).map(str::to_owned))
}

fn origin(h: &Hit) -> String {
    let meta = h.meta.as_ref();
    let engine = meta.and_then(|m| m.get("engine")).and_then(Value::as_str).unwrap_or("?");
    match meta.and_then(|m| m.get("shard")).and_then(Value::as_str) {
        Some(shard) if shard != engine => format!("{engine}/{shard}"),
        _ => engine.to_owned(),
    }
}

/// Hits as `search` lists them: a text line each, and `{id, title, snippet, score, engine}`.
fn listed(hits: &[Hit]) -> (Vec<String>, Vec<Value>) {
    let mut lines = Vec::new();
    let mut compact = Vec::new();
    for (rank, h) in hits.iter().enumerate() {
        let title = title(h);
        let origin = origin(h);
        let snippet = snippet(h);
        lines.push(format!(
            "{}. [{origin}] {} — {} (score {:.4})\n   {snippet}",
            rank + 1,
            h.key(),
            title.as_deref().unwrap_or("(untitled)"),
            h.score
        ));
        compact.push(json!({"id": h.key(), "title": title, "snippet": snippet, "score": h.score, "engine": origin}));
    }
    (lines, compact)
}

fn snippet(h: &Hit) -> String {
    snippet_of(h.text.as_deref().unwrap_or_default())
}

/// `text` on one line, cut to [`SNIPPET`] characters.
fn snippet_of(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= SNIPPET {
        return text;
    }
    let mut s: String = text.chars().take(SNIPPET).collect();
    s.push('…');
    s
}

fn with_structured(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

/// A tool result with `isError`: the RCP error's message, its cause (`error.data.detail`: for
/// an unavailable engine, why) unless the message already says it (as `-32602`'s does), and
/// its code.
fn tool_error(e: RcpError) -> CallToolResult {
    let text = match e.data.as_ref().and_then(|d| d.detail.as_deref()) {
        Some(detail) if !detail.is_empty() && !e.message.contains(detail) => {
            format!("{}: {detail} (RCP error {})", e.message, e.code.0)
        }
        _ => format!("{} (RCP error {})", e.message, e.code.0),
    };
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_and_filter_combine_into_one_tree() {
        let args = object(json!({"where": {"topic": "wing"}, "filter": {"field": "year", "op": "gte", "value": 2000}}));
        let f = build_filter(&args).unwrap().unwrap();
        assert_eq!(f["and"][1], json!({"field": "topic", "op": "eq", "value": "wing"}));
        assert_eq!(build_filter(&JsonObject::new()).unwrap(), None);
        assert!(build_filter(&object(json!({"where": 3}))).is_err());
    }

    #[test]
    fn picked_keeps_only_the_named_arguments() {
        let args = object(json!({"op": "local", "query": "q", "k": null, "engine": "x"}));
        assert_eq!(picked(&args, &["op", "query", "k"]), json!({"op": "local", "query": "q"}));
    }

    #[test]
    fn where_schema_types_follow_the_advertised_fields() {
        let cap = FilterCapability::typed([("year", FieldType::Int), ("topic", FieldType::Keyword)]);
        let s = where_schema(&cap);
        assert_eq!(s["properties"]["year"]["type"], "integer");
        assert_eq!(s["properties"]["topic"]["type"], "string");
        assert_eq!(describe_fields(&cap), "topic:keyword, year:int");
    }

    #[test]
    fn a_tool_error_says_why() {
        let r =
            tool_error(RcpError::backend_unavailable("every engine failed: engine 'a' failed: exited with status 3"));
        let text = r.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default();
        assert_eq!(
            text,
            "backend unavailable: every engine failed: engine 'a' failed: exited with status 3 (RCP error -32010)"
        );
        assert_eq!(r.is_error, Some(true));
        let r = tool_error(RcpError::invalid_params("k", "k must be an integer >= 1"));
        let text = r.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default();
        assert_eq!(text, "invalid params: k: k must be an integer >= 1 (RCP error -32602)", "the cause once");
    }

    #[test]
    fn snippets_are_cut_on_characters() {
        let h = Hit::new("x", 1.0).with_text("é".repeat(400));
        let s = snippet(&h);
        assert_eq!(s.chars().count(), SNIPPET + 1);
    }
}
