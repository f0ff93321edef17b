//! `rcp-bm25` at the edges (issue #12): kill -9 during pipelined writes, a corruption matrix,
//! a mistyped data directory, an aborted `index` run, and group commit of concurrent writes.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::{Engine, kill9, workspace_bin};
use serde_json::{Value, json};

fn bin() -> PathBuf {
    workspace_bin("rcp-bm25", "rcp-bm25")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rcp-reliability-bm25").tempdir().expect("tempdir")
}

/// `rcp-bm25 serve --data-dir DIR ARGS...`, initialised.
fn serve(dir: &Path, args: &[&str]) -> Engine {
    let mut all = vec!["serve", "--data-dir", dir.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let mut e = Engine::spawn(&bin(), &all);
    e.initialize();
    e
}

/// Runs `rcp-bm25 ARGS...` to completion with stdin closed (a `serve` that starts exits at EOF).
fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).stdin(Stdio::null()).output().expect("run rcp-bm25")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn ids(result: &Value) -> Vec<String> {
    result["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("id").to_owned()).collect()
}

/// Every file under `dir` with its content, to prove a refused directory was left untouched.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(contents(&path));
        } else if !path.to_string_lossy().ends_with(".lock") {
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// (a) kill -9 during pipelined writes and deletes

/// Requests pipelined per cycle (two documents per `index/add`).
const REQUESTS: usize = 120;

#[test]
fn kill_9_loop_keeps_every_acknowledged_write_and_delete() {
    let cycles: usize = std::env::var("RCP_KILL_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let dir = tempdir();
    // Acknowledged and still expected live / acknowledged deleted; plus ids whose fate is open
    // (a delete was sent but not answered before the kill).
    let mut live: HashSet<String> = HashSet::new();
    let mut gone: HashSet<String> = HashSet::new();
    let mut cycle_of: BTreeMap<String, usize> = BTreeMap::new();
    for cycle in 0..=cycles {
        let mut e =
            if cycle == 0 { serve(dir.path(), &["--create", "--field", "cycle:int"]) } else { serve(dir.path(), &[]) };
        check_state(&mut e, &live, &gone, &cycle_of, cycle);
        if cycle == cycles {
            eprintln!(
                "rcp-bm25 kill -9 loop: {cycles} cycles; {} acknowledged documents present and {} acknowledged deletes absent after the last restart",
                live.len(),
                gone.len()
            );
            break;
        }
        // Pipeline writes, with deletes of earlier acknowledged documents mixed in.
        let mut victims: Vec<String> = live.iter().filter(|id| id.ends_with("-a")).cloned().collect();
        victims.sort();
        victims.truncate(REQUESTS / 4);
        let mut sent = BTreeMap::new();
        for i in 0..REQUESTS {
            let frame = if i % 4 == 3 && !victims.is_empty() {
                let id = victims.pop().expect("a victim");
                sent.insert(i, ("delete", vec![id.clone()]));
                json!({"jsonrpc": "2.0", "id": i, "method": "index/delete", "params": {"ids": [id]}})
            } else {
                let pair = vec![format!("c{cycle}-{i}-a"), format!("c{cycle}-{i}-b")];
                let docs: Vec<Value> = pair
                    .iter()
                    .map(|id| json!({"id": id, "text": format!("durable record {id}"), "meta": {"cycle": cycle}}))
                    .collect();
                for id in &pair {
                    cycle_of.insert(id.clone(), cycle);
                }
                sent.insert(i, ("add", pair));
                json!({"jsonrpc": "2.0", "id": i, "method": "index/add", "params": {"documents": docs}})
            };
            e.send(&frame);
        }
        // Take a varying number of answers, then kill mid-stream.
        let kill_after = 10 + (cycle * 17) % 50;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut answered = 0;
        while answered < kill_after && Instant::now() < deadline {
            let Some(r) = e.recv_response(Duration::from_secs(20)) else { break };
            answered += 1;
            let Some(i) = r["id"].as_u64() else { continue };
            let Some((kind, docs)) = sent.remove(&(i as usize)) else { continue };
            assert!(r.get("result").is_some(), "request {i} failed: {r}");
            match kind {
                "add" => live.extend(docs),
                _ => {
                    assert_eq!(r["result"]["deleted"], json!(1), "delete of a live document: {r}");
                    for id in docs {
                        live.remove(&id);
                        gone.insert(id);
                    }
                }
            }
        }
        kill9(&mut e);
        assert!(answered >= kill_after, "cycle {cycle}: only {answered} answers before the deadline");
        // Unanswered deletes may or may not have happened: their ids are no longer checked.
        for (kind, docs) in sent.into_values() {
            if kind == "delete" {
                for id in docs {
                    live.remove(&id);
                }
            }
        }
    }
}

/// Asserts every acknowledged write is present and every acknowledged delete absent.
fn check_state(
    e: &mut Engine,
    live: &HashSet<String>,
    gone: &HashSet<String>,
    cycle_of: &BTreeMap<String, usize>,
    cycles: usize,
) {
    let mut present: HashSet<String> = HashSet::new();
    for c in 0..cycles {
        let filter = json!({"field": "cycle", "op": "eq", "value": c});
        let r = e.ok("retrieve", json!({"query": "durable record", "k": 1000, "filter": filter}));
        present.extend(ids(&r));
    }
    let lost: Vec<&String> = live.iter().filter(|id| !present.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged writes lost after kill -9: {lost:?}");
    let back: Vec<&String> = gone.iter().filter(|id| present.contains(*id)).collect();
    assert!(back.is_empty(), "acknowledged deletes undone after kill -9: {back:?}");
    // Every present document was written by this test, in the cycle its metadata says.
    assert!(present.iter().all(|id| cycle_of.contains_key(id)), "unknown documents: {present:?}");
}

// ---------------------------------------------------------------------------------------------
// (b) corruption matrix

/// A data directory built by two `index` runs (25 documents, two or more segments).
fn built_index(root: &Path) -> PathBuf {
    let corpus = root.join("corpus.jsonl");
    let line = |i: usize| {
        format!("{{\"_id\":\"d{i}\",\"title\":\"Doc {i}\",\"text\":\"wing flutter record {i}\",\"lang\":\"en\"}}\n")
    };
    std::fs::write(&corpus, (0..20).map(line).collect::<String>()).unwrap();
    let more = root.join("more.jsonl");
    std::fs::write(&more, (20..25).map(line).collect::<String>()).unwrap();
    let data = root.join("idx");
    let d = data.to_str().unwrap();
    for c in [&corpus, &more] {
        let out = run(&["index", "--data-dir", d, "--field", "lang:keyword", c.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
    }
    data
}

/// The per-segment live counts `verify` reports, by segment id.
fn segments(data: &Path) -> BTreeMap<String, u64> {
    let out = run(&["verify", "--data-dir", data.to_str().unwrap()]);
    let report = text(&out);
    report
        .lines()
        .filter_map(|l| l.trim().strip_prefix("segment "))
        .filter_map(|l| {
            let (id, rest) = l.split_once(": ")?;
            Some((id.to_owned(), rest.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

fn served_docs(data: &Path) -> usize {
    let mut e = serve(data, &[]);
    ids(&e.ok("retrieve", json!({"query": "wing flutter record", "k": 100}))).len()
}

enum Damage {
    Flip,
    Truncate,
    Zero,
}

fn damage(path: &Path, how: &Damage) {
    let mut bytes = std::fs::read(path).unwrap();
    match how {
        Damage::Flip => {
            let at = bytes.len() / 3;
            for b in &mut bytes[at..at + 4] {
                *b ^= 0x5A;
            }
        }
        Damage::Truncate => bytes.truncate(bytes.len() / 2),
        Damage::Zero => bytes.iter_mut().for_each(|b| *b = 0),
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn damaged_segment_files_are_refused_then_repaired_with_an_exact_report() {
    let cases = [
        ("term", Damage::Flip),
        ("idx", Damage::Flip),
        ("store", Damage::Flip),
        ("store", Damage::Truncate),
        ("fast", Damage::Zero),
        ("pos", Damage::Truncate),
    ];
    for (ext, how) in &cases {
        let root = tempdir();
        let data = built_index(root.path());
        let before = segments(&data);
        assert_eq!(before.values().sum::<u64>(), 25);
        let (victim, victim_docs) = before.iter().next().map(|(id, n)| (id.clone(), *n)).unwrap();
        let path = data.join("index").join(format!("{victim}.{ext}"));
        damage(&path, how);
        let untouched = contents(&data);

        // serve refuses, naming the file; nothing is changed.
        let out = run(&["serve", "--data-dir", data.to_str().unwrap()]);
        assert!(!out.status.success(), "{ext}: a damaged index was served:\n{}", text(&out));
        let file = format!("{victim}.{ext}");
        assert!(text(&out).contains(&file), "{ext}: the refusal does not name {file}:\n{}", text(&out));
        assert_eq!(contents(&data), untouched, "{ext}: the refusal changed files");

        // verify agrees (exit 1), repair keeps exactly the other segments and says so.
        let out = run(&["verify", "--data-dir", data.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains(&file), "{}", text(&out));
        let out = run(&["repair", "--data-dir", data.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        let report = text(&out);
        let kept = 25 - victim_docs;
        assert!(report.contains(&format!("documents: 25 before, {kept} kept, {victim_docs} lost")), "{ext}: {report}");
        assert!(report.contains(&format!("dropped segment {victim}: {victim_docs} documents")), "{report}");
        let backup = std::fs::read_dir(root.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("idx.bak-")))
            .expect("a backup directory");
        let original: BTreeMap<PathBuf, Vec<u8>> =
            untouched.into_iter().map(|(p, b)| (backup.join(p.strip_prefix(&data).unwrap()), b)).collect();
        assert_eq!(contents(&backup), original, "the backup is the original, byte for byte");
        assert_eq!(served_docs(&data), kept as usize, "{ext}: the repaired index serves what repair reported");
        assert_eq!(run(&["verify", "--data-dir", data.to_str().unwrap()]).status.code(), Some(0));
    }
}

#[test]
fn a_missing_meta_json_or_configuration_is_refused_and_not_repaired_silently() {
    for (file, named) in [("index/meta.json", "meta.json"), ("rcp-bm25.json", "rcp-bm25.json")] {
        let root = tempdir();
        let data = built_index(root.path());
        std::fs::remove_file(data.join(file)).unwrap();
        let untouched = contents(&data);
        let d = data.to_str().unwrap();
        let out = run(&["serve", "--data-dir", d]);
        assert!(!out.status.success(), "{file} missing, yet served:\n{}", text(&out));
        assert!(text(&out).contains(named), "{}", text(&out));
        // Not even --create recreates over it.
        let out = run(&["serve", "--data-dir", d, "--create"]);
        assert!(!out.status.success(), "--create over a damaged index:\n{}", text(&out));
        let out = run(&["verify", "--data-dir", d]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let out = run(&["repair", "--data-dir", d]);
        assert!(!out.status.success() && text(&out).contains("nothing was changed"), "{}", text(&out));
        assert_eq!(contents(&data), untouched, "{file}: files changed");
    }
}

// ---------------------------------------------------------------------------------------------
// A mistyped data directory, an aborted index run

#[test]
fn a_missing_data_directory_is_an_error_unless_create_is_given() {
    let root = tempdir();
    let typo = root.path().join("idx-typo");
    let out = run(&["serve", "--data-dir", typo.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("does not exist") && text(&out).contains("--create"), "{}", text(&out));
    assert!(!typo.exists(), "serve created the mistyped directory");

    let mut e = serve(&typo, &["--create"]);
    e.ok("index/add", json!({"documents": [{"id": "x", "text": "created on purpose"}]}));
    drop(e);
    assert_eq!(run(&["verify", "--data-dir", typo.to_str().unwrap()]).status.code(), Some(0));
}

#[test]
fn an_aborted_index_run_leaves_no_index_behind() {
    let root = tempdir();
    let corpus = root.path().join("bad.jsonl");
    std::fs::write(&corpus, "{\"_id\":\"a\",\"text\":\"fine\"}\nnot json\n").unwrap();
    let data = root.path().join("idx");
    let out = run(&["index", "--strict", "--data-dir", data.to_str().unwrap(), corpus.to_str().unwrap()]);
    assert!(!out.status.success());
    let left: Vec<PathBuf> = std::fs::read_dir(root.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(left, vec![corpus.clone()], "an aborted run left files behind");
    let out = run(&["serve", "--data-dir", data.to_str().unwrap()]);
    assert!(!out.status.success(), "an aborted run left something servable:\n{}", text(&out));
}

// ---------------------------------------------------------------------------------------------
// Group commit

/// The opstamp of the current snapshot (the tail of `indexVersion`, `<uid>-<opstamp>`).
fn opstamp(e: &mut Engine) -> u64 {
    let r = e.ok("retrieve", json!({"query": "anything", "k": 1}));
    let token = r["indexVersion"].as_str().expect("indexVersion").to_owned();
    token.rsplit_once('-').and_then(|(_, n)| n.parse().ok()).expect("opstamp")
}

#[test]
fn pipelined_writes_share_commits_and_are_answered_only_when_committed() {
    const N: u64 = 150;
    let root = tempdir();
    // Built with `index` and served without flags, so the same test runs against older binaries.
    let corpus = root.path().join("seed.jsonl");
    std::fs::write(&corpus, "{\"_id\":\"seed\",\"text\":\"seed document\"}\n").unwrap();
    let data = root.path().join("idx");
    let out = run(&["index", "--data-dir", data.to_str().unwrap(), corpus.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let mut e = serve(&data, &[]);
    let start = opstamp(&mut e);
    for i in 0..N {
        let doc = json!({"id": format!("g{i}"), "text": format!("grouped write {i}")});
        e.send(&json!({"jsonrpc": "2.0", "id": i, "method": "index/add", "params": {"documents": [doc]}}));
    }
    let mut acked = 0;
    while acked < N {
        let r = e.recv_response(Duration::from_secs(60)).expect("an answer");
        assert!(r.get("result").is_some(), "{r}");
        acked += 1;
    }
    // tantivy stamps every upsert twice (delete of the old version, add) and every commit
    // once, so the opstamp advance tells how many commits the N writes took.
    let commits = opstamp(&mut e) - start - 2 * N;
    assert!(commits < N / 2, "{N} pipelined writes took {commits} commits: they were not grouped");
    // Acknowledged means committed: a kill now loses nothing.
    kill9(&mut e);
    let mut e = serve(&data, &[]);
    let r = e.ok("retrieve", json!({"query": "grouped write", "k": 1000}));
    assert_eq!(ids(&r).len() as u64, N);
}
