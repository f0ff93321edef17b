//! The operations surface of `rcp-pg serve --http`: `/readyz` follows the database.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcp_testkit::pg::PgCluster;

/// The status code of `GET path`, or `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let code = body.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body))
}

/// Polls `GET path` until its status is `want` (or panics after `within`).
fn wait_for(port: u16, path: &str, want: u16, within: Duration) -> String {
    let started = Instant::now();
    loop {
        if let Some((code, body)) = get(port, path)
            && code == want
        {
            return body;
        }
        assert!(started.elapsed() < within, "{path} never answered {want}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn readiness_follows_the_database() {
    if common::cluster().is_none() {
        return;
    }
    let own = PgCluster::start().expect("start a private cluster");
    let url = own.create_database("ops").expect("create database");
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let dir = common::model_dir();
    let _server = Killed(
        Command::new(common::bin())
            .args(["serve", "--database-url", &url, "--http", &format!("127.0.0.1:{port}")])
            .env("RCP_MODEL_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rcp-pg serve --http"),
    );
    wait_for(port, "/readyz", 200, Duration::from_secs(60));
    assert_eq!(get(port, "/healthz").map(|r| r.0), Some(200));
    own.stop().expect("stop the database");
    let body = wait_for(port, "/readyz", 503, Duration::from_secs(15));
    assert!(body.contains("database unreachable"), "{body}");
    // Alive all along: the process did not exit.
    assert_eq!(get(port, "/healthz").map(|r| r.0), Some(200));
    own.start_again().expect("restart the database");
    wait_for(port, "/readyz", 200, Duration::from_secs(15));
}
