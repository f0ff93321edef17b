//! rcp-dense's write-ahead log under damage: a crash's torn tail is cut, anything else is
//! refused with the file and offset named and the file untouched, and `rcp-dense repair`
//! keeps exactly what verifies. Never served as less data.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rcp_testkit::{Engine, kill9, workspace_bin};
use serde_json::json;

const DOCS: usize = 20;

fn dense() -> PathBuf {
    workspace_bin("rcp-dense", "rcp-dense")
}

fn serve(dir: &Path) -> Engine {
    let mut e = Engine::spawn(&dense(), &["serve", "--fetch-model", "--data-dir", dir.to_str().expect("utf-8 path")]);
    e.initialize();
    e
}

/// A data directory whose log holds `DOCS` acknowledged single-document writes.
fn logged_writes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut e = serve(dir.path());
    for i in 0..DOCS {
        let r = e.ok("index/add", json!({"documents": [{"id": format!("w{i}"), "text": format!("wal record number {i}")}]}));
        assert_eq!(r["ids"], json!([format!("w{i}")]));
    }
    kill9(&mut e);
    dir
}

/// Runs the engine to completion with no client; its exit and stderr.
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(dense())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rcp-dense");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        assert!(std::time::Instant::now() < deadline, "rcp-dense {args:?} did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

fn present(dir: &Path) -> Vec<String> {
    let mut e = serve(dir);
    let r = e.ok("retrieve", json!({"query": "wal record number", "k": 100}));
    let mut ids: Vec<String> =
        r["hits"].as_array().expect("hits").iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect();
    ids.sort();
    ids
}

#[test]
fn a_flipped_byte_mid_log_is_refused_and_repair_keeps_what_verifies() {
    let dir = logged_writes();
    let wal = dir.path().join("wal.log");
    let mut bytes = std::fs::read(&wal).expect("wal");
    let at = bytes.len() / 4;
    bytes[at] ^= 0x20;
    std::fs::write(&wal, &bytes).expect("write");

    let d = dir.path().to_str().expect("utf-8");
    let out = run(&["serve", "--fetch-model", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served a corrupt log: {stderr}");
    assert!(stderr.contains("corrupt") && stderr.contains("wal.log") && stderr.contains("repair"), "{stderr}");
    assert_eq!(std::fs::read(&wal).expect("wal"), bytes, "refusing must leave the log untouched");

    let out = run(&["repair", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("kept {} records", DOCS - 1)), "{stderr}");
    let backups: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("wal.log.bak-"))
        .collect();
    assert_eq!(backups.len(), 1, "one backup of the original log");
    assert_eq!(std::fs::read(backups[0].path()).expect("backup"), bytes);

    let ids = present(dir.path());
    assert_eq!(ids.len(), DOCS - 1, "every record but the damaged one: {ids:?}");
}

#[test]
fn a_zero_filled_log_is_refused() {
    let dir = logged_writes();
    let wal = dir.path().join("wal.log");
    let len = std::fs::metadata(&wal).expect("wal").len() as usize;
    std::fs::write(&wal, vec![0u8; len]).expect("zero");
    let out = run(&["serve", "--fetch-model", "--data-dir", dir.path().to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served a zeroed log as empty: {stderr}");
    assert!(stderr.contains("corrupt at byte 0"), "{stderr}");
    assert_eq!(std::fs::metadata(&wal).expect("wal").len() as usize, len);
}

#[test]
fn a_torn_final_write_is_cut_and_everything_acknowledged_is_served() {
    let dir = logged_writes();
    let wal = dir.path().join("wal.log");
    // A crash mid-append: half of one more record at the end of the log.
    let mut bytes = std::fs::read(&wal).expect("wal");
    let half = bytes[..bytes.len() / DOCS].to_vec();
    bytes.extend_from_slice(&half[..half.len() / 2]);
    std::fs::write(&wal, &bytes).expect("write");
    assert_eq!(present(dir.path()).len(), DOCS);
}
