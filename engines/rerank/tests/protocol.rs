//! `rcp-rerank serve` over real pipes: the `rerank` capability, scores, `order`/`topN`, the
//! bad input of issue #25 (too many passages, empty texts, a damaged or missing model).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rcp_rerank::MODEL;
use rcp_testkit::{Engine, code};
use serde_json::{Value, json};

fn model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = MODEL.default_dir();
        MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
        dir
    })
    .clone()
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rcp-rerank"))
}

/// Spawns `rcp-rerank serve ARGS` on the provisioned model; returns it with its `initialize` result.
fn serve(args: &[&str]) -> (Engine, Value) {
    let dir = model_dir();
    let mut all = vec!["serve", "--model-dir", dir.to_str().expect("utf-8 path")];
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
    assert_eq!(cap["methods"], json!(["cross-encoder"]), "{init}");
    assert_eq!(cap["maxCandidates"], json!(8));
    assert_eq!(cap["models"], json!([MODEL.identity]));
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
    assert!((s[0] - -10.935596).abs() < 1e-3 && (s[1] - 8.047616).abs() < 1e-3, "{s:?}");
    assert_eq!(r["order"][0], json!(1), "{r}");
    assert_eq!(r["order"].as_array().map(Vec::len), Some(2), "topN cuts order: {r}");
}

#[test]
fn too_many_passages_are_refused_and_the_engine_keeps_serving() {
    let (mut e, _) = serve(&["--max-candidates", "2"]);
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
    let (mut e, _) = serve(&[]);
    let r = e.ok("rerank", json!({"query": "what is the capital of france", "passages": ["", " "]}));
    let s = scores(&r);
    assert_eq!(s.len(), 2, "{r}");
    assert!(s.iter().all(|x| x.is_finite()), "{s:?}");
    assert!((s[0] - -9.690441).abs() < 1e-3, "{s:?}");
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
