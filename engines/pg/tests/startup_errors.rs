//! What `rcp-pg` says when it cannot use the database it was given: PostgreSQL's own message
//! (not the driver's `db error`), a hint, and, for a permanent refusal, no retrying.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{bin, cluster, model_dir};

/// `rcp-pg serve --database-url URL --connect-timeout-ms 20000`: how long it took to exit, and its
/// stderr.
fn serve_fails(url: &str) -> (Duration, String) {
    let dir = model_dir();
    let start = Instant::now();
    let out = Command::new(bin())
        .args(["serve", "--database-url", url, "--connect-timeout-ms", "20000"])
        .env("RCP_MODEL_DIR", &dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rcp-pg");
    assert!(!out.status.success(), "rcp-pg served a database it cannot use");
    (start.elapsed(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_missing_database_is_named_in_postgresqls_words_at_once() {
    let Some(cluster) = cluster() else { return };
    let (took, stderr) = serve_fails(&cluster.url("nosuchdb"));
    assert!(stderr.contains(r#"database "nosuchdb" does not exist"#), "PostgreSQL's message:\n{stderr}");
    assert!(stderr.contains("3D000") && stderr.contains("CREATE DATABASE"), "the code and a hint:\n{stderr}");
    assert!(!stderr.contains("retrying"), "a missing database is not an outage:\n{stderr}");
    assert!(took < Duration::from_secs(15), "failed at once, not after --connect-timeout ({took:?})");
}

#[test]
fn a_refused_connection_names_its_cause_and_says_it_retried() {
    if cluster().is_none() {
        return;
    }
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres?connect_timeout=2");
    let dir = model_dir();
    let out = Command::new(bin())
        // The former spelling of --connect-timeout-ms (seconds), kept as a hidden alias.
        .args(["serve", "--database-url", &url, "--connect-timeout", "1"])
        .env("RCP_MODEL_DIR", &dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rcp-pg");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Connection refused"), "the cause, not only the pool's words:\n{stderr}");
    assert!(stderr.contains("retrying for"), "the retries are announced:\n{stderr}");
    assert!(stderr.contains("is PostgreSQL running"), "a hint:\n{stderr}");
}
