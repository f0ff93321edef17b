//! The tools of what the federation advertises beyond retrieval: `rerank`, `graph`,
//! `memory_recall` and `feedback`, each offered only when some engine advertises its capability
//! (the gateway's union, §16.4), with an input schema and a description built from what the
//! engines advertise (rerank methods and models, graph ops, memory scopes) and which engines
//! provide it (the union's provenance).
//!
//! Each call goes through the bridge's RCP session on the gateway ([`super::session`]), so the
//! gateway's own handlers answer it after the framework's rules, as for any RCP client. The
//! answer is rendered as text and returned whole as structured content; hits are listed as
//! `search` lists them (id, title, snippet, score, engine) and kept for `fetch`.

use rcp_client::federation::capabilities::Federated;
use rcp_wire::capabilities::RerankCapability;
use rcp_wire::feedback::FeedbackResult;
use rcp_wire::gating::default_rerank_method;
use rcp_wire::graph::GraphResult;
use rcp_wire::memory::MemoryRecallResult;
use rcp_wire::rerank::RerankResult;
use rcp_wire::{Hit, Meta, RcpError, RequestId, Usage};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::{Bridge, listed, object, picked, snippet_of, with_structured};

/// `rerank`: scores passages against a query.
pub(super) const RERANK: &str = "rerank";
/// `graph`: one op of the engines' graphs.
pub(super) const GRAPH: &str = "graph";
/// `memory_recall`: clues and hits from the engines' memories.
pub(super) const MEMORY_RECALL: &str = "memory_recall";
/// `feedback`: signals about hits, routed to the engines that returned them.
pub(super) const FEEDBACK: &str = "feedback";

/// What each op of §7.9 returns, for the `graph` tool's description.
const OPS: [(&str, &str); 5] = [
    ("local", "hits around the query's or the seeds' documents, expanded over the graph"),
    ("global", "a summary and the communities that answer the query"),
    ("drift", "hits and follow-up questions, reasoning outward from the query"),
    ("communities", "the graph's communities (id, level, summary)"),
    ("neighbors", "the nodes and edges within `hops` of the seeds"),
];

/// The names of the tools `union` offers, in the order they are listed.
pub(super) fn offered(union: &Federated) -> Vec<&'static str> {
    let caps = &union.capabilities;
    let mut names = Vec::new();
    if caps.rerank.is_some() {
        names.push(RERANK);
    }
    if caps.graph.is_some() {
        names.push(GRAPH);
    }
    if caps.memory.is_some() {
        names.push(MEMORY_RECALL);
    }
    if caps.feedback.is_some() {
        names.push(FEEDBACK);
    }
    names
}

/// The tools `union` offers, with their schemas.
pub(super) fn tools(union: &Federated) -> Vec<Tool> {
    let caps = &union.capabilities;
    let read_only = ToolAnnotations::default().read_only(true);
    let mut tools = Vec::new();
    if let Some(rc) = &caps.rerank {
        let (description, schema) = rerank_tool(rc, &engines(union, "rerank"));
        tools.push(Tool::new(RERANK, description, object(schema)).with_annotations(read_only.clone()));
    }
    if let Some(g) = &caps.graph {
        let (description, schema) = graph_tool(&g.ops, &engines(union, "graph"));
        tools.push(Tool::new(GRAPH, description, object(schema)).with_annotations(read_only.clone()));
    }
    if let Some(m) = &caps.memory {
        let scopes = if m.scopes.is_empty() { "none named".to_owned() } else { m.scopes.join(", ") };
        let description = format!(
            "Recall clues (surrogate queries, seed ids to start a `graph` op from, weights) and draft hits from the engines' memories (scopes: {scopes}; served by {}). Without memoryId every engine with memory recalls from its default memory and the clues are merged by weight.",
            engines(union, "memory")
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to recall clues for."},
                "memoryId": {"type": "string",
                             "description": "A memory built through this gateway (`<engine>:<id>`, as memory/build returned it); that engine alone answers."},
                "n": {"type": "integer", "minimum": 1, "description": "How many clues to return at most."},
            },
            "required": ["query"],
        });
        tools.push(Tool::new(MEMORY_RECALL, description, object(schema)).with_annotations(read_only));
    }
    if caps.feedback.is_some() {
        let description = format!(
            "Tell the engines how hits fared (used, cited, helpful, a reward in [-1, 1], suspected poisoning or injection). Each signal goes to the engine that returned the hit through this bridge (engines that record feedback: {}); hits it did not return are not routed. Returns how many signals were accepted.",
            engines(union, "feedback")
        );
        let flag = |what: &str| json!({"type": "boolean", "description": what});
        let schema = json!({
            "type": "object",
            "properties": {
                "signals": {
                    "type": "array",
                    "minItems": 1,
                    "description": "One signal per hit.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "hitId": {"type": "string", "description": "The id of a hit returned by search, graph or memory_recall."},
                            "used": flag("The hit was placed in the final context."),
                            "cited": flag("The hit was cited in the answer."),
                            "helpful": flag("The hit was relevant."),
                            "reward": {"type": "number", "minimum": -1, "maximum": 1, "description": "A scalar reward."},
                            "poisonSuspected": flag("The hit looks like corpus poisoning."),
                            "injectionSuspected": flag("The hit carries a suspected prompt injection."),
                        },
                        "required": ["hitId"],
                        "additionalProperties": false,
                    },
                },
                "query": {"type": "string", "description": "The query the hits answered."},
            },
            "required": ["signals"],
        });
        // Recording feedback changes what the engines may later rank, but destroys nothing.
        let annotations = ToolAnnotations::default().read_only(false).destructive(false).idempotent(false);
        tools.push(Tool::new(FEEDBACK, description, object(schema)).with_annotations(annotations));
    }
    tools
}

