//! Helpers shared by the integration tests: the schema and binaries built beside the test
//! executable.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use rcp_conformance::SchemaSource;

/// The schema the suite validates against: the file `RCP_SCHEMA` names when it is set (CI sets
/// it to the spec's normative `rcp-1.0.json`), else the schema built into rcp-conformance.
/// Panics when `RCP_SCHEMA` names no file: that is a misconfigured run, not a missing option.
pub(crate) fn schema() -> SchemaSource {
    match std::env::var_os("RCP_SCHEMA") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "RCP_SCHEMA is set to {}, which is not a file", path.display());
            SchemaSource::File(path)
        }
        None => SchemaSource::Builtin,
    }
}

/// The `rcp-conformance` arguments selecting [`schema`]: `--schema PATH`, or none for the
/// built-in schema (the binary's default).
pub(crate) fn schema_args() -> Vec<OsString> {
    match schema() {
        SchemaSource::File(path) => vec!["--schema".into(), path.into_os_string()],
        SchemaSource::Builtin => Vec::new(),
    }
}

/// `target/<profile>`, the directory holding `deps/<this test>`.
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(|d| d.parent()).expect("target/<profile>").to_path_buf()
}

/// An example of this package (cargo builds them before running integration tests).
pub(crate) fn own_example(name: &str) -> PathBuf {
    let bin = profile_dir().join("examples").join(name);
    assert!(bin.is_file(), "{} is not built; run through `cargo test -p rcp-conformance`", bin.display());
    bin
}

/// The workspace's `tiny_engine` example, built on demand with the cargo that runs the tests.
pub(crate) fn tiny_engine() -> PathBuf {
    workspace_example("tiny_engine")
}

/// An example of the workspace's `rcp-examples` package (`tiny_engine`, `graph_engine`), built
/// on demand with the cargo that runs the tests.
pub(crate) fn workspace_example(name: &str) -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join("examples").join(name);
    if bin.is_file() {
        return bin;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let profile = dir.file_name().and_then(|p| p.to_str()).unwrap_or("debug").to_owned();
    let target_dir = dir.parent().expect("target dir").to_path_buf();
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "rcp-examples", "--example", name, "--target-dir"]).arg(&target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().expect("run cargo build");
    assert!(status.success(), "building {name} failed");
    assert!(bin.is_file(), "{} still missing after building it", bin.display());
    bin
}

/// Only a MUST check can fail (a SHOULD misses as a warning, a MAY as information), and every
/// check that points elsewhere (SEE) names a check of the report.
pub(crate) fn assert_verdicts_follow_keywords(report: &rcp_conformance::Report) {
    for c in &report.checks {
        if c.status == rcp_conformance::Status::Fail {
            assert_eq!(c.strength, rcp_conformance::Strength::Must, "{} failed but rests on a {:?}", c.id, c.basis);
        }
        if let Some(owner) = c.see {
            assert!(report.check(owner).is_some(), "{} points to {owner}, which did not run", c.id);
        }
        assert!(!c.basis.quote.is_empty(), "{} quotes no sentence", c.id);
    }
}

/// The failed checks' ids.
pub(crate) fn failed(report: &rcp_conformance::Report) -> Vec<&'static str> {
    report.checks.iter().filter(|c| c.status == rcp_conformance::Status::Fail).map(|c| c.id).collect()
}

/// A binary of another workspace package (`cargo build -p PACKAGE`), found beside the test
/// executable in `target/<profile>` and built there with the cargo that runs the tests when it is
/// missing. `None` when it cannot be built (the caller skips with a message).
pub(crate) fn workspace_bin(package: &str, name: &str) -> Option<PathBuf> {
    let dir = profile_dir();
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        return Some(bin);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let profile = dir.file_name().and_then(|p| p.to_str()).unwrap_or("debug").to_owned();
    let target_dir = dir.parent()?.to_path_buf();
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name, "--target-dir"]).arg(&target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let built = cmd.current_dir(env!("CARGO_MANIFEST_DIR")).status().is_ok_and(|s| s.success());
    (built && bin.is_file()).then_some(bin)
}
