//! `rcp-rerank serve --sparse-embed` over real pipes: the `sparseEmbed` capability
//! (`identity`, `vocabulary`, the batch limit), SPLADE vectors matching the Python reference
//! (rcp-embedder's tests/splade_reference.rs), `kind`, empty texts, and the bad input of
//! issue #25 (too many texts, a bad `kind`, no `texts`), after which the engine keeps serving.

use std::path::PathBuf;
use std::sync::OnceLock;

use rcp_rerank::sparse::BATCH_LIMIT_KEY;
use rcp_rerank::{MODEL, SPLADE_MODEL};
use rcp_testkit::{Engine, code};
use serde_json::{Value, json};

/// The provisioned model directories: the cross-encoder's (every server reranks) and SPLADE's.
fn model_dirs() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let provision = |model: &rcp_embedder::Model| {
            let dir = model.default_dir();
            model.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
            dir
        };
        (provision(MODEL), provision(SPLADE_MODEL))
    })
}

fn serve(batch_limit: &str) -> (Engine, Value) {
    let (ce, splade) = model_dirs();
    let args = [
        "serve",
        "--method",
        "cross-encoder",
        "--model-dir",
        ce.to_str().expect("utf-8 path"),
        "--sparse-embed",
        "--splade-model-dir",
        splade.to_str().expect("utf-8 path"),
        "--sparse-batch-limit",
        batch_limit,
        "--encoder-sessions",
        "1",
    ];
    let mut e = Engine::spawn(&PathBuf::from(env!("CARGO_BIN_EXE_rcp-rerank")), &args);
    let init = e.initialize();
    (e, init)
}

/// `(indices, values)` of the `i`-th sparse vector.
fn vector(result: &Value, i: usize) -> (Vec<u64>, Vec<f64>) {
    let v = &result["sparse"][i];
    let nums = |k: &str| -> Vec<Value> { v[k].as_array().unwrap_or_else(|| panic!("{k} in {v}")).clone() };
    (
        nums("indices").iter().map(|x| x.as_u64().expect("index")).collect(),
        nums("values").iter().map(|x| x.as_f64().expect("value")).collect(),
    )
}

#[test]
fn sparse_vectors_over_the_vocabulary() {
    let (mut e, init) = serve("4");
    let cap = &init["capabilities"]["sparseEmbed"];
    assert_eq!(cap["identity"], json!(SPLADE_MODEL.identity), "{init}");
    assert_eq!(cap["vocabulary"], json!(30_522));
    assert_eq!(cap[BATCH_LIMIT_KEY], json!(4));
    let r = e.ok("embed/sparse", json!({"texts": ["Paris is the capital of France.", "", "  \n"], "kind": "document"}));
    assert_eq!(r["sparse"].as_array().map(Vec::len), Some(3), "{r}");
    let (indices, values) = vector(&r, 0);
    assert!(indices.windows(2).all(|w| w[0] < w[1]) && indices.iter().all(|&i| i < 30_522));
    assert!(values.iter().all(|&w| w > 0.0));
    // The heaviest term and its weight in the Python reference: "capital", 2.671925.
    let (top, weight) = indices.iter().zip(&values).max_by(|a, b| a.1.total_cmp(b.1)).expect("terms");
    assert_eq!(*top, 3007);
    assert!((weight - 2.671925).abs() < 2e-3, "{weight}");
    for empty in [1, 2] {
        assert_eq!(vector(&r, empty), (vec![], vec![]), "a text without words has no terms: {r}");
    }
    // SPLADE-tiny is symmetric: a query is encoded as a document is; `inputs` is accepted too.
    let q = e.ok("embed/sparse", json!({"inputs": ["Paris is the capital of France."], "kind": "query"}));
    assert_eq!(q["sparse"][0], r["sparse"][0]);
}

#[test]
fn bad_input_is_refused_precisely_and_the_engine_keeps_serving() {
    let (mut e, _) = serve("2");
    let err = e.err("embed/sparse", json!({"texts": ["a", "b", "c"]}));
    assert_eq!(code(&err), -32602, "{err}");
    assert_eq!(err["data"]["limit"], json!(2), "{err}");
    let err = e.err("embed/sparse", json!({"texts": ["a"], "kind": "passage"}));
    assert_eq!(code(&err), -32602, "{err}");
    let err = e.err("embed/sparse", json!({"kind": "query"}));
    assert_eq!(code(&err), -32602, "{err}");
    let err = e.err("embed/sparse", json!({"texts": "not a list"}));
    assert_eq!(code(&err), -32602, "{err}");
    let r = e.ok("embed/sparse", json!({"texts": []}));
    assert_eq!(r["sparse"], json!([]));
    let r = e.ok("embed/sparse", json!({"texts": ["still serving"]}));
    assert!(!vector(&r, 0).0.is_empty(), "{r}");
}
