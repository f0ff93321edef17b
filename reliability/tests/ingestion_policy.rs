//! One ingestion policy for every engine and every path (issue 28, item 2): the same 20-line
//! corpus, one line of which is not JSON and one whose `meta.year` is `"nineteen"` (declared
//! `year:int`), goes through `rcp-bm25 index`, `rcp-dense index`, `rcp-pg index` and
//! `rcpctl index add` into each engine over the wire. Every path indexes the same 18 documents,
//! names the same two lines as `FILE:LINE: ...` and exits 1; with `--strict` every `index`
//! command writes nothing and exits 1.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::pg::PgCluster;
use rcp_testkit::{Engine, workspace_bin};
use serde_json::{Value, json};

/// The line that is not JSON and the line whose `year` is a word.
const BAD_LINES: [usize; 2] = [7, 13];

/// Writes the corpus into `dir`; its path.
fn corpus(dir: &Path) -> PathBuf {
    let lines: Vec<String> = (1..=20)
        .map(|i| match i {
            7 => r#"{"_id": "d7", "text": "a line cut short"#.to_owned(),
            13 => json!({"_id": "d13", "title": "Doc 13", "text": "wing lift number 13", "year": "nineteen"}).to_string(),
            i => json!({"_id": format!("d{i}"), "title": format!("Doc {i}"), "text": format!("wing lift number {i}"), "year": 1950 + i})
                .to_string(),
        })
        .collect();
    let path = dir.join("mine.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write corpus");
    path
}

/// The 18 ids every path must hold.
fn expected_ids() -> BTreeSet<String> {
    (1..=20).filter(|i| !BAD_LINES.contains(i)).map(|i| format!("d{i}")).collect()
}

/// Runs `bin args` to completion (stdin closed) with `env`.
fn run(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "{} {args:?} did not exit", bin.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The exit code and the lines of `corpus` that `out`'s stderr names (`FILE:LINE: ...`, after
/// the program's name when it ends the run).
fn outcome(out: &Output, corpus: &Path) -> (Option<i32>, BTreeSet<usize>) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let prefix = format!("{}:", corpus.display());
    let named = stderr
        .lines()
        .filter_map(|l| l.find(&prefix).map(|at| &l[at + prefix.len()..]))
        .filter_map(|rest| rest.split_once(':').and_then(|(n, _)| n.parse().ok()))
        .collect();
    (out.status.code(), named)
}

/// The ids `engine` holds among documents matching "wing lift", all with `year >= 0`.
fn held(mut engine: Engine) -> BTreeSet<String> {
    engine.initialize();
    let r = engine.ok(
        "retrieve",
        json!({"query": "wing lift number", "k": 50, "filter": {"field": "year", "op": "gte", "value": 0}}),
    );
    r["hits"].as_array().expect("hits").iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect()
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The shared PostgreSQL cluster, or `None` (after saying why) when python3, which provisions
/// it, is absent.
fn cluster() -> Option<&'static PgCluster> {
    match PgCluster::shared() {
        Ok(c) => Some(c),
        Err(e) if Command::new("python3").arg("--version").output().is_err() => {
            eprintln!("SKIP rcp-pg: PostgreSQL cannot be provisioned without python3 ({e})");
            None
        }
        Err(e) => panic!("PostgreSQL could not be started: {e}"),
    }
}

/// Asserts one path's outcome: exit 1, the two bad lines named, and `ids` held.
fn assert_policy(path: &str, out: &Output, corpus: &Path, ids: BTreeSet<String>) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (code, named) = outcome(out, corpus);
    assert_eq!(code, Some(1), "{path}: exit code\n{stderr}");
    assert_eq!(named, BAD_LINES.into_iter().collect::<BTreeSet<_>>(), "{path}: lines named\n{stderr}");
    assert!(
        stderr.contains(&format!("{}:13: d13: meta.year: field 'year' is int", corpus.display())),
        "{path}: the wrong-typed value is named as FILE:LINE: ID: FIELD: REASON\n{stderr}"
    );
    assert_eq!(ids, expected_ids(), "{path}: documents held\n{stderr}");
}

