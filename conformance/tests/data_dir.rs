//! A server that holds its data directory exclusively (`rcp-bm25 serve --data-dir DIR`: a second
//! process on the same directory exits) certifies: the suite never runs two processes of the
//! command at once, and its pagination check is bounded, so the corpus size does not matter.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use rcp_conformance::{Config, Level, Status, run};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("rcp-conformance-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 30 short documents, all matching the suite's broad query ("data", "search", "retrieval"), so
/// the pagination check sees several pages.
fn write_corpus(path: &Path) {
    let topics = ["flow", "pressure", "heat", "model", "system", "method"];
    let lines: Vec<String> = (0..30)
        .map(|i| {
            let topic = topics[i % topics.len()];
            let text = format!(
                "document {i} about {topic}: search data and retrieval results for the {topic} analysis, part {i}"
            );
            serde_json::json!({"_id": format!("d{i}"), "title": format!("{topic} note {i}"), "text": text}).to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").expect("write corpus");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_engine_certifies_over_stdio() {
    let Some(bm25) = common::workspace_bin("rcp-bm25", "rcp-bm25") else {
        eprintln!("SKIPPED: rcp-bm25 is not built and could not be built (cargo build -p rcp-bm25)");
        return;
    };
    let scratch = Scratch::new("bm25");
    let corpus = scratch.0.join("corpus.jsonl");
    let data = scratch.0.join("data");
    write_corpus(&corpus);
    let out = Command::new(&bm25).arg("index").arg("--data-dir").arg(&data).arg(&corpus).output().expect("run index");
    assert!(out.status.success(), "rcp-bm25 index failed: {}", String::from_utf8_lossy(&out.stderr));

    let args = ["serve".to_owned(), "--data-dir".to_owned(), data.to_string_lossy().into_owned()];
    let cfg = Config::stdio(bm25.to_string_lossy(), args).with_schema(common::schema());
    let report = run(&cfg).await.expect("the suite runs");
    let text = report.render_text();
    println!("{text}");
    assert_eq!(common::failed(&report), Vec::<&str>::new(), "{text}");
    assert!(report.certified() >= Some(Level::L1), "{text}");
    assert_eq!(report.exit_code(), 0, "{text}");
    // The fresh-process checks really ran (a second process on the directory would have exited).
    for id in ["lifecycle.pre-init-gated", "initialize.retry", "initialize.repeat-rejected", "initialize.minimal"] {
        assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{id}\n{text}");
    }
    if let Some(c) = report.check("pagination.covers-once")
        && c.status != Status::Skip
    {
        assert_eq!(c.status, Status::Pass, "{text}");
    }
}
