//! `hit.trust` (§15.2): the operator's `--trust` for a corpus `rcp-pg index` loads and
//! `--added-trust` for `index/add` writes (never `trusted`), stored with each document so
//! every hit carries it, across restarts and in both units.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{bin, database, model_dir, serve};
use rcp_testkit::Engine;
use serde_json::{Value, json};

/// `rcp-pg index --database-url URL ARGS... CORPUS` with one document, which must succeed.
fn index(url: &str, dir: &Path, id: &str, args: &[&str]) {
    let corpus = dir.join(format!("{id}.jsonl"));
    let line = json!({"_id": id, "text": format!("A brass lantern described by the {id} source.")});
    std::fs::write(&corpus, format!("{line}\n")).expect("write corpus");
    let out = Command::new(bin())
        .args(["index", "--database-url", url])
        .args(args)
        .arg(&corpus)
        .env("RCP_MODEL_DIR", model_dir())
        .output()
        .expect("run rcp-pg index");
    assert!(out.status.success(), "rcp-pg index {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `trust.level` of every hit for "lantern", by hit id, in `unit`.
fn levels(e: &mut Engine, unit: &str) -> BTreeMap<String, String> {
    let r = e.ok("retrieve", json!({"query": "brass lantern", "k": 20, "mode": "sparse", "unit": unit}));
    let hits = r["hits"].as_array().expect("hits");
    hits.iter()
        .map(|h| {
            let level = h["trust"]["level"].as_str().unwrap_or_else(|| panic!("hit without trust.level: {h}"));
            (h["id"].as_str().expect("id").to_owned(), level.to_owned())
        })
        .collect()
}

fn add(e: &mut Engine, id: &str, chunk: bool) -> Value {
    let text = format!("A brass lantern written by the {id} client.");
    e.ok("index/add", json!({"chunk": chunk, "documents": [{"id": id, "text": text}]}))
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(id, level)| ((*id).to_owned(), (*level).to_owned())).collect()
}

#[test]
fn hits_carry_the_trust_the_operator_set_for_their_document() {
    let Some(url) = database("trust") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    index(&url, dir.path(), "curated", &[]);
    index(&url, dir.path(), "scraped", &["--trust", "untrusted"]);

    // index/add: community by default, chunk hits carry their document's level.
    let mut e = serve(&url, &[]);
    add(&mut e, "user", false);
    add(&mut e, "long", true);
    let want =
        expect(&[("curated", "trusted"), ("scraped", "untrusted"), ("user", "community"), ("long", "community")]);
    assert_eq!(levels(&mut e, "document"), want);
    let chunks = levels(&mut e, "chunk");
    assert_eq!(chunks.get("long#0").map(String::as_str), Some("community"), "{chunks:?}");
    assert_eq!(chunks.get("curated").map(String::as_str), Some("trusted"), "{chunks:?}");
    drop(e);

    // --added-trust trusted is lowered to community; the levels survive the restart.
    let mut e = serve(&url, &["--added-trust", "trusted"]);
    add(&mut e, "claimed", false);
    let mut want = want;
    want.insert("claimed".into(), "community".into());
    assert_eq!(levels(&mut e, "document"), want);
    drop(e);

    // A write sets the level again, even of unchanged text.
    let mut e = serve(&url, &["--added-trust", "untrusted"]);
    e.ok(
        "index/add",
        json!({"documents": [{"id": "curated", "text": "A brass lantern described by the curated source."}]}),
    );
    want.insert("curated".into(), "untrusted".into());
    assert_eq!(levels(&mut e, "document"), want);

    let out = Command::new(bin())
        .args(["serve", "--database-url", &url, "--added-trust", "sure"])
        .output()
        .expect("run rcp-pg serve");
    assert_eq!(out.status.code(), Some(2), "an unknown level is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("community"), "the levels are listed");
}