/// "engine 'a'" / "engines 'a', 'b'": who provides capability `key`.
fn engines(union: &Federated, key: &str) -> String {
    match union.provenance.get(key).map(Vec::as_slice) {
        None | Some([]) => "the gateway's engines".to_owned(),
        Some([one]) => format!("engine '{one}'"),
        Some(many) => format!("engines {}", many.iter().map(|e| format!("'{e}'")).collect::<Vec<_>>().join(", ")),
    }
}

fn rerank_tool(rc: &RerankCapability, engines: &str) -> (String, Value) {
    let default = default_rerank_method(rc).to_owned();
    let methods = if rc.methods.is_empty() { vec![default.clone()] } else { rc.methods.clone() };
    let limit = rc.max_candidates.map(|m| format!(", at most {m} passages a call")).unwrap_or_default();
    let description = format!(
        "Rerank passages against a query with the engines' rerank models (methods: {}; default {default}{limit}; served by {engines}). Returns one score per passage and the passages' order, best first.",
        methods.join(", ")
    );
    let mut passages = json!({"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "description": "The passages to score, in any order."});
    if let Some(max) = rc.max_candidates {
        passages["maxItems"] = json!(max);
    }
    let mut schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the passages should answer."},
            "passages": passages,
            "method": {"type": "string", "enum": methods, "default": default, "description": "The reranking method."},
            "topN": {"type": "integer", "minimum": 1, "description": "Return the order of the best N only."},
        },
        "required": ["query", "passages"],
    });
    if let Some(models) = rc.models.as_ref().filter(|m| !m.is_empty()) {
        schema["properties"]["model"] = json!({"type": "string", "enum": models, "description": "A specific model."});
    }
    (description, schema)
}

fn graph_tool(ops: &[String], engines: &str) -> (String, Value) {
    let described: Vec<String> = ops
        .iter()
        .map(|op| match OPS.iter().find(|(name, _)| name == op) {
            Some((_, what)) => format!("`{op}`: {what}"),
            None => format!("`{op}` (as the engines define it)"),
        })
        .collect();
    let description = format!(
        "Ask the engines' document graphs (served by {engines}); every engine with the op answers and the answers are merged. Ops: {}.",
        described.join("; ")
    );
    let mut schema = json!({
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ops, "description": "The graph operation."},
            "query": {"type": "string", "description": "The question (for local, global, drift)."},
            "seedIds": {"type": "array", "items": {"type": "string"},
                        "description": "Ids of hits (from search, graph or memory_recall) to start from."},
            "k": {"type": "integer", "minimum": 1, "description": "How many hits or nodes to return."},
            "hops": {"type": "integer", "minimum": 1, "description": "How far from the seeds to walk (neighbors)."},
        },
        "required": ["op"],
    });
    if ops.iter().any(|o| o == "communities" || o == "global") {
        schema["properties"]["level"] =
            json!({"type": "integer", "minimum": 0, "description": "The community level (0: the finest)."});
    }
    if let [only] = ops {
        schema["properties"]["op"]["default"] = json!(only);
    }
    (description, schema)
}

