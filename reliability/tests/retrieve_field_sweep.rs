//! No request field is silently ignored (issue 41): each optional `retrieve` field of §7.7 is
//! sent, alone and under the default `strict`, to each bundled engine in its default serving
//! mode. Every answer is one of:
//!
//! - refused: `-32005` (an option the engine does not offer), `-32602` (a value it cannot
//!   take) or `-32015` (a cursor or snapshot it does not know);
//! - noted: served, with a `usage.notes` entry naming the field;
//! - honoured: served, and the engine's `initialize` advertises what honours the field (a
//!   capability flag or value, `x-rcp-honours`, or the framework, which honours `candidateK`,
//!   `minScore` and `includeText` for every engine). `includeText: false` and
//!   `includeVectors: true` are checked on the hits too.

use std::process::Command;

use rcp_testkit::pg::PgCluster;
use rcp_testkit::{Engine, workspace_bin};
use rcp_wire::Capabilities;
use serde_json::{Value, json};

/// The `retrieve` capability key listing the params an engine honours beyond the spec's flags
/// (`rcp_server::Honours::KEY`).
const HONOURS: &str = "x-rcp-honours";

/// Each optional field with the value sent; `None` values are filled from a first answer.
fn fields(caps: &Capabilities, first: &Value) -> Vec<(&'static str, Value)> {
    let transform = caps.transform.as_ref().and_then(|t| t.methods.first().cloned()).unwrap_or_else(|| "hyde".into());
    let field = caps.filter.as_ref().and_then(|f| f.fields.names().first().map(|n| (*n).to_owned()));
    vec![
        ("mode", json!("dense")),
        ("mode", json!("sparse")),
        ("mode", json!("hybrid")),
        ("modality", json!("image")),
        ("candidateK", json!(50)),
        ("fusion", json!({"method": "rrf"})),
        ("rerank", json!({"method": "cross-encoder", "topN": 10})),
        ("mmr", json!({"lambda": 0.5})),
        ("rewrite", json!(transform)),
        ("filter", json!({"field": field.unwrap_or_else(|| "year".into()), "op": "exists", "value": true})),
        ("minScore", json!(0.0)),
        ("recency", json!({"field": "published", "halfLifeDays": 30})),
        ("unit", json!("chunk")),
        ("level", json!(1)),
        ("tokenBudget", json!(200)),
        ("sessionId", json!("sweep-session")),
        ("includeText", json!(false)),
        ("includeVectors", json!(true)),
        ("encoding", json!("f32-base64")),
        ("seed", json!(7)),
        ("indexVersion", first.get("indexVersion").cloned().unwrap_or(json!("0"))),
        ("cursor", first.get("nextCursor").cloned().unwrap_or(json!("opaque"))),
    ]
}

/// Whether `caps` advertise what honours `field` sent as `value`.
fn advertised(caps: &Capabilities, field: &str, value: &Value) -> bool {
    let Some(rc) = caps.retrieve.as_ref() else { return false };
    let honours =
        |name: &str| rc.extra.get(HONOURS).and_then(Value::as_array).is_some_and(|a| a.iter().any(|n| n == name));
    let s = value.as_str().unwrap_or_default();
    match field {
        "mode" => rc.modes.as_ref().is_some_and(|m| m.iter().any(|m| m.as_str() == s)),
        "modality" => rc.modalities().iter().any(|m| m == s),
        "candidateK" | "minScore" | "includeText" => true,
        "fusion" => rc.fusion.as_ref().is_some_and(|f| f.iter().any(|m| *m == value["method"])),
        "rerank" => rc.offers_rerank(),
        "mmr" => rc.offers_mmr(),
        "rewrite" => caps.transform.as_ref().is_some_and(|t| t.methods.iter().any(|m| m == s)),
        "filter" => caps.filter.is_some(),
        "recency" | "includeVectors" => honours(field),
        "unit" => rc.units().iter().any(|u| u == s),
        "level" => value.as_u64().is_some_and(|l| l < u64::from(rc.level_count())),
        "tokenBudget" => rc.offers_token_budget(),
        "sessionId" => caps.session.is_some(),
        "seed" => rc.offers_determinism(),
        "indexVersion" => rc.offers_snapshots(),
        "cursor" => caps.pagination.is_some(),
        _ => false,
    }
}

