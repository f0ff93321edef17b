//! Durable feedback on a served data directory: integrity signals past the threshold quarantine
//! a document from later results, across a hard kill and restart; `quarantine list|release`
//! shows and undoes it.

mod common;

use std::process::Command;

use common::{add, bin, ids, serve_dir, tempdir};
use rcp_testkit::kill9;
use serde_json::{Value, json};

fn lemons(e: &mut rcp_testkit::Engine) -> Vec<String> {
    ids(&e.ok("retrieve", json!({"query": "lemon", "k": 5})))
}

fn quarantine(args: &[&str]) -> (bool, String) {
    let out = Command::new(bin()).arg("quarantine").args(args).output().expect("run quarantine");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn poisoned_documents_are_quarantined_durably_and_released_by_the_cli() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf-8");
    let mut e = serve_dir(&data, &["--create", "--quarantine-threshold", "2"]);
    add(&mut e, &[("a", "lemon tart", Value::Null), ("b", "lemon curd", Value::Null)]);
    let mut before = lemons(&mut e);
    before.sort();
    assert_eq!(before, ["a", "b"]);

    let signal = json!({"hitId": "a", "poisonSuspected": true});
    assert_eq!(e.ok("feedback", json!({"signals": [signal]}))["accepted"], 1);
    assert_eq!(lemons(&mut e).len(), 2, "one signal is under the threshold");
    assert_eq!(e.ok("feedback", json!({"signals": [signal, {"hitId": "b", "used": true}]}))["accepted"], 2);
    assert_eq!(lemons(&mut e), ["b"]);
    let bad = e.err("feedback", json!({"signals": [{"hitId": "a", "reward": 2}]}));
    assert_eq!(bad["code"], -32602, "{bad}");

    // Acknowledged means on disk: a hard kill keeps it.
    kill9(&mut e);
    let (ok, listed) = quarantine(&["list", "--data-dir", d]);
    assert!(ok && listed.starts_with("a\t2"), "{listed}");
    let mut e = serve_dir(&data, &["--quarantine-threshold", "2"]);
    assert_eq!(lemons(&mut e), ["b"]);

    // Release needs the log: refused while the server holds it, done once it is stopped.
    let (ok, why) = quarantine(&["release", "a", "--data-dir", d]);
    assert!(!ok && why.contains("in use"), "{why}");
    kill9(&mut e);
    let (ok, said) = quarantine(&["release", "a", "--data-dir", d]);
    assert!(ok, "{said}");
    let mut e = serve_dir(&data, &[]);
    assert_eq!(lemons(&mut e).len(), 2, "released");
    kill9(&mut e);
}
