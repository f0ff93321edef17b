//! `Federation` beyond `retrieve`: the same core as rcp-gateway (§16.4) — the union of the
//! engines' capabilities with provenance, calls routed to one engine by priority or
//! `_meta.engine` (and failing over when it dies), and namespaced ids for distinct corpora.

use std::path::PathBuf;

use rcp_client::{Federation, Registry};
use rcp_wire::RetrieveParams;
use rcp_wire::embed::EmbedParams;
use serde_json::{Value, json};

fn fixture() -> String {
    let exe = std::env::current_exe().expect("test exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("fixture_engine");
    assert!(bin.exists(), "{} not built (cargo test builds examples)", bin.display());
    bin.to_string_lossy().into_owned()
}

fn entry(id: &str, priority: i64, args: &[&str]) -> Value {
    let mut command = vec![fixture()];
    command.extend(args.iter().map(|s| (*s).to_owned()));
    json!({"id": id, "command": command, "priority": priority})
}

fn federation(doc: Value) -> Federation {
    Federation::new(Registry::parse(&doc.to_string(), None).expect("registry"), Default::default())
}

fn embed_params(text: &str, meta: Option<Value>) -> EmbedParams {
    serde_json::from_value(json!({"inputs": [text], "_meta": meta.unwrap_or(json!({}))})).expect("params")
}

#[tokio::test]
async fn the_union_and_routed_calls_follow_the_core_rules() {
    let dead: PathBuf = "/nonexistent/engine".into();
    let fed = federation(json!({"engines": [
        entry("docs", 1, &["--name", "docs", "--doc", "a:wing lift"]),
        entry("vectors", 5, &["--name", "vectors", "--embed-only"]),
        {"id": "dead", "command": [dead], "priority": 9},
    ]}));
    let union = fed.capabilities().await;
    assert!(union.capabilities.retrieve.is_some() && union.capabilities.embed.is_some());
    assert_eq!(union.provenance["embed"], ["docs", "vectors"]);
    assert_eq!(union.provenance["retrieve"], ["docs"]);

    // By priority: the dead engine never answered, so the embedder of priority 5 serves.
    let served = fed.embed(embed_params("abc", None)).await.expect("embed");
    assert_eq!((served.index, served.answer.clone()), (1, vec![vec![3.0, 1.0]]));
    assert!(served.notes.iter().any(|n| n == "served by engine 'vectors'"), "{:?}", served.notes);
    // An explicit engine is obeyed; one that cannot serve the call is refused with the reason.
    let served = fed.embed(embed_params("ab", Some(json!({"engine": "docs"})))).await.expect("embed");
    assert_eq!(served.index, 0);
    let err = fed.embed(embed_params("ab", Some(json!({"engine": "dead"})))).await.unwrap_err();
    assert!(err.to_string().contains("engine 'dead'") || err.to_string().contains("no engine 'dead'"), "{err}");
}

#[tokio::test]
async fn distinct_corpora_are_namespaced_in_the_fused_list() {
    let fed = federation(json!({"corpora": "distinct", "engines": [
        entry("one", 0, &["--name", "one", "--doc", "rust-3:tantivy search"]),
        entry("two", 0, &["--name", "two", "--doc", "rust-3:tokio search"]),
    ]}));
    let params: RetrieveParams = serde_json::from_value(json!({"query": "search", "k": 5})).expect("params");
    let out = fed.retrieve(params).await.expect("retrieve");
    let mut ids: Vec<String> = out.result.hits.iter().map(|h| h.key()).collect();
    ids.sort();
    assert_eq!(ids, ["one:rust-3", "two:rust-3"]);
}
