//! `rcp-rerank serve` over real pipes: the `rerank` and `multiVector` capabilities, scores of
//! both methods, `order`/`topN`, `embed/multi` matrices, the bad input of issue #25 (too many
//! passages, empty texts, a damaged or missing model).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rcp_rerank::{COLBERT_MODEL, MODEL};
use rcp_testkit::{Engine, code};
use serde_json::{Value, json};

/// The provisioned model directories: the cross-encoder's and ColBERT's.
fn model_dirs() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let provision = |model: &rcp_embedder::Model| {
            let dir = model.default_dir();
            model.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
            dir
        };
        (provision(MODEL), provision(COLBERT_MODEL))
    })
}

fn model_dir() -> PathBuf {
    model_dirs().0.clone()
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rcp-rerank"))
}

/// Spawns `rcp-rerank serve ARGS` on the provisioned model; returns it with its `initialize` result.
fn serve(args: &[&str]) -> (Engine, Value) {
    let (dir, colbert) = model_dirs();
    let mut all = vec![
        "serve",
        "--model-dir",
        dir.to_str().expect("utf-8 path"),
        "--colbert-model-dir",
        colbert.to_str().expect("utf-8 path"),
        // One session per model: the engine answers `initialize` sooner on a busy machine.
        "--encoder-sessions",
        "1",
    ];
    all.extend_from_slice(args);
    let mut e = Engine::spawn(&bin(), &all);
    let init = e.initialize();
    (e, init)
}

fn scores(result: &Value) -> Vec<f64> {
    result["scores"].as_array().expect("scores").iter().map(|s| s.as_f64().expect("number")).collect()
}

#[test]
fn advertises_the_cross_encoder_and_ranks_by_its_logits() {
    let (mut e, init) = serve(&["--max-candidates", "8"]);
    let cap = &init["capabilities"]["rerank"];
    assert_eq!(cap["methods"], json!(["cross-encoder", "colbert"]), "{init}");
    assert_eq!(cap["maxCandidates"], json!(8));
    assert_eq!(cap["models"], json!([MODEL.identity, COLBERT_MODEL.identity]));
    let r = e.ok(
        "rerank",
        json!({"query": "what is the capital of france", "topN": 2, "passages": [
            "The Eiffel Tower was completed in 1889.",
            "Paris is the capital and most populous city of France.",
            "Bananas are rich in potassium.",
        ]}),
    );
    let s = scores(&r);
    assert_eq!(s.len(), 3, "{r}");
    // The logits of the Python reference (tests/reference.rs) for the first two.
    let logit = f64::from(rcp_testkit::int8_tolerance(1e-3, 0.5));
    assert!((s[0] - -10.935596).abs() < logit && (s[1] - 8.047616).abs() < logit, "{s:?}");
    assert_eq!(r["order"][0], json!(1), "{r}");
    assert_eq!(r["order"].as_array().map(Vec::len), Some(2), "topN cuts order: {r}");
}

/// `method: "colbert"` scores by MaxSim: the values of the Python reference (tests/colbert.rs).
#[test]
fn colbert_ranks_by_max_sim() {
    let (mut e, _) = serve(&["--max-candidates", "3"]);
    let r = e.ok(
        "rerank",
        json!({"query": "what is the capital of france", "method": "colbert", "topN": 1, "passages": [
            "The Eiffel Tower was completed in 1889.",
            "Paris is the capital and most populous city of France.",
            "",
        ]}),
    );
    let s = scores(&r);
    let max_sim = f64::from(rcp_testkit::int8_tolerance(1e-3, 0.25));
    assert!((s[0] - 26.858734).abs() < max_sim && (s[1] - 28.089195).abs() < max_sim, "{s:?}");
    assert!((s[2] - 24.434025).abs() < max_sim, "an empty passage is scored: {s:?}");
    assert_eq!(r["order"], json!([1]), "{r}");
    let err = e.err("rerank", json!({"query": "q", "method": "colbert", "passages": ["a", "b", "c", "d"]}));
    assert_eq!(code(&err), -32602, "{err}");
    let err = e.err("rerank", json!({"query": "q", "method": "colbert", "passages": ["a"], "model": MODEL.identity}));
    assert_eq!(code(&err), -32602, "the cross-encoder's model does not serve colbert: {err}");
}

fn matrix(result: &Value, i: usize) -> Vec<Vec<f64>> {
    serde_json::from_value(result["matrices"][i].clone()).expect("a matrix of numbers")
}

