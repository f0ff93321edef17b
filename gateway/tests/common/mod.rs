//! Helpers of the gateway's integration tests: binaries, registries, events files.

#![allow(dead_code, reason = "each test file uses a different subset")]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rcp_client::{Client, ClientOptions};
use serde_json::{Value, json};

/// The gateway binary under test.
pub(crate) fn gateway_bin() -> String {
    env!("CARGO_BIN_EXE_rcp-gateway").to_owned()
}

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    exe.parent().and_then(Path::parent).expect("target dir").to_path_buf()
}

/// The fixture engine (this crate's example, built by `cargo test`).
pub(crate) fn fixture_bin() -> String {
    let bin = target_dir().join("examples").join("gateway_fixture");
    assert!(bin.exists(), "{} not built (cargo test builds examples)", bin.display());
    bin.to_string_lossy().into_owned()
}

/// `rcp-bm25`, built into the same target directory when it is not there yet.
pub(crate) fn bm25_bin() -> String {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    built_bin(&BUILT, "rcp-bm25")
}

/// `rcp-dense`, built into the same target directory when it is not there yet.
pub(crate) fn dense_bin() -> String {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    built_bin(&BUILT, "rcp-dense")
}

/// `rcp-rerank`, built into the same target directory when it is not there yet.
pub(crate) fn rerank_bin() -> String {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    built_bin(&BUILT, "rcp-rerank")
}

/// The binary `name` of the workspace package `name`, built once per test binary if missing.
fn built_bin(cell: &OnceLock<PathBuf>, name: &str) -> String {
    cell.get_or_init(|| {
        let bin = target_dir().join(name);
        if !bin.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "-p", name, "--bin", name])
                .status()
                .unwrap_or_else(|e| panic!("run cargo build -p {name}: {e}"));
            assert!(status.success(), "building {name} failed");
        }
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
    .to_string_lossy()
    .into_owned()
}

/// A fixture registry entry.
pub(crate) fn fixture(id: &str, args: &[&str]) -> Value {
    let mut command = vec![fixture_bin(), "--name".into(), id.into()];
    command.extend(args.iter().map(|s| (*s).to_owned()));
    json!({"id": id, "transport": "stdio", "command": command})
}

/// Writes `{"engines": entries}` to `dir/name`.
pub(crate) fn write_registry(dir: &Path, name: &str, entries: Vec<Value>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, json!({"engines": entries}).to_string()).expect("write registry");
    path
}

/// A registry of two fixture engines, `a` and `b`, each recording what it receives in its own
/// events file (two processes appending to one file may interleave a line): the registry, then
/// the events files of `a` and `b`.
pub(crate) fn recording_pair(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (ev_a, ev_b) = (dir.join("a.events"), dir.join("b.events"));
    let reg = write_registry(
        dir,
        "rcp.json",
        vec![
            fixture("a", &["--events", &ev_a.to_string_lossy(), "--doc", "a1:wing lift"]),
            fixture("b", &["--events", &ev_b.to_string_lossy(), "--doc", "b1:wing flutter"]),
        ],
    );
    (reg, ev_a, ev_b)
}

/// The string values of `_meta.<key>` a fixture engine recorded in `events`, in order.
pub(crate) fn received_meta(events: &Path, key: &str) -> Vec<String> {
    self::events(events)
        .iter()
        .filter_map(|l| l.split_once(" meta ").map(|(_, m)| m.to_owned()))
        .filter_map(|m| serde_json::from_str::<Value>(&m).ok())
        .filter_map(|m| m[key].as_str().map(str::to_owned))
        .collect()
}

/// The command line of `rcp-gateway serve --registry PATH` plus `extra`.
pub(crate) fn gateway_cmd(registry: &Path, extra: &[&str]) -> Vec<String> {
    let mut cmd = vec![gateway_bin(), "serve".into(), "--registry".into(), registry.to_string_lossy().into_owned()];
    cmd.extend(extra.iter().map(|s| (*s).to_owned()));
    cmd
}

/// Spawns a gateway over stdio and runs `initialize`.
pub(crate) async fn gateway(registry: &Path, extra: &[&str]) -> Client {
    Client::connect_stdio(&gateway_cmd(registry, extra), ClientOptions::default())
        .await
        .expect("connect to the gateway")
}

/// Lines of an events file.
pub(crate) fn events(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// Polls `path` until a line satisfies `pred` or `timeout` passes.
pub(crate) fn wait_for_event(path: &Path, timeout: Duration, pred: impl Fn(&str) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if events(path).iter().any(|l| pred(l)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Notes of a result value.
pub(crate) fn notes(result: &Value) -> Vec<String> {
    result["usage"]["notes"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Ids of a result value's hits.
pub(crate) fn ids(result: &Value) -> Vec<String> {
    result["hits"]
        .as_array()
        .map(|a| a.iter().map(|h| h["id"].to_string().trim_matches('"').to_owned()).collect())
        .unwrap_or_default()
}

/// Eight aerodynamics abstracts in three topics (`wing`, `heat`, `shell`), small enough to
/// embed in a test: the corpus of the tests over real dense and rerank engines.
pub(crate) const AERO_DOCS: [(&str, &str); 8] = [
    ("wing-1", "Lift and drag of a swept wing at transonic speed, with the shock it forms on the upper surface."),
    ("wing-2", "Boundary layer transition on a swept wing in supersonic flow and its effect on drag."),
    ("wing-3", "Wind tunnel measurements of wing lift at high angle of attack before the stall."),
    ("heat-1", "Heat transfer to a blunt body re-entering the atmosphere at hypersonic speed."),
    ("heat-2", "Ablation of a heat shield under convective heating during re-entry."),
    ("heat-3", "Radiative heating of a capsule during atmospheric entry from orbit."),
    ("shell-1", "Buckling of thin cylindrical shells under axial compression."),
    ("shell-2", "Vibration of a thin cylindrical shell with a clamped end."),
];
