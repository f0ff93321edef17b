//! The data-directory rule every engine shares (`rcp_server::cli::DataDirArgs::resolve`): an
//! existing empty directory, like a missing one, is served only with `--create`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rcp-bm25"))
}

#[test]
fn an_empty_data_dir_needs_create() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let empty = empty.to_str().expect("utf-8 path");
    let missing = tmp.path().join("missing");
    let missing = missing.to_str().expect("utf-8 path");
    for (dir, says) in [(empty, "holds no rcp-bm25 store"), (missing, "no such data directory")] {
        let out = Command::new(bin()).args(["serve", "--data-dir", dir]).stdin(Stdio::null()).output().expect("serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{dir}: served without --create: {stderr}");
        assert!(stderr.contains(says) && stderr.contains("--create"), "{dir}: {stderr}");
    }
    // With --create the empty directory is served (stdin closed: the server ends at once).
    let out = Command::new(bin())
        .args(["serve", "--data-dir", empty, "--create"])
        .stdin(Stdio::null())
        .output()
        .expect("serve --create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