/// The notes of an answer: `usage.notes`, then `_meta.notes`.
fn notes(usage: Option<&Usage>, meta: Option<&Meta>) -> Vec<String> {
    let mut out: Vec<String> = usage.map(|u| u.notes.clone()).unwrap_or_default();
    let more = meta.and_then(|m| m.get("notes")).and_then(Value::as_array).into_iter().flatten();
    out.extend(more.filter_map(Value::as_str).map(str::to_owned));
    out
}

/// Engines that failed, from `_meta.degraded`.
fn degraded(meta: Option<&Meta>) -> Vec<String> {
    let list = meta.and_then(|m| m.get("degraded")).and_then(Value::as_array).into_iter().flatten();
    list.filter_map(Value::as_str).map(str::to_owned).collect()
}

/// `hits` with `meta.engine` set where the merge left it out: when one engine answered
/// (`_meta.engines` names one), every hit is that engine's.
fn attributed(hits: &[Hit], meta: Option<&Meta>) -> Vec<Hit> {
    let engines = meta.and_then(|m| m.get("engines")).and_then(Value::as_array);
    let only = match engines.map(Vec::as_slice) {
        Some([Value::String(one)]) => Some(one.clone()),
        _ => None,
    };
    hits.iter()
        .cloned()
        .map(|mut h| {
            if let Some(one) = &only {
                let m = h.meta.get_or_insert_with(Default::default);
                if !m.contains_key("engine") {
                    m.insert("engine".into(), json!(one));
                }
            }
            h
        })
        .collect()
}

fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::String(s) => s.clone(),
        RequestId::Number(n) => n.to_string(),
    }
}

fn push_notes(lines: &mut Vec<String>, notes: &[String], degraded: &[String]) {
    if !degraded.is_empty() {
        lines.push(format!("Engines that failed: {}", degraded.join(", ")));
    }
    if !notes.is_empty() {
        lines.push(format!("Notes: {}", notes.join("; ")));
    }
}

impl Bridge {
    /// Runs tool `name` (one of [`offered`]).
    pub(super) async fn capability_tool(&self, name: &str, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        match name {
            RERANK => self.rerank(args).await,
            GRAPH => self.graph(args).await,
            MEMORY_RECALL => self.memory_recall(args).await,
            FEEDBACK => self.feedback(args).await,
            other => Err(RcpError::internal(format!("no tool '{other}'"))),
        }
    }

    async fn rerank(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let p = picked(args, &["query", "passages", "method", "model", "topN"]);
        let result: RerankResult = self.rcp("rerank", p).await?;
        let passages: Vec<&str> = args
            .get("passages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| p.as_str().unwrap_or(""))
            .collect();
        let order = result.order.clone().unwrap_or_else(|| {
            let mut o: Vec<usize> = (0..result.scores.len()).collect();
            o.sort_by(|&a, &b| result.scores[b].total_cmp(&result.scores[a]));
            o
        });
        let method = match args.get("method").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => {
                default_rerank_method(&self.gateway.union().capabilities.rerank.clone().unwrap_or_default()).to_owned()
            }
        };
        let mut lines: Vec<String> = order
            .iter()
            .enumerate()
            .map(|(rank, &i)| {
                let score = result.scores.get(i).copied().unwrap_or(f64::NAN);
                let text = snippet_of(passages.get(i).copied().unwrap_or_default());
                format!("{}. passage {i} (score {score:.4}): {text}", rank + 1)
            })
            .collect();
        let notes = notes(result.usage.as_ref(), result.meta.as_ref());
        push_notes(&mut lines, &notes, &[]);
        Ok(with_structured(
            lines.join("\n"),
            json!({"scores": result.scores, "order": order, "method": method, "notes": notes}),
        ))
    }

