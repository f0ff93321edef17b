//! The `index` command: progress, summary, schema persistence and bad input.

mod common;

use std::process::Command;

use common::{bin, ids, serve_dir, tempdir};
use serde_json::json;

fn index(args: &[&str]) -> std::process::Output {
    Command::new(bin()).arg("index").args(args).output().expect("run index")
}

#[test]
fn help_explains_the_commands() {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("index") && text.contains("serve"), "{text}");
    let out = Command::new(bin()).args(["index", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--field") && text.contains("--strict") && text.contains("--trust"), "{text}");
    let out = Command::new(bin()).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--data-dir") && text.contains("--http") && text.contains("--stdio"), "{text}");
}

#[test]
fn bad_lines_are_reported_and_skipped_or_abort_with_strict() {
    let dir = tempdir();
    let corpus = dir.path().join("c.jsonl");
    std::fs::write(
        &corpus,
        b"{\"_id\":\"a\",\"title\":\"Alpha\",\"text\":\"lemon tart\",\"year\":2001,\"lang\":\"en\"}\n\
          {\"_id\":\"b\",\"text\":\"lemon \xff curd\"}\n\
          {\"_id\":\"c\",\"text\":\"lemon cake\",\"year\":\"old\"}\n\
          {\"text\":\"lemon sorbet without id\"}\n\
          not json\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let c = corpus.to_str().unwrap();

    // --strict: the first bad line aborts and nothing is committed.
    let out = index(&["--data-dir", d, "--field", "year:int", "--field", "lang:keyword", "--strict", c]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("c.jsonl:2") && err.contains("UTF-8"), "{err}");

    // The aborted run left nothing behind: the directory does not exist (issue #12).
    assert!(!data.exists(), "an aborted --strict run left {} behind", data.display());

    // Default: each bad line is named (file:line) and skipped; the rest is indexed, and the
    // exit code (1) says lines were left out. The fields are declared again: the aborted run
    // created no index to remember them.
    let out = index(&["--data-dir", d, "--field", "year:int", "--field", "lang:keyword", "--trust", "untrusted", c]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("c.jsonl:2"), "{err}");
    assert!(err.contains("meta.year"), "{err}");
    assert!(err.contains("c.jsonl:5"), "{err}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("indexed 2 documents (3 skipped)"), "{summary}");

    // Changing the field schema of an existing index is refused.
    let out = index(&["--data-dir", d, "--field", "year:float", c]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot change"));

    // The same schema from a fields file is accepted (the same 3 lines skipped: exit 1, with
    // the summary); a different one is refused.
    let fields = dir.path().join("fields.json");
    std::fs::write(&fields, r#"{"year": "int", "lang": "keyword"}"#).unwrap();
    let out = index(&["--data-dir", d, "--fields", fields.to_str().unwrap(), "--trust", "untrusted", c]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("indexed 2 documents (3 skipped)"));
    std::fs::write(&fields, r#"{"year": "geo"}"#).unwrap();
    let out = index(&["--data-dir", d, "--fields", fields.to_str().unwrap(), c]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not supported"));

    // serve reads the persisted schema and the stored trust level.
    let mut e = serve_dir(&data, &[]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["filter"]["fields"], json!({"lang": "keyword", "year": "int"}));
    // While it serves, the index is locked for writing by that process.
    let out = index(&["--data-dir", d, c]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another process"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r =
        e.ok("retrieve", json!({"query": "lemon", "k": 10, "filter": {"field": "year", "op": "eq", "value": 2001}}));
    assert_eq!(ids(&r), ["a"]);
    assert_eq!(r["hits"][0]["trust"]["level"], "untrusted");
    assert_eq!(r["hits"][0]["citation"]["title"], "Alpha");
    let all = e.ok("retrieve", json!({"query": "lemon", "k": 10}));
    // Ids are upserted; the id-less document got a fresh id on each of the two runs.
    assert_eq!(ids(&all).len(), 3);
}
