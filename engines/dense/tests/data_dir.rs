//! The data-directory rule every engine shares (`rcp_server::cli::DataDirArgs::resolve`): an
//! existing empty directory, like a missing one, is served only with `--create`.

mod common;

use std::process::{Command, Stdio};

use common::{bin, model_dir, serve};
use serde_json::json;

#[test]
fn an_empty_data_dir_needs_create() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let empty = empty.to_str().expect("utf-8 path");
    let missing = tmp.path().join("missing");
    let missing = missing.to_str().expect("utf-8 path");
    for (dir, says) in [(empty, "holds no rcp-dense store"), (missing, "no such data directory")] {
        let out = Command::new(bin())
            .args(["serve", "--data-dir", dir])
            .env("RCP_MODEL_DIR", model_dir())
            .stdin(Stdio::null())
            .output()
            .expect("run serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{dir}: served without --create: {stderr}");
        assert!(stderr.contains(says) && stderr.contains("--create"), "{dir}: {stderr}");
        assert_eq!(std::fs::read_dir(tmp.path()).expect("ls").count(), 1, "nothing was created: {stderr}");
    }
    // With --create the empty directory becomes an empty store, served; later runs need no flag.
    let mut e = serve(&["--data-dir", empty, "--create"]);
    assert_eq!(e.ok("retrieve", json!({"query": "wing", "k": 3}))["hits"], json!([]));
    drop(e);
    let mut e = serve(&["--data-dir", empty]);
    assert_eq!(e.ok("retrieve", json!({"query": "wing", "k": 3}))["hits"], json!([]));
}
