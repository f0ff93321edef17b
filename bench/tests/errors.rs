//! The benchmark binaries report a failure as `NAME: WHAT WAS BEING DONE: CAUSE` on stderr
//! (each cause once) and exit non-zero: 1 for a failed run, 2 for a usage error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `bin` with `args` (and `env`), returning its output once it exits.
fn run(bin: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

/// The one line the binary printed on stderr, after checking the exit status.
fn failure(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    stderr.trim_end().to_owned()
}

/// A directory under the system's temp dir that does not exist (and is never created).
fn missing_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rcp-bench-missing-{name}-{}", std::process::id()));
    assert!(!dir.exists());
    dir
}

/// A one-query, one-document collection in BEIR layout, removed when dropped.
struct TinyCollection(PathBuf);

impl TinyCollection {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rcp-bench-tiny-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("queries.jsonl"), "{\"_id\": \"q1\", \"text\": \"wing lift\"}\n").unwrap();
        std::fs::write(dir.join("qrels.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\n").unwrap();
        std::fs::write(dir.join("corpus.jsonl"), "{\"_id\": \"d1\", \"title\": \"t\", \"text\": \"wing lift\"}\n")
            .unwrap();
        Self(dir)
    }
}

impl Drop for TinyCollection {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_missing_collection_names_the_step_the_file_and_the_cause_once() {
    let dir = missing_dir("cranfield");
    let out = run(env!("CARGO_BIN_EXE_bm25_cranfield"), &["--cranfield", dir.to_str().unwrap()], &[]);
    let not_found = std::io::Error::from_raw_os_error(2).to_string(); // ENOENT
    assert_eq!(
        failure(&out, 1),
        format!("bm25_cranfield: load the Cranfield collection in {0}: {0}/queries.jsonl: {not_found}", dir.display())
    );
}

/// A "server" that reads its first line (so writing it cannot fail) and exits without answering.
const SILENT: &str = "quiet=sed -n q";

#[test]
fn a_server_that_exits_unanswered_is_reported_with_its_label_and_step() {
    let out = run(env!("CARGO_BIN_EXE_rtt"), &["--server", SILENT, "--placement", "free", "--n", "1"], &[]);
    assert_eq!(failure(&out, 1), "rtt: quiet: initialize: server closed stdout");
}

#[test]
fn a_failure_inside_the_shared_stdio_client_keeps_every_context() {
    let collection = TinyCollection::new("embed-rss");
    let out = run(
        env!("CARGO_BIN_EXE_embed_rss"),
        &["--server", SILENT, "--texts", "1", "--rounds", "1", "--repeat", "1"],
        &[("RCP_CRANFIELD", &collection.0)],
    );
    assert_eq!(
        failure(&out, 1),
        "embed_rss: server quiet: start \"sed\" \"-n\" \"q\": initialize: server closed stdout"
    );
}

#[test]
fn a_usage_error_exits_2_with_the_binary_s_name() {
    let out = run(env!("CARGO_BIN_EXE_stdio_throughput"), &["--server", ""], &[]);
    assert_eq!(failure(&out, 2), "stdio_throughput: empty --server spec \"\"");
    let out = run(env!("CARGO_BIN_EXE_stdio_throughput"), &["--server", "true", "--timeout", "0"], &[]);
    assert_eq!(failure(&out, 2), "stdio_throughput: --timeout must be a positive number of seconds");
}

#[test]
fn a_bad_flag_value_fails_before_any_work() {
    let out = run(env!("CARGO_BIN_EXE_load"), &["--mix", "1,1", "--server", "true"], &[]);
    assert_eq!(failure(&out, 1), "load: --mix takes four weights: retrieve k=10, retrieve k=100, index/add, ping");
}
