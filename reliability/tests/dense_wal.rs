//! rcp-dense's write-ahead log under damage: a crash's torn tail is cut, anything else is
//! refused with the file and offset named and the file untouched, and `rcp-dense repair`
//! keeps exactly what verifies. Never served as less data.

use std::collections::{BTreeMap, HashSet};
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
    let mut e = Engine::spawn(
        &dense(),
        &["serve", "--fetch-model", "--create", "--data-dir", dir.to_str().expect("utf-8 path")],
    );
    e.initialize();
    e
}

/// A data directory whose log holds `DOCS` acknowledged single-document writes.
fn logged_writes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut e = serve(dir.path());
    for i in 0..DOCS {
        let r = e
            .ok("index/add", json!({"documents": [{"id": format!("w{i}"), "text": format!("wal record number {i}")}]}));
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

/// A data directory with a snapshot (built by `index`) plus `DOCS` logged writes on top.
fn snapshot_and_log() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = root.path().join("corpus.jsonl");
    let lines: Vec<String> = (0..12)
        .map(|i| json!({"_id": format!("s{i}"), "title": "snapshot", "text": format!("wal record number {i} from the corpus"), "lang": "en"}).to_string())
        .collect();
    std::fs::write(&corpus, lines.join("\n")).expect("corpus");
    let data = root.path().join("data");
    let d = data.to_str().expect("utf-8");
    let out = run(&["index", "--fetch-model", "--data-dir", d, corpus.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut e = serve(&data);
    for i in 0..DOCS {
        e.ok("index/add", json!({"documents": [{"id": format!("w{i}"), "text": format!("wal record number {i}")}]}));
    }
    kill9(&mut e);
    (root, data)
}

#[test]
fn a_missing_manifest_next_to_snapshots_is_refused_then_rebuilt_by_repair() {
    let (_root, data) = snapshot_and_log();
    let d = data.to_str().expect("utf-8");
    std::fs::remove_file(data.join("manifest.json")).expect("remove manifest");
    let before: Vec<_> = std::fs::read_dir(&data).expect("dir").filter_map(Result::ok).map(|e| e.file_name()).collect();

    let out = run(&["serve", "--fetch-model", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served a directory that lost its manifest: {stderr}");
    assert!(stderr.contains("manifest.json") && stderr.contains("missing") && stderr.contains("repair"), "{stderr}");
    assert!(!data.join("manifest.json").exists(), "refusing must not write a fresh manifest");
    let after: Vec<_> = std::fs::read_dir(&data).expect("dir").filter_map(Result::ok).map(|e| e.file_name()).collect();
    assert_eq!(before.len(), after.len(), "refusing must leave the directory as it was");

    let out = run(&["repair", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("manifest.json rebuilt") && stderr.contains("12 documents") && stderr.contains("lang:keyword"),
        "{stderr}"
    );
    let ids = present(&data);
    assert_eq!(ids.len(), 12 + DOCS, "the snapshot's 12 documents and every logged write: {ids:?}");
}

#[test]
fn a_missing_data_directory_is_an_error_unless_create_is_given() {
    let root = tempfile::tempdir().expect("tempdir");
    let typo = root.path().join("idx-typo");
    let t = typo.to_str().expect("utf-8");
    let out = run(&["serve", "--fetch-model", "--data-dir", t]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("no such data directory") && stderr.contains("--create"),
        "{stderr}"
    );
    assert!(!typo.exists(), "a mistyped path must not be created");

    let mut e = Engine::spawn(&dense(), &["serve", "--fetch-model", "--create", "--data-dir", t]);
    e.initialize();
    let r = e.ok("index/add", json!({"documents": [{"id": "n1", "text": "a new directory"}]}));
    assert_eq!(r["ids"], json!(["n1"]));
    kill9(&mut e);
    assert!(typo.join("wal.log").is_file());
}

#[test]
fn an_aborted_index_run_leaves_no_directory_behind() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("new-index");
    let missing = root.path().join("no-such-corpus.jsonl");
    let out =
        run(&["index", "--fetch-model", "--data-dir", data.to_str().expect("utf-8"), missing.to_str().expect("utf-8")]);
    assert!(!out.status.success());
    assert!(!data.exists(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// kill -9 while pipelined writes are in flight, `RCP_KILL_CYCLES` times (default 2): every
/// acknowledged add is served after each restart, every acknowledged delete stays deleted.
#[test]
fn kill_9_loop_keeps_every_acknowledged_write_and_delete() {
    let cycles: usize = std::env::var("RCP_KILL_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut live: HashSet<String> = HashSet::new();
    let mut gone: HashSet<String> = HashSet::new();
    let (mut adds, mut deletes) = (0, 0);
    for cycle in 0..=cycles {
        let mut e = serve(dir.path());
        let r = e.ok("retrieve", json!({"query": "cycle write", "k": 1000, "includeText": false}));
        let served: HashSet<String> =
            r["hits"].as_array().expect("hits").iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect();
        for id in &live {
            assert!(served.contains(id), "cycle {cycle}: acknowledged write {id} lost");
        }
        for id in &gone {
            assert!(!served.contains(id), "cycle {cycle}: acknowledged delete of {id} undone");
        }
        if cycle == cycles {
            break;
        }
        // A pipelined burst: adds of new ids, deletes of ids acknowledged in earlier cycles.
        let mut victims: Vec<String> = live.iter().cloned().collect();
        victims.sort();
        victims.truncate(8);
        let mut sent: BTreeMap<u64, (bool, String)> = BTreeMap::new();
        for i in 0..40u64 {
            let id = 1000 * (cycle as u64 + 1) + i;
            let (is_add, doc) = match victims.pop() {
                Some(v) if i % 5 == 4 => (false, v),
                other => {
                    victims.extend(other);
                    (true, format!("c{cycle}-{i}"))
                }
            };
            let (method, params) = if is_add {
                ("index/add", json!({"documents": [{"id": doc, "text": format!("cycle {cycle} write {i}")}]}))
            } else {
                ("index/delete", json!({"ids": [doc]}))
            };
            e.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
            sent.insert(id, (is_add, doc));
        }
        let kill_after = 8 + (cycle * 11) % 20;
        for _ in 0..kill_after {
            let Some(r) = e.recv_response(Duration::from_secs(60)) else { break };
            let Some((is_add, doc)) = r["id"].as_u64().and_then(|id| sent.remove(&id)) else { continue };
            assert!(r.get("result").is_some(), "cycle {cycle}: {r}");
            if is_add {
                adds += 1;
                live.insert(doc);
            } else {
                deletes += 1;
                live.remove(&doc);
                gone.insert(doc);
            }
        }
        kill9(&mut e);
        // An unanswered delete may or may not have happened: that id is no longer checked.
        for (is_add, doc) in sent.into_values() {
            if !is_add {
                live.remove(&doc);
            }
        }
    }
    eprintln!("rcp-dense kill -9 loop: {cycles} cycles, {adds} acknowledged adds and {deletes} deletes verified");
}

/// `repair` takes the lock `serve` holds: beside a live server it refuses and changes nothing,
/// so the server's later writes do not go to a log that repair replaced (they were lost:
/// 10 acknowledged, 0 present after a restart). Once the server is gone it repairs.
#[test]
fn repair_beside_a_live_server_is_refused_and_no_acknowledged_write_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8");
    let mut e = serve(dir.path());
    let add = |e: &mut Engine, i: usize| {
        let r = e
            .ok("index/add", json!({"documents": [{"id": format!("w{i}"), "text": format!("wal record number {i}")}]}));
        assert_eq!(r["ids"], json!([format!("w{i}")]));
    };
    for i in 0..5 {
        add(&mut e, i);
    }
    // Damage the log under the live server (stray bytes after its last record): what a repair
    // would cut, replacing the file.
    let wal = dir.path().join("wal.log");
    let mut bytes = std::fs::read(&wal).expect("wal");
    bytes.extend_from_slice(b"garbage");
    std::fs::write(&wal, &bytes).expect("write");

    let out = run(&["repair", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "repair ran beside a live server: {stderr}");
    assert!(stderr.contains("in use") && stderr.contains("stop it first"), "{stderr}");
    assert_eq!(std::fs::read(&wal).expect("wal"), bytes, "a refused repair changes nothing");

    for i in 5..15 {
        add(&mut e, i);
    }
    kill9(&mut e);
    let out = run(&["repair", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("kept 15 records"), "{stderr}");
    let ids = present(dir.path());
    assert_eq!(ids.len(), 15, "every acknowledged write, before and after the refused repair: {ids:?}");
}

/// An unreadable `manifest.json` is refused by `serve` (naming the file and `repair`), and
/// `repair` sets it aside and rebuilds it: never "nothing changed" with the directory still
/// unservable.
#[test]
fn an_unreadable_manifest_is_set_aside_and_rebuilt_by_repair() {
    let (_root, data) = snapshot_and_log();
    let d = data.to_str().expect("utf-8");
    std::fs::write(data.join("manifest.json"), b"{\"format\": 1, \"ident").expect("truncate manifest");

    let out = run(&["serve", "--fetch-model", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served an unreadable manifest: {stderr}");
    assert!(stderr.contains("manifest.json") && stderr.contains("repair"), "{stderr}");

    let out = run(&["repair", "--data-dir", d]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("nothing changed"), "{stderr}");
    assert!(stderr.contains("set aside") && stderr.contains("manifest.json rebuilt"), "{stderr}");
    let ids = present(&data);
    assert_eq!(ids.len(), 12 + DOCS, "the snapshot's 12 documents and every logged write: {ids:?}");
}