    async fn graph(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let mut p = picked(args, &["op", "query", "seedIds", "k", "hops", "level"]);
        let ops = self.gateway.union().capabilities.graph.clone().map(|g| g.ops).unwrap_or_default();
        if p.get("op").is_none()
            && let [only] = ops.as_slice()
        {
            p["op"] = json!(only);
        }
        let op = p.get("op").and_then(Value::as_str).unwrap_or_default().to_owned();
        let r: GraphResult = self.rcp("graph", p).await?;
        let mut lines = Vec::new();
        let mut out = serde_json::Map::new();
        out.insert("op".into(), json!(op));
        if let Some(summary) = &r.summary {
            lines.push(format!("Summary: {summary}"));
            out.insert("summary".into(), json!(summary));
        }
        if let Some(hits) = &r.hits {
            let hits = attributed(hits, r.meta.as_ref());
            self.remember(&hits);
            let (hit_lines, compact) = listed(&hits);
            lines.extend(hit_lines);
            out.insert("hits".into(), json!(compact));
        }
        if let Some(nodes) = &r.nodes {
            let shown: Vec<String> = nodes
                .iter()
                .map(|n| match n.score {
                    Some(s) => format!("{} ({s:.4})", id_text(&n.id)),
                    None => id_text(&n.id),
                })
                .collect();
            lines.push(format!("Nodes ({}): {}", nodes.len(), shown.join(", ")));
            out.insert("nodes".into(), json!(nodes));
        }
        if let Some(edges) = &r.edges {
            let end = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let shown: Vec<String> = edges
                .iter()
                .map(|e| match e.weight {
                    Some(w) => format!("{} -> {} ({w:.4})", end(&e.src), end(&e.dst)),
                    None => format!("{} -> {}", end(&e.src), end(&e.dst)),
                })
                .collect();
            lines.push(format!("Edges ({}): {}", edges.len(), shown.join(", ")));
            out.insert("edges".into(), json!(edges));
        }
        if let Some(communities) = &r.communities {
            lines.push(format!("Communities ({}):", communities.len()));
            for c in communities {
                let mut about = Vec::new();
                if let Some(l) = c.level {
                    about.push(format!("level {l}"));
                }
                if let Some(s) = c.score {
                    about.push(format!("score {s:.4}"));
                }
                let about = if about.is_empty() { String::new() } else { format!(" ({})", about.join(", ")) };
                lines.push(format!("- {}{about}: {}", id_text(&c.id), c.summary.as_deref().unwrap_or("(no summary)")));
            }
            out.insert("communities".into(), json!(communities));
        }
        if let Some(followups) = &r.followups {
            lines.push("Follow-up questions:".into());
            lines.extend(followups.iter().map(|f| format!("- {f}")));
            out.insert("followups".into(), json!(followups));
        }
        if lines.is_empty() {
            lines.push("Nothing found.".into());
        }
        let notes = notes(r.usage.as_ref(), r.meta.as_ref());
        let degraded = degraded(r.meta.as_ref());
        push_notes(&mut lines, &notes, &degraded);
        out.insert("notes".into(), json!(notes));
        out.insert("degraded".into(), json!(degraded));
        Ok(with_structured(lines.join("\n"), Value::Object(out)))
    }

    async fn memory_recall(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let p = picked(args, &["query", "memoryId", "n"]);
        let r: MemoryRecallResult = self.rcp("memory/recall", p).await?;
        let mut lines = vec![format!("Clues ({}):", r.clues.len())];
        for (i, c) in r.clues.iter().enumerate() {
            let mut parts = Vec::new();
            if let Some(q) = &c.query {
                parts.push(format!("query \"{q}\""));
            }
            if let Some(seeds) = c.seed_ids.as_ref().filter(|s| !s.is_empty()) {
                parts.push(format!("seeds {}", seeds.join(", ")));
            }
            if let Some(w) = c.weight {
                parts.push(format!("weight {w:.4}"));
            }
            lines.push(format!("{}. {}", i + 1, parts.join(" · ")));
        }
        let hits = attributed(r.hits.as_deref().unwrap_or_default(), r.meta.as_ref());
        self.remember(&hits);
        let (hit_lines, compact) = listed(&hits);
        if !hit_lines.is_empty() {
            lines.push("Hits:".into());
            lines.extend(hit_lines);
        }
        let notes = notes(None, r.meta.as_ref());
        let degraded = degraded(r.meta.as_ref());
        push_notes(&mut lines, &notes, &degraded);
        Ok(with_structured(
            lines.join("\n"),
            json!({"clues": r.clues, "hits": compact, "notes": notes, "degraded": degraded}),
        ))
    }

