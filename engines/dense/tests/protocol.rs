//! `embed` and `retrieve` through the real binary over stdio, on the built-in corpus.

mod common;

use std::collections::HashSet;

use common::{floats, norm, serve};
use rcp_testkit::code;
use rcp_wire::vectors::decode_f32_base64;
use serde_json::{Value, json};

#[test]
fn capabilities_advertise_the_model_and_the_retrieval_options() {
    let mut e = serve(&[]);
    let caps = e.ok("info", json!({}))["capabilities"].clone();
    assert_eq!(caps["embed"]["dimension"], 384);
    assert_eq!(caps["embed"]["identity"], "sentence-transformers/all-MiniLM-L6-v2@onnx-int8");
    assert_eq!(caps["embed"]["normalized"], true);
    assert_eq!(caps["embed"]["encodings"], json!(["json", "f32-base64"]));
    let r = &caps["retrieve"];
    assert_eq!(r["modes"], json!(["dense"]));
    assert_eq!(r["scoreScale"], "cosine");
    assert_eq!(r["scoreFloor"], -1.0);
    assert_eq!(r["confidence"], true);
    assert_eq!(r["mmr"], true);
    assert_eq!(r["deterministic"], true);
    assert_eq!(caps["filter"]["fields"], json!({"topic": "keyword", "year": "int"}));
    assert!(caps["citations"].is_object() && caps["index"]["writable"] == true);
}

