//! `tiny_engine --help` prints help and exits instead of serving.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn help_prints_and_exits() {
    let bin = rcp_testkit::example_bin("tiny_engine");
    // stdin stays open: an engine that served instead would never exit on its own.
    let mut child = Command::new(bin)
        .arg("--help")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tiny_engine");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    assert!(status.is_some_and(|s| s.success()), "--help served instead of exiting: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Usage: tiny_engine") && text.contains("over stdio"), "{text}");
}