    async fn feedback(&self, args: &JsonObject) -> Result<CallToolResult, RcpError> {
        let p = picked(args, &["signals", "query"]);
        let sent = p.get("signals").and_then(Value::as_array).map_or(0, Vec::len);
        let r: FeedbackResult = self.rcp("feedback", p).await?;
        let meta = r.meta.as_ref();
        let engines = meta.and_then(|m| m.get("engines")).cloned().unwrap_or_else(|| json!({}));
        let unrouted: Vec<String> = meta
            .and_then(|m| m.get("unrouted"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let mut lines = vec![format!("Accepted {} of {sent} signal(s).", r.accepted)];
        if let Some(by) = engines.as_object().filter(|o| !o.is_empty()) {
            let by: Vec<String> = by.iter().map(|(e, n)| format!("{e} {n}")).collect();
            lines.push(format!("Accepted by engine: {}", by.join(", ")));
        }
        if !unrouted.is_empty() {
            lines.push(format!(
                "Not routed (hits this bridge did not return, or no longer remembers): {}",
                unrouted.join(", ")
            ));
        }
        let notes = notes(None, meta);
        push_notes(&mut lines, &notes, &[]);
        Ok(with_structured(
            lines.join("\n"),
            json!({"accepted": r.accepted, "signals": sent, "engines": engines, "unrouted": unrouted, "notes": notes}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::capabilities::{Capabilities, GraphCapability, MemoryCapability};

    use super::*;

    fn union(caps: Capabilities, provenance: &[(&str, &[&str])]) -> Federated {
        let provenance =
            provenance.iter().map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect())).collect();
        Federated { capabilities: caps, provenance }
    }

    #[test]
    fn only_advertised_capabilities_are_tools() {
        assert!(offered(&Federated::default()).is_empty());
        let caps = Capabilities {
            graph: Some(GraphCapability { ops: vec!["neighbors".into(), "local".into()], ..Default::default() }),
            ..Default::default()
        };
        let u = union(caps, &[("graph", &["dense", "kg"])]);
        assert_eq!(offered(&u), [GRAPH]);
        let t = tools(&u);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].input_schema["properties"]["op"]["enum"], json!(["neighbors", "local"]));
        assert!(t[0].input_schema["properties"].get("level").is_none(), "no op takes a level");
        let d = t[0].description.as_deref().unwrap_or_default();
        assert!(d.contains("engines 'dense', 'kg'") && d.contains("`neighbors`: the nodes and edges"), "{d}");
    }

    #[test]
    fn schemas_follow_what_the_engines_advertise() {
        let caps = Capabilities {
            rerank: Some(RerankCapability {
                methods: vec!["colbert".into(), "cross-encoder".into()],
                max_candidates: Some(64),
                ..Default::default()
            }),
            memory: Some(MemoryCapability { scopes: vec!["global".into()], ..Default::default() }),
            feedback: Some(Default::default()),
            ..Default::default()
        };
        let u = union(caps, &[("rerank", &["rr"]), ("memory", &["dense"]), ("feedback", &["bm25", "dense"])]);
        assert_eq!(offered(&u), [RERANK, MEMORY_RECALL, FEEDBACK]);
        let t = tools(&u);
        let rerank = &t[0].input_schema["properties"];
        assert_eq!(rerank["method"]["enum"], json!(["colbert", "cross-encoder"]));
        assert_eq!(rerank["method"]["default"], "colbert");
        assert_eq!(rerank["passages"]["maxItems"], 64);
        assert!(t[0].description.as_deref().is_some_and(|d| d.contains("engine 'rr'")));
        assert!(t[1].description.as_deref().is_some_and(|d| d.contains("scopes: global")));
        let signal = &t[2].input_schema["properties"]["signals"]["items"];
        assert_eq!(signal["required"], json!(["hitId"]));
        assert_eq!(signal["properties"]["reward"]["minimum"], -1);
        assert!(t[2].description.as_deref().is_some_and(|d| d.contains("engines 'bm25', 'dense'")));
    }

    #[test]
    fn hits_of_one_engine_are_attributed_to_it() {
        let hits = vec![Hit::new("a", 1.0), Hit::new("b", 0.5).with_meta("engine", "kept")];
        let one: Meta = object(json!({"engines": ["dense"]}));
        let got = attributed(&hits, Some(&one));
        assert_eq!(got[0].meta.as_ref().and_then(|m| m.get("engine")), Some(&json!("dense")));
        assert_eq!(got[1].meta.as_ref().and_then(|m| m.get("engine")), Some(&json!("kept")));
        let two: Meta = object(json!({"engines": ["dense", "kg"]}));
        assert!(attributed(&hits, Some(&two))[0].meta.is_none(), "which of two is not known");
    }
}
