use std::path::{Path, PathBuf};

use rcp_corpus::builtin;

use super::repair::{Repair, repair};
use super::{DirState, META_FILE, state, verify};
use crate::engine::{Engine, EngineOptions, TrustLevel};
use crate::error::EngineError;
use crate::schema::INDEX_DIR;

/// An index of the 30 built-in documents (one segment) plus one more document written
/// under its own commit (a second segment). Returns the data directory.
fn two_segment_index(root: &Path) -> PathBuf {
    let dir = root.join("idx");
    let engine = Engine::open(&dir, crate::builtin_fields(), EngineOptions::default()).expect("create");
    let docs = builtin().into_iter().map(Ok::<_, String>);
    engine.load(docs, TrustLevel::Trusted, "builtin", true, |_| {}).expect("load");
    let extra = rcp_corpus::CorpusDoc {
        id: Some("extra".into()),
        title: None,
        text: "a lone extra document".into(),
        meta: Default::default(),
    };
    let prepared = engine.prepare(&extra, "extra", TrustLevel::Community, "test").expect("prepare");
    let writer = engine.writer();
    engine.write(&mut writer.blocking_lock(), vec![("extra".into(), prepared)], &|| false).expect("write");
    dir
}

/// The segment file with `ext` of the segment holding `docs` live documents.
fn segment_file(dir: &Path, docs: u32, ext: &str) -> PathBuf {
    let report = verify(dir, true);
    let seg = report.segments.iter().find(|s| s.live_docs == docs).expect("segment with that many docs");
    dir.join(INDEX_DIR).join(format!("{}.{ext}", seg.id))
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = at.min(bytes.len() / 2);
    for b in &mut bytes[at..at + 4] {
        *b ^= 0xA5;
    }
    std::fs::write(path, bytes).expect("write");
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> =
        walk(dir).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect();
    files.sort();
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

#[test]
fn a_whole_index_verifies_and_states_are_told_apart() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(state(&root.path().join("nope")), DirState::Missing);
    assert_eq!(state(root.path()), DirState::NoIndex);
    let dir = two_segment_index(root.path());
    assert_eq!(state(&dir), DirState::Index);
    let report = verify(&dir, true);
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.segments.len(), 2);
    assert_eq!(report.live_docs(), 31);
    assert!(report.checked_bytes > 0);
    assert!(matches!(repair(&dir), Ok(Repair::Whole(_))));
}

#[test]
fn a_missing_meta_json_is_refused_and_never_recreated() {
    let root = tempfile::tempdir().unwrap();
    let dir = two_segment_index(root.path());
    std::fs::remove_file(dir.join(INDEX_DIR).join(META_FILE)).unwrap();
    let before = snapshot(&dir);
    let report = verify(&dir, false);
    assert!(!report.is_ok());
    assert!(report.to_string().contains("meta.json: missing"), "{report}");
    for open in [Engine::open, Engine::open_existing] {
        match open(&dir, Vec::new(), EngineOptions::default()) {
            Err(EngineError::Integrity(msg)) => assert!(msg.contains("meta.json"), "{msg}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    // Repair refuses too: without meta.json nothing says which segments are committed.
    assert!(matches!(repair(&dir), Err(EngineError::Integrity(m)) if m.contains("nothing was changed")));
    assert_eq!(snapshot(&dir), before, "a refused directory must be left untouched");
}

#[test]
fn flipped_bytes_are_refused_then_repaired_with_an_exact_count() {
    let root = tempfile::tempdir().unwrap();
    let dir = two_segment_index(root.path());
    let term = segment_file(&dir, 1, "term");
    flip(&term, 10);
    let err = Engine::open_existing(&dir, Vec::new(), EngineOptions::default()).unwrap_err().to_string();
    assert!(err.contains(&term.display().to_string()) && err.contains("checksum"), "{err}");
    // The structural checks alone do not see it: that is what --skip-verify trades away.
    assert!(verify(&dir, false).is_ok());

    let Repair::Rebuilt(r) = repair(&dir).expect("repair") else { panic!("expected a rebuild") };
    assert_eq!((r.docs_before, r.kept_docs, r.lost_docs()), (31, 30, 1), "{r}");
    assert_eq!(r.dropped.len(), 1);
    assert!(r.dropped[0].reasons[0].contains(".term"), "{r}");
    assert!(r.backup.exists() && r.backup.join(INDEX_DIR).join(term.file_name().unwrap()).exists());
    let engine = Engine::open_existing(&dir, Vec::new(), EngineOptions::default()).expect("repaired index opens");
    assert_eq!(engine.num_docs(), 30);
    assert!(!engine.contains_id("extra").unwrap());
    assert!(engine.contains_id("bm25-2").unwrap());
}

#[test]
fn truncated_and_zeroed_files_are_refused() {
    for (ext, damage) in [("store", "truncate"), ("idx", "zero"), ("fieldnorm", "empty")] {
        let root = tempfile::tempdir().unwrap();
        let dir = two_segment_index(root.path());
        let path = segment_file(&dir, 30, ext);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        match damage {
            "truncate" => std::fs::write(&path, &std::fs::read(&path).unwrap()[..len / 2]).unwrap(),
            "zero" => std::fs::write(&path, vec![0u8; len]).unwrap(),
            _ => std::fs::write(&path, b"").unwrap(),
        }
        let err = Engine::open_existing(&dir, Vec::new(), EngineOptions::default()).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{ext}/{damage}: {err}");
        let Repair::Rebuilt(r) = repair(&dir).expect("repair") else { panic!("expected a rebuild") };
        assert_eq!((r.kept_docs, r.lost_docs()), (1, 30), "{ext}/{damage}: {r}");
    }
}

#[test]
fn a_missing_directory_is_not_created_by_open_existing() {
    let root = tempfile::tempdir().unwrap();
    let typo = root.path().join("idx-typo");
    let err = Engine::open_existing(&typo, Vec::new(), EngineOptions::default()).unwrap_err();
    assert!(matches!(&err, EngineError::NoIndex(m) if m.contains("does not exist")), "{err}");
    assert!(!typo.exists());
    let err = Engine::open_existing(root.path(), Vec::new(), EngineOptions::default()).unwrap_err();
    assert!(matches!(&err, EngineError::NoIndex(m) if m.contains("holds no rcp-bm25 index")), "{err}");
}