#[test]
fn every_path_indexes_the_same_documents_names_the_same_lines_and_exits_1() {
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(root.path());
    let c = utf8(&corpus);

    let bm25 = workspace_bin("rcp-bm25", "rcp-bm25");
    let data = root.path().join("bm25");
    let out = run(&bm25, &["index", "--data-dir", utf8(&data), "--field", "year:int", c], &[]);
    assert_policy("rcp-bm25 index", &out, &corpus, held(Engine::spawn(&bm25, &["serve", "--data-dir", utf8(&data)])));

    let dense = workspace_bin("rcp-dense", "rcp-dense");
    let data = root.path().join("dense");
    let out = run(&dense, &["index", "--fetch-model", "--data-dir", utf8(&data), "--field", "year:int", c], &[]);
    let served = Engine::spawn(&dense, &["serve", "--fetch-model", "--data-dir", utf8(&data)]);
    assert_policy("rcp-dense index", &out, &corpus, held(served));

    let rcp = workspace_bin("rcp-client", "rcpctl");
    for (engine, bin) in [("rcp-bm25", &bm25), ("rcp-dense", &dense)] {
        let data = root.path().join(format!("{engine}-add"));
        let fetch = if engine == "rcp-dense" { " --fetch-model" } else { "" };
        let stdio = format!("{} serve{fetch} --create --data-dir {} --field year:int", bin.display(), utf8(&data));
        let out = run(&rcp, &["index", "add", "--stdio", &stdio, c], &[]);
        let mut args = vec!["serve", "--data-dir", utf8(&data)];
        args.extend(fetch.split_whitespace());
        let served = Engine::spawn(bin, &args);
        assert_policy(&format!("rcpctl index add into {engine}"), &out, &corpus, held(served));
    }

    let Some(cluster) = cluster() else { return };
    let pg = workspace_bin("rcp-pg", "rcp-pg");
    let url = cluster.create_database("ingest").expect("create database");
    let out = run(&pg, &["index", "--fetch-model", "--database-url", &url, "--field", "year:int", c], &[]);
    let served = Engine::spawn(&pg, &["serve", "--fetch-model", "--database-url", &url]);
    assert_policy("rcp-pg index", &out, &corpus, held(served));

    let url = cluster.create_database("ingest_add").expect("create database");
    let stdio = format!("{} serve --fetch-model --database-url {url} --field year:int", pg.display());
    let out = run(&rcp, &["index", "add", "--stdio", &stdio, c], &[]);
    let served = Engine::spawn(&pg, &["serve", "--fetch-model", "--database-url", &url]);
    assert_policy("rcpctl index add into rcp-pg", &out, &corpus, held(served));
}

#[test]
fn with_strict_every_index_command_writes_nothing_and_exits_1() {
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(root.path());
    let c = utf8(&corpus);
    let check = |path: &str, out: &Output| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (code, named) = outcome(out, &corpus);
        assert_eq!(code, Some(1), "{path} --strict: exit code\n{stderr}");
        assert_eq!(named, BTreeSet::from([7]), "{path} --strict: stops at the first bad line\n{stderr}");
        assert!(stderr.contains("nothing of this run was written"), "{path}\n{stderr}");
    };
    for (engine, fetch) in [("rcp-bm25", None), ("rcp-dense", Some("--fetch-model"))] {
        let bin = workspace_bin(engine, engine);
        let data = root.path().join(engine);
        let mut args = vec!["index", "--strict", "--data-dir", utf8(&data), "--field", "year:int", c];
        args.extend(fetch);
        let out = run(&bin, &args, &[]);
        check(&format!("{engine} index"), &out);
        assert!(!data.exists(), "{engine} index --strict left {} behind", data.display());
    }

    let Some(cluster) = cluster() else { return };
    let pg = workspace_bin("rcp-pg", "rcp-pg");
    let url = cluster.create_database("ingest_strict").expect("create database");
    let out = run(&pg, &["index", "--strict", "--fetch-model", "--database-url", &url, "--field", "year:int", c], &[]);
    check("rcp-pg index", &out);
    let mut served = Engine::spawn(&pg, &["serve", "--fetch-model", "--database-url", &url]);
    served.initialize();
    let r = served.ok("retrieve", json!({"query": "wing lift number", "k": 50}));
    assert_eq!(r["hits"], Value::Array(Vec::new()), "rcp-pg index --strict wrote documents");
}