#[test]
fn embed_multi_returns_query_and_document_matrices() {
    let (mut e, init) = serve(&[]);
    let cap = &init["capabilities"]["multiVector"];
    assert_eq!(cap["dimension"], json!(384), "{init}");
    assert_eq!(cap["similarity"], json!("cosine"));
    assert_eq!(cap["identity"], json!(COLBERT_MODEL.identity));
    let paris = "Paris is the capital and most populous city of France.";
    let docs = e.ok("embed/multi", json!({"inputs": [paris, ""]}));
    assert_eq!(docs["dimension"], json!(384), "{docs}");
    let (d, empty) = (matrix(&docs, 0), matrix(&docs, 1));
    assert_eq!((d.len(), empty.len()), (13, 3), "documents by default: punctuation dropped, [CLS] [D] [SEP] kept");
    assert!(d.iter().all(|row| row.len() == 384));
    assert!((d[1][0] - -0.03555784).abs() < f64::from(rcp_testkit::int8_tolerance(1e-4, 0.02)), "{:?}", &d[1][..4]);
    let q = e.ok("embed/multi", json!({"inputs": ["what is the capital of france"], "kind": "query"}));
    assert_eq!(matrix(&q, 0).len(), 32, "a query is [MASK]-augmented to 32 rows");
    let same = e.ok("embed/multi", json!({"inputs": [paris], "kind": "document"}));
    assert_eq!(matrix(&same, 0), d, "an input's matrix does not depend on the others in the request");
    // The schema's matrices are numbers: no binary encoding is advertised, so none is served.
    let err = e.err("embed/multi", json!({"inputs": [paris], "encoding": "f32-base64"}));
    assert_eq!(code(&err), -32005, "{err}");
    let err = e.err("embed/multi", json!({"inputs": ["x"], "kind": "passage"}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("kind")), "{err}");
}

#[test]
fn methods_are_advertised_exactly() {
    let (mut e, init) = serve(&["--method", "cross-encoder"]);
    assert_eq!(init["capabilities"]["rerank"]["methods"], json!(["cross-encoder"]), "{init}");
    assert!(init["capabilities"].get("multiVector").is_none(), "no ColBERT, no embed/multi: {init}");
    let err = e.err("rerank", json!({"query": "q", "method": "colbert", "passages": ["a"], "strict": true}));
    assert_eq!(code(&err), -32005, "{err}");
    let (_, init) = serve(&["--method", "colbert"]);
    assert_eq!(init["capabilities"]["rerank"]["methods"], json!(["colbert"]), "{init}");
    assert_eq!(init["capabilities"]["rerank"]["models"], json!([COLBERT_MODEL.identity]), "{init}");
    assert!(init["capabilities"].get("multiVector").is_some(), "{init}");
}

#[test]
fn too_many_passages_are_refused_and_the_engine_keeps_serving() {
    let (mut e, _) = serve(&["--max-candidates", "2", "--method", "cross-encoder"]);
    let err = e.err("rerank", json!({"query": "q", "passages": ["a", "b", "c"]}));
    assert_eq!(code(&err), -32602, "{err}");
    assert!(
        err["message"].as_str().unwrap_or("").contains("maxCandidates") || err.to_string().contains("maxCandidates"),
        "{err}"
    );
    let r = e.ok("rerank", json!({"query": "q", "passages": ["a", "b"]}));
    assert_eq!(scores(&r).len(), 2);
}

/// Empty passages are scored. An empty query never reaches the engine: the framework refuses
/// it for every method (-32602, `field: query`); the cross-encoder itself scores one
/// (tests/reference.rs).
#[test]
fn empty_passages_are_scored_and_an_empty_query_refused_precisely() {
    let (mut e, _) = serve(&["--method", "cross-encoder"]);
    let r = e.ok("rerank", json!({"query": "what is the capital of france", "passages": ["", " "]}));
    let s = scores(&r);
    assert_eq!(s.len(), 2, "{r}");
    assert!(s.iter().all(|x| x.is_finite()), "{s:?}");
    assert!((s[0] - -9.690441).abs() < f64::from(rcp_testkit::int8_tolerance(1e-3, 0.5)), "{s:?}");
    let err = e.err("rerank", json!({"query": "", "passages": ["a"]}));
    assert_eq!((code(&err), err["data"]["field"].as_str()), (-32602, Some("query")), "{err}");
    let none = e.ok("rerank", json!({"query": "q", "passages": []}));
    assert_eq!(scores(&none), Vec::<f64>::new());
    let err = e.err("rerank", json!({"query": "q", "passages": ["a"], "model": "other/model"}));
    assert_eq!(code(&err), -32602, "{err}");
}

/// `rcp-rerank serve` on `dir`: its exit status and stderr.
fn start_on(dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(bin())
        .args(["serve", "--model-dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        assert!(std::time::Instant::now() < deadline, "the engine started on a damaged model");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_damaged_or_missing_model_is_refused_naming_the_file_and_the_command() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (status, stderr) = start_on(tmp.path());
    assert!(!status.success());
    assert!(stderr.contains("model.onnx missing") && stderr.contains("rcp-rerank fetch-model"), "{stderr}");
    assert!(stderr.contains(&format!("--model-dir {}", tmp.path().display())), "{stderr}");
    // Every file in place, the graph one byte off.
    let src = model_dir();
    for entry in std::fs::read_dir(&src).expect("model dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_owned();
        if path.is_file() && !name.to_string_lossy().starts_with('.') {
            std::fs::copy(&path, tmp.path().join(&name)).expect("copy");
        }
    }
    let onnx = tmp.path().join("model.onnx");
    let mut bytes = std::fs::read(&onnx).expect("read");
    bytes[1000] ^= 1;
    std::fs::write(&onnx, bytes).expect("write");
    let (status, stderr) = start_on(tmp.path());
    assert!(!status.success());
    assert!(stderr.contains("model.onnx corrupted"), "{stderr}");
    assert!(stderr.contains("rcp-rerank fetch-model"), "{stderr}");
    assert!(!stderr.contains("tokenizer.json"), "only the damaged file is named: {stderr}");
}