#[test]
fn embed_vectors_are_unit_norm_and_base64_decodes_to_the_json_vectors() {
    let mut e = serve(&[]);
    let texts = ["a dense retrieval engine", "", "Über naïve café — 東京 🚀"];
    let json_res = e.ok("embed", json!({"inputs": texts, "kind": "document"}));
    let vectors: Vec<Vec<f32>> = json_res["vectors"].as_array().unwrap().iter().map(floats).collect();
    assert_eq!(vectors.len(), 3);
    for v in &vectors {
        assert_eq!(v.len(), 384);
        assert!(v.iter().all(|x| x.is_finite()));
        assert!((norm(v) - 1.0).abs() < 1e-3, "norm {}", norm(v));
    }
    let b64 = e.ok("embed", json!({"texts": texts, "kind": "query", "encoding": "f32-base64"}));
    assert_eq!(b64["encoding"], "f32-base64");
    assert_eq!(b64["dimension"], 384);
    for (blob, v) in b64["vectors"].as_array().unwrap().iter().zip(&vectors) {
        let decoded = decode_f32_base64(blob.as_str().unwrap(), 384).unwrap();
        // JSON carries each f32 exactly (shortest round-trip form), so the bits agree.
        assert_eq!(
            decoded.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
    // Inputs are batched by length internally; the answer keeps the caller's order.
    let long = "a considerably longer input about boundary layers, shock waves and heat transfer in hypersonic flow";
    let one = e.ok("embed", json!({"inputs": [long, "wing"]}));
    let two = e.ok("embed", json!({"inputs": ["wing", long]}));
    let cos = |a: &Value, b: &Value| floats(a).iter().zip(floats(b)).map(|(x, y)| f64::from(x * y)).sum::<f64>();
    assert!(cos(&one["vectors"][0], &two["vectors"][1]) > 0.999);
    assert!(cos(&one["vectors"][1], &two["vectors"][0]) > 0.999);
    // Similar texts are closer than unrelated ones.
    let r =
        e.ok("embed", json!({"inputs": ["cats purr on the sofa", "a kitten purring on a couch", "tax law in 1850"]}));
    let v: Vec<Vec<f32>> = r["vectors"].as_array().unwrap().iter().map(floats).collect();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2);
}

#[test]
fn embed_rejects_a_batch_over_the_limit_and_a_bad_kind() {
    let mut e = serve(&["--batch-limit", "4"]);
    let err = e.err("embed", json!({"inputs": ["a", "b", "c", "d", "e"]}));
    assert_eq!(code(&err), -32602);
    let err = e.err("embed", json!({"inputs": ["a"], "kind": "passage"}));
    assert_eq!(code(&err), -32602);
    assert_eq!(e.ok("embed", json!({"inputs": ["a", "b", "c", "d"]}))["vectors"].as_array().unwrap().len(), 4);
}

fn ids(res: &Value) -> Vec<String> {
    res["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn retrieve_ranks_by_cosine_with_confidence_citations_and_usage() {
    let mut e = serve(&[]);
    let res = e.ok("retrieve", json!({"query": "merging ranked lists from several search engines", "k": 5}));
    let hits = res["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 5);
    let top: HashSet<String> = ids(&res).into_iter().take(3).collect();
    assert!(top.contains("rrf-1") || top.contains("rcp-2"), "{top:?}");
    let mut last = f64::INFINITY;
    for h in hits {
        let s = h["score"].as_f64().unwrap();
        let c = h["confidence"].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&s) && s <= last);
        assert!((0.0..=1.0).contains(&c));
        assert!((c - rcp_dense::engine::confidence(s)).abs() < 1e-9);
        assert_eq!(h["trust"]["level"], "trusted");
        assert!(h["citation"]["title"].is_string());
        assert!(h["text"].is_string());
        last = s;
    }
    assert_eq!(res["usage"]["candidates"], 30);
    assert!(res["usage"]["latencyMs"].is_u64());
    // minScore drops hits below it; includeText:false drops bodies.
    let floor = hits[2]["score"].as_f64().unwrap();
    let res = e.ok(
        "retrieve",
        json!({"query": "merging ranked lists from several search engines", "k": 5, "minScore": floor, "includeText": false}),
    );
    assert_eq!(res["hits"].as_array().unwrap().len(), 3);
    assert!(res["hits"][0].get("text").is_none());
}

#[test]
fn retrieve_filters_diversifies_and_returns_vectors() {
    let mut e = serve(&[]);
    let q = "storage engines and write-ahead logs";
    let res = e.ok("retrieve", json!({"query": q, "k": 4, "filter": {"field": "year", "op": "lt", "value": 2000}}));
    assert!(!res["hits"].as_array().unwrap().is_empty());
    for h in res["hits"].as_array().unwrap() {
        assert!(h["meta"]["year"].as_i64().unwrap() < 2000, "{h}");
    }
    // The 30-document demo corpus is below the full-scan threshold: the note names that plan.
    let notes = res["usage"]["notes"].to_string();
    assert!(notes.contains("filter plan: exact scan;") && notes.contains("by the postings"), "{notes}");
    let res = e.ok("retrieve", json!({"query": q, "k": 3, "filter": {"field": "topic", "op": "eq", "value": "nope"}}));
    assert!(res["hits"].as_array().unwrap().is_empty());
    let err = e.err("retrieve", json!({"query": q, "k": 3, "filter": {"field": "colour", "op": "eq", "value": "red"}}));
    assert_eq!(code(&err), -32602);

    // MMR: λ = 1 is the plain ranking; λ = 0 picks a more diverse set from the same candidates.
    let plain = ids(&e.ok("retrieve", json!({"query": q, "k": 5})));
    assert_eq!(ids(&e.ok("retrieve", json!({"query": q, "k": 5, "mmr": {"lambda": 1.0}}))), plain);
    let diverse = e.ok("retrieve", json!({"query": q, "k": 5, "mmr": {"lambda": 0.0}, "includeVectors": true}));
    let vs: Vec<Vec<f32>> = diverse["hits"].as_array().unwrap().iter().map(|h| floats(&h["vector"])).collect();
    let mean_sim = |vs: &[Vec<f32>]| {
        let mut total = 0.0;
        let mut n = 0.0;
        for i in 0..vs.len() {
            for j in i + 1..vs.len() {
                total += vs[i].iter().zip(&vs[j]).map(|(a, b)| f64::from(a * b)).sum::<f64>();
                n += 1.0;
            }
        }
        total / n
    };
    let plain_res = e.ok("retrieve", json!({"query": q, "k": 5, "includeVectors": true}));
    let pvs: Vec<Vec<f32>> = plain_res["hits"].as_array().unwrap().iter().map(|h| floats(&h["vector"])).collect();
    assert!(mean_sim(&vs) < mean_sim(&pvs), "MMR should lower the mutual similarity");

    // The normative schema types `Hit.vector` as numbers only (§7.3.1's prose would allow a
    // binary encoding there); the framework follows the schema: f32-base64 is refused under
    // `strict`, and with `strict:false` the vectors come back as JSON numbers with a note.
    let err = e.err("retrieve", json!({"query": q, "k": 1, "includeVectors": true, "encoding": "f32-base64"}));
    assert_eq!((code(&err), err["data"]["option"].clone()), (-32005, json!("encoding")));
    let res = e
        .ok("retrieve", json!({"query": q, "k": 1, "includeVectors": true, "encoding": "f32-base64", "strict": false}));
    let hit = &res["hits"][0];
    let v = floats(&hit["vector"]);
    assert_eq!(v.len(), 384);
    assert!((norm(&v) - 1.0).abs() < 1e-3);
    assert!(res["usage"]["notes"].to_string().contains("encoding"), "{res}");
    let dense = hit["scores"]["dense"].as_f64().unwrap();
    assert_eq!(dense, hit["score"].as_f64().unwrap());
}

#[test]
fn same_seed_same_results_and_unadvertised_mode_is_rejected() {
    let mut e = serve(&[]);
    let p = json!({"query": "language servers for editors", "k": 10, "seed": 7, "candidateK": 20});
    let a = e.ok("retrieve", p.clone());
    let b = e.ok("retrieve", p);
    assert_eq!(a["hits"], b["hits"]);
    assert_eq!(a["usage"]["candidates"], 20);
    let err = e.err("retrieve", json!({"query": "x", "k": 3, "mode": "sparse"}));
    assert_eq!(code(&err), -32005);
}
