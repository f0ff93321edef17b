//! `graph` (§7.9) through the real binary: every op's result (each frame is validated against
//! the schema by the testkit), persistence across restarts, damage, updates after
//! `index/add` / `index/delete`, and bad input.

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::serve;
use rcp_testkit::code;
use serde_json::{Value, json};

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x[key].as_str().unwrap().to_owned()).collect()
}

fn without_usage(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("usage");
    v
}

fn dir_arg(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

#[test]
fn each_op_answers_in_its_shape_and_bad_input_is_refused() {
    // One engine for the whole test: the built-in corpus is embedded at every start.
    let mut e = serve(&["--graph"]);
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    assert_eq!(caps["graph"]["ops"], json!(["local", "global", "drift", "communities", "neighbors"]));
    // neighbors: the seed first with score 1, weighted edges among the returned nodes.
    let r = e.ok("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"], "k": 5}));
    let nodes = strings(&r["nodes"], "id");
    assert_eq!(nodes[0], "bm25-1");
    assert_eq!(r["nodes"][0]["score"], 1.0);
    assert!(nodes.len() > 1 && nodes.len() <= 5);
    let kept: HashSet<&String> = nodes.iter().collect();
    let edges = r["edges"].as_array().unwrap();
    assert!(!edges.is_empty());
    for edge in edges {
        assert!(kept.contains(&edge["src"].as_str().unwrap().to_owned()));
        assert!(kept.contains(&edge["dst"].as_str().unwrap().to_owned()));
        let w = edge["weight"].as_f64().unwrap();
        assert!(w > 0.0 && w <= 1.0 + 1e-6);
    }
    // Two hops reach at least as far as one.
    let two = e.ok("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"], "k": 30, "hops": 2}));
    let one = e.ok("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"], "k": 30, "hops": 1}));
    assert!(two["nodes"].as_array().unwrap().len() > one["nodes"].as_array().unwrap().len());

    // local: PPR hits from the query's nearest documents, with provenance from a seed.
    let r = e.ok("graph", json!({"op": "local", "query": "ranking documents by term frequency", "k": 5}));
    let hits = r["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 5);
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    for h in hits {
        assert_eq!(h["unit"], "node");
        let nodes: Vec<&str> =
            h["provenance"]["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert_eq!(nodes.last().copied(), h["id"].as_str(), "the path ends at the hit");
        assert_eq!(h["provenance"]["edges"].as_array().unwrap().len(), nodes.len() - 1);
        assert!(h["text"].is_string());
    }
    assert!(strings(&r["hits"], "id").iter().any(|id| id.starts_with("bm25")), "{r}");

    // communities: level 0 by default, every document in exactly one of them.
    let r = e.ok("graph", json!({"op": "communities", "k": 100}));
    let list = r["communities"].as_array().unwrap();
    assert!(list.len() >= 2, "{r}");
    let mut total = 0;
    for c in list {
        assert_eq!(c["level"], 0);
        let s = c["summary"].as_str().unwrap();
        assert!(s.contains("Key terms:") && s.contains("Representative:"), "{s}");
        total += s.split(' ').next().unwrap().parse::<usize>().unwrap();
    }
    assert_eq!(total, 30, "the built-in corpus has 30 documents");

    // global: communities ranked against the query, an extractive summary.
    let r = e.ok("graph", json!({"op": "global", "query": "protocols for language servers and tools", "k": 3}));
    let list = r["communities"].as_array().unwrap();
    assert!(!list.is_empty() && list.len() <= 3);
    let s: Vec<f64> = list.iter().map(|c| c["score"].as_f64().unwrap()).collect();
    assert!(s.windows(2).all(|w| w[0] >= w[1]));
    assert!(r["summary"].as_str().unwrap().contains(list[0]["id"].as_str().unwrap()));

    // drift: hits and follow-up queries made of words that are not the query's.
    let r = e.ok("graph", json!({"op": "drift", "query": "dense retrieval", "k": 5}));
    assert_eq!(r["hits"].as_array().unwrap().len(), 5);
    let followups = r["followups"].as_array().unwrap();
    assert!(!followups.is_empty());
    for f in followups {
        let f = f.as_str().unwrap();
        assert!(!f.split(' ').any(|w| w == "dense" || w == "retrieval"), "{f}");
    }
    bad_input_is_refused_precisely(&mut e);
}

fn bad_input_is_refused_precisely(e: &mut rcp_testkit::Engine) {
    let err = e.err("graph", json!({"op": "pathfinding", "query": "x"}));
    assert_eq!(code(&err), -32005);
    assert_eq!(err["data"]["option"], "op");
    let err = e.err("graph", json!({"op": "local", "seedIds": ["bm25-1", "no-such-doc"]}));
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "seedIds[1]");
    assert!(err["message"].as_str().unwrap().contains("no-such-doc") || err.to_string().contains("no-such-doc"));
    let err = e.err("graph", json!({"op": "local"}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("query")));
    let err = e.err("graph", json!({"op": "global", "seedIds": ["bm25-1"]}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("query")));
    let err = e.err("graph", json!({"op": "communities", "level": 99}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("level")));
    let err = e.err("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"], "hops": 0}));
    assert_eq!(code(&err), -32602);
    let err = e.err("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"], "k": 0}));
    assert_eq!(code(&err), -32602);
    // The server keeps serving.
    assert!(!e.ok("graph", json!({"op": "neighbors", "seedIds": ["bm25-1"]}))["nodes"].as_array().unwrap().is_empty());
}

