//! Helpers shared by the reliability tests that drive engine binaries.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>`: the parent of the `deps/` directory holding this test executable.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>").to_path_buf()
}

/// The binary `name` of workspace package `package`, beside the test executable; built there
/// with the cargo running the tests when it is missing (this crate does not depend on the
/// engines, so cargo does not build them for it).
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        return bin;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = dir.parent().expect("target dir").to_path_buf();
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name, "--target-dir"]).arg(&target_dir);
    match dir.file_name().and_then(|p| p.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(profile) => {
            cmd.args(["--profile", profile]);
        }
    }
    let status = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().expect("run cargo build");
    assert!(status.success() && bin.is_file(), "building {name} failed");
    bin
}
