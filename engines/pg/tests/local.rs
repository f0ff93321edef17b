//! `rcp-pg postgres start|status|stop` through the real binary: from an empty directory to an
//! indexed, searchable database, stopped, started again on the same data, and the errors that
//! say what to do (a port in use, a directory that is not a cluster, another version's cluster).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{bin, ids, model_dir, serve};
use serde_json::json;

/// `rcp-pg postgres ARGS...`.
fn postgres(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("postgres")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rcp-pg postgres")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// PostgreSQL is provisioned from PyPI with pip; without python3 the test says so and skips.
fn provisioned() -> bool {
    if Command::new("python3").arg("--version").output().is_err() && std::env::var_os("RCP_PG_BIN").is_none() {
        eprintln!("SKIP: PostgreSQL cannot be provisioned without python3");
        return false;
    }
    true
}

/// A temporary directory the server's user (`nobody` when the tests run as root) can reach.
fn reachable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

fn index_three_docs(url: &str, dir: &Path) {
    let corpus = dir.join("three.jsonl");
    let lines = [
        json!({"_id": "wing", "title": "Wings", "text": "The wing produces lift.", "year": 1960}),
        json!({"_id": "flow", "title": "Flow", "text": "Boundary layer flow over a plate.", "year": 1975}),
        json!({"_id": "bread", "title": "Bread", "text": "Sourdough bread rises slowly.", "year": 2021}),
    ];
    std::fs::write(&corpus, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write corpus");
    let model = model_dir();
    let out = Command::new(bin())
        .args(["index", "--database-url", url])
        .arg(&corpus)
        .env("RCP_MODEL_DIR", &model)
        .output()
        .expect("run rcp-pg index");
    assert!(out.status.success(), "rcp-pg index into the local cluster:\n{}", stderr(&out));
}

#[test]
fn from_an_empty_directory_to_a_searchable_database_stopped_and_started_again() {
    if !provisioned() {
        return;
    }
    let tmp = reachable_tempdir();
    let data = tmp.path().join("pg");
    let data_arg = data.to_str().expect("utf-8 path");
    let port = rcp_testkit::pg::free_port().expect("free port");
    let want_url = format!("postgres://postgres@127.0.0.1:{port}/rcp");

    let out = postgres(&["start", "--data-dir", data_arg, "--port", &port.to_string()]);
    assert!(out.status.success(), "start:\n{}", stderr(&out));
    assert_eq!(stdout(&out), want_url, "stdout is the DATABASE_URL alone; stderr:\n{}", stderr(&out));
    let stop_on_exit = StopOnDrop(data.clone());

    index_three_docs(&want_url, tmp.path());
    let mut engine = serve(&want_url, &["--no-migrate"]);
    let hits = engine.ok("retrieve", json!({"query": "wing lift", "k": 3, "mode": "sparse"}));
    assert_eq!(ids(&hits).first().map(String::as_str), Some("wing"), "{hits}");
    drop(engine);

    let status = postgres(&["status", "--data-dir", data_arg]);
    assert!(status.status.success() && stdout(&status) == want_url, "status of a running cluster: {status:?}");

    let out = postgres(&["stop", "--data-dir", data_arg]);
    assert!(out.status.success() && stderr(&out).contains("stopped"), "stop:\n{}", stderr(&out));
    let status = postgres(&["status", "--data-dir", data_arg]);
    assert_eq!(status.status.code(), Some(1), "status of a stopped cluster exits 1");
    assert!(stderr(&status).contains("is stopped") && stderr(&status).contains("postgres start"), "{status:?}");

    // Started again without a port: the same data directory, the port it remembers, the
    // documents indexed before the stop.
    let out = postgres(&["start", "--data-dir", data_arg]);
    assert!(out.status.success(), "start again:\n{}", stderr(&out));
    assert_eq!(stdout(&out), want_url, "the remembered port; stderr:\n{}", stderr(&out));
    assert!(!stderr(&out).contains("initdb"), "the existing cluster is reused:\n{}", stderr(&out));
    let mut engine = serve(&want_url, &["--no-migrate"]);
    let hits = engine.ok("retrieve", json!({"query": "sourdough bread", "k": 3, "mode": "sparse"}));
    assert_eq!(ids(&hits).first().map(String::as_str), Some("bread"), "data kept across the restart: {hits}");
    drop(engine);
    drop(stop_on_exit);
    assert!(stderr(&postgres(&["stop", "--data-dir", data_arg])).contains("nothing to stop"));
}

#[test]
fn errors_say_what_to_do() {
    if !provisioned() {
        return;
    }
    let tmp = reachable_tempdir();
    // A port something listens on.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = busy.local_addr().expect("addr").port().to_string();
    let data = tmp.path().join("pg");
    let out = postgres(&["start", "--data-dir", data.to_str().expect("utf-8"), "--port", &port]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("is in use") && stderr(&out).contains("--port"), "{}", stderr(&out));
    assert!(!data.join("PG_VERSION").exists(), "nothing was created for a start that cannot succeed");

    // A directory holding something else.
    let other = tmp.path().join("notes");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("todo.txt"), "mine").expect("write");
    let out = postgres(&["start", "--data-dir", other.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("holds no PostgreSQL cluster") && stderr(&out).contains("new or empty"), "{out:?}");
    assert_eq!(std::fs::read_to_string(other.join("todo.txt")).ok().as_deref(), Some("mine"), "left untouched");

    // A cluster of another major version.
    let old = tmp.path().join("old");
    std::fs::create_dir(&old).expect("mkdir");
    std::fs::write(old.join("PG_VERSION"), "13\n").expect("write");
    let out = postgres(&["start", "--data-dir", old.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("PostgreSQL 13 cluster") && err.contains("PostgreSQL 16") && err.contains("RCP_PG_BIN"),
        "{err}"
    );

    // Status of a directory without a cluster provisions nothing and says how to make one.
    let out = postgres(&["status", "--data-dir", tmp.path().join("none").to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("holds no PostgreSQL cluster; create one with `rcp-pg postgres start"), "{out:?}");
}

/// Stops the cluster of a failed test.
struct StopOnDrop(std::path::PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = postgres(&["stop", "--data-dir", self.0.to_str().unwrap_or_default()]);
    }
}