/// Sends every field to `engine`; the fields that were neither refused, noted nor advertised.
fn sweep(name: &str, engine: &mut Engine, init: &Value) -> Vec<String> {
    let caps: Capabilities = serde_json::from_value(init["capabilities"].clone()).expect("capabilities");
    let query = "wing lift";
    let first = engine.ok("retrieve", json!({"query": query, "k": 3}));
    let mut silent = Vec::new();
    for (field, value) in fields(&caps, &first) {
        let mut params = json!({"query": query, "k": 3});
        params[field] = value.clone();
        let answer = engine.call("retrieve", params);
        let outcome = if let Some(e) = answer.get("error") {
            let code = e["code"].as_i64().unwrap_or_default();
            assert!([-32005, -32602, -32015].contains(&code), "{name}: {field}={value}: refused with {e}");
            "refused".to_owned()
        } else {
            let result = &answer["result"];
            let notes = result["usage"]["notes"].to_string();
            let hits = result["hits"].as_array().cloned().unwrap_or_default();
            if field == "includeText" {
                assert!(hits.iter().all(|h| h.get("text").is_none()), "{name}: includeText:false kept text: {result}");
            }
            if notes.contains(field) {
                "noted".to_owned()
            } else if advertised(&caps, field, &value) {
                if field == "includeVectors" {
                    assert!(hits.iter().all(|h| h["vector"].is_array()), "{name}: includeVectors without vectors");
                }
                "honoured".to_owned()
            } else {
                silent.push(format!("{field}={value}: {result}"));
                "SILENT".to_owned()
            }
        };
        eprintln!("{name:<10} {field:<14} {value:<40} {outcome}");
    }
    silent
}

fn dense_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["serve", "--fetch-model", "--field", "published:date"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn every_optional_retrieve_field_is_honoured_noted_or_refused_by_every_engine() {
    let mut silent = Vec::new();
    let bm25 = workspace_bin("rcp-bm25", "rcp-bm25");
    let mut e = Engine::spawn(&bm25, &["serve", "--field", "published:date", "--field", "year:int"]);
    let init = e.initialize();
    silent.extend(sweep("rcp-bm25", &mut e, &init));
    drop(e);

    let dense = workspace_bin("rcp-dense", "rcp-dense");
    let mut e = Engine::spawn(&dense, &dense_args(&[]));
    let init = e.initialize();
    silent.extend(sweep("rcp-dense", &mut e, &init));
    drop(e);

    match PgCluster::shared() {
        Ok(cluster) => {
            let url = cluster.create_database("sweep").expect("database");
            let pg = workspace_bin("rcp-pg", "rcp-pg");
            let mut e = Engine::spawn(
                &pg,
                &["serve", "--fetch-model", "--database-url", &url, "--field", "published:date", "--field", "year:int"],
            );
            let init = e.initialize();
            e.ok(
                "index/add",
                json!({"documents": [
                    {"id": "a", "text": "wing lift in a slipstream", "meta": {"published": "2026-01-01", "year": 2026}},
                    {"id": "b", "text": "lift of a thin wing", "meta": {"published": "1990-01-01", "year": 1990}},
                    {"id": "c", "text": "wing flutter", "meta": {"year": 2000}}
                ]}),
            );
            silent.extend(sweep("rcp-pg", &mut e, &init));
        }
        Err(e) if Command::new("python3").arg("--version").output().is_err() => {
            eprintln!("SKIP rcp-pg: PostgreSQL cannot be provisioned without python3 ({e})");
        }
        Err(e) => panic!("PostgreSQL could not be started: {e}"),
    }
    assert!(silent.is_empty(), "accepted without a note and not advertised:\n{}", silent.join("\n"));
}