#[test]
fn writes_update_the_graph_and_it_persists_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_arg(tmp.path());
    let args = ["--data-dir", dir, "--create", "--graph"];
    let before;
    {
        let mut e = serve(&args);
        e.ok("index/add", json!({"documents": common::topical_documents()}));
        let r = e.ok("graph", json!({"op": "neighbors", "seedIds": ["heat-0"], "k": 4}));
        let nodes = strings(&r["nodes"], "id");
        assert!(nodes[1..].iter().all(|n| n.starts_with("heat")), "{nodes:?}");
        // A new document joins the graph next to its topic.
        e.ok("index/add", json!({"documents": [{"id": "cook-9", "text": "Kneading bread dough and baking loaves."}]}));
        let r = e.ok("graph", json!({"op": "neighbors", "seedIds": ["cook-9"], "k": 3}));
        assert!(strings(&r["nodes"], "id")[1..].iter().all(|n| n.starts_with("cook")), "{r}");
        // A deleted one leaves it, and no edge names it.
        assert_eq!(e.ok("index/delete", json!({"ids": ["heat-1"]}))["deleted"], 1);
        let r = e.ok("graph", json!({"op": "neighbors", "seedIds": ["heat-0"], "k": 20, "hops": 2}));
        assert!(!r.to_string().contains("heat-1"), "{r}");
        let err = e.err("graph", json!({"op": "local", "seedIds": ["heat-1"]}));
        assert_eq!(err["data"]["field"], "seedIds[0]");
        // Communities follow the write: the three topics and the new document.
        let r = e.ok("graph", json!({"op": "communities", "k": 50}));
        let total: usize = r["communities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["summary"].as_str().unwrap().split(' ').next().unwrap().parse::<usize>().unwrap())
            .sum();
        assert_eq!(total, 12);
        before = without_usage(e.ok("graph", json!({"op": "neighbors", "seedIds": ["wing-0"], "k": 6, "hops": 2})));
    }
    let file = tmp.path().join("docgraph.rcpg");
    assert!(file.is_file());
    {
        let mut e = serve(&args);
        let again = e.ok("graph", json!({"op": "neighbors", "seedIds": ["wing-0"], "k": 6, "hops": 2}));
        assert_eq!(without_usage(again), before, "the saved graph is served as it was");
    }
    // Damage: the graph is rebuilt from the stored vectors, never served in part.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xFF;
    std::fs::write(&file, &bytes).unwrap();
    {
        let mut e = serve(&args);
        let after = e.ok("graph", json!({"op": "neighbors", "seedIds": ["wing-0"], "k": 4}));
        assert_eq!(after["nodes"].as_array().unwrap().len(), 4);
        assert!(strings(&after["nodes"], "id").iter().all(|n| n.starts_with("wing")), "{after}");
    }
    assert_ne!(std::fs::read(&file).unwrap(), bytes, "the rebuilt graph was saved");
    // Without --graph the capability is not advertised (and the file is left alone); writes
    // made meanwhile are reconciled on the next start with --graph.
    {
        let mut e = serve(&["--data-dir", dir]);
        assert!(e.ok("info", json!({}))["capabilities"].get("graph").is_none());
        assert_eq!(code(&e.err("graph", json!({"op": "local", "query": "wing"}))), -32003);
        e.ok("index/delete", json!({"ids": ["wing-1"]}));
    }
    let mut e = serve(&args);
    let r = e.ok("graph", json!({"op": "neighbors", "seedIds": ["wing-0"], "k": 20, "hops": 3}));
    assert!(!r.to_string().contains("wing-1"), "{r}");
}
