//! The schema this crate ships (`schema/rcp-1.0.json`) against the corpus of frames in
//! `tests/frames/*.jsonl`: every entry gets the verdict the corpus expects, and, when the spec's
//! normative schema is at hand (`RCP_SCHEMA`, else `../shared/schema/rcp-1.0.json` beside the
//! workspace), the normative schema gives every entry the same verdict.
//!
//! Each line of the corpus is one entry:
//! `{"name", "kind": "frame" | "result", "method" (results only), "value", "valid"}`. A frame is
//! validated by the schema's root, a result by `$defs/ResultFor` as the result of `method`. An
//! invalid entry carries exactly one defect, named by its `name`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rcp_conformance::Schemas;
use serde_json::Value;

/// One corpus line.
struct Entry {
    file: String,
    line: usize,
    name: String,
    kind: Kind,
    value: Value,
    valid: bool,
}

enum Kind {
    Frame,
    Result(String),
}

impl Entry {
    fn label(&self) -> String {
        format!("{}:{} {}", self.file, self.line, self.name)
    }

    /// What `schemas` says of this entry: the violations it reports (none: valid).
    fn errors(&self, schemas: &Schemas) -> Vec<String> {
        match &self.kind {
            Kind::Frame => schemas.frame_errors(&self.value),
            Kind::Result(method) => schemas.result_errors(method, &self.value),
        }
    }
}

fn corpus() -> Vec<Entry> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frames");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|f| f.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    let mut entries = Vec::new();
    for path in files {
        let file = path.file_name().expect("file name").to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let at = format!("{file}:{}", i + 1);
            let v: Value = serde_json::from_str(raw).unwrap_or_else(|e| panic!("{at}: not JSON: {e}"));
            let text_of = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
            let name = text_of("name").unwrap_or_else(|| panic!("{at}: no name"));
            let kind = match text_of("kind").as_deref() {
                Some("frame") => Kind::Frame,
                Some("result") => {
                    Kind::Result(text_of("method").unwrap_or_else(|| panic!("{at}: a result names no method")))
                }
                other => panic!("{at}: kind {other:?} is neither \"frame\" nor \"result\""),
            };
            let valid = v.get("valid").and_then(Value::as_bool).unwrap_or_else(|| panic!("{at}: no boolean valid"));
            let value = v.get("value").cloned().unwrap_or_else(|| panic!("{at}: no value"));
            entries.push(Entry { file: file.clone(), line: i + 1, name, kind, value, valid });
        }
    }
    entries
}

/// The normative schema when it can be found: `RCP_SCHEMA` (which must then exist), else
/// `../shared/schema/rcp-1.0.json` beside the workspace.
fn normative() -> Option<(PathBuf, Schemas)> {
    let path = match std::env::var_os("RCP_SCHEMA") {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "RCP_SCHEMA is set to {}, which is not a file", p.display());
            p
        }
        None => {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/schema/rcp-1.0.json");
            if !p.is_file() {
                return None;
            }
            p
        }
    };
    let schemas = Schemas::load(&path).unwrap_or_else(|e| panic!("the normative schema: {e}"));
    Some((path, schemas))
}

fn verdict(valid: bool) -> &'static str {
    if valid { "valid" } else { "invalid" }
}

/// Runs `schemas` over the corpus and returns one line per entry whose verdict is not the
/// expected one.
fn disagreements(schemas: &Schemas, entries: &[Entry]) -> Vec<String> {
    let mut out = Vec::new();
    for e in entries {
        let errors = e.errors(schemas);
        if errors.is_empty() != e.valid {
            let why = if errors.is_empty() { String::new() } else { format!(": {}", errors.join("; ")) };
            out.push(format!("{}: expected {}, got {}{why}", e.label(), verdict(e.valid), verdict(errors.is_empty())));
        }
    }
    out
}

#[test]
fn the_corpus_is_well_formed_and_covers_every_method() {
    let entries = corpus();
    let mut names = BTreeSet::new();
    for e in &entries {
        assert!(names.insert(e.name.as_str()), "{}: the name is used twice", e.label());
    }
    let invalid = entries.iter().filter(|e| !e.valid).count();
    println!("corpus: {} entries, {} valid, {invalid} invalid", entries.len(), entries.len() - invalid);
    assert!(entries.len() >= 150, "the corpus has only {} entries", entries.len());
    assert!(invalid * 3 >= entries.len(), "only {invalid} of {} entries are invalid", entries.len());

    // Per method: [params valid, params invalid, result valid, result invalid] seen.
    let mut seen: BTreeMap<String, [bool; 4]> = BTreeMap::new();
    for e in &entries {
        let (method, slot) = match &e.kind {
            Kind::Result(m) => (m.clone(), 2),
            Kind::Frame => match e.value.get("method").and_then(Value::as_str) {
                Some(m) => (m.to_owned(), 0),
                None => continue,
            },
        };
        seen.entry(method).or_default()[slot + usize::from(!e.valid)] = true;
    }
    let requests = rcp_conformance::spec_method_names();
    let mut gaps = Vec::new();
    for m in requests {
        let s = seen.get(m).copied().unwrap_or_default();
        // `info`, `shutdown` and `catalog/list` take any params object, so they have no invalid params.
        let wanted: &[(usize, &str)] = match m {
            "info" | "shutdown" | "catalog/list" => &[(0, "valid params"), (2, "valid result")],
            _ => &[(0, "valid params"), (1, "invalid params"), (2, "valid result"), (3, "invalid result")],
        };
        gaps.extend(wanted.iter().filter(|(i, _)| !s[*i]).map(|(_, what)| format!("{m}: no {what}")));
    }
    for m in ["notifications/progress", "notifications/cancel", "notifications/log"] {
        let s = seen.get(m).copied().unwrap_or_default();
        gaps.extend(
            [(0, "valid"), (1, "invalid")].iter().filter(|(i, _)| !s[*i]).map(|(_, w)| format!("{m}: no {w} frame")),
        );
    }
    assert!(gaps.is_empty(), "the corpus does not cover:\n{}", gaps.join("\n"));
}

#[test]
fn the_builtin_schema_gives_every_corpus_entry_its_expected_verdict() {
    let entries = corpus();
    let wrong = disagreements(&Schemas::builtin(), &entries);
    for line in &wrong {
        println!("built-in schema: {line}");
    }
    assert!(wrong.is_empty(), "{} of {} corpus entries misjudged by the built-in schema", wrong.len(), entries.len());
}

#[test]
fn the_normative_schema_agrees_when_it_is_available() {
    let Some((path, normative)) = normative() else {
        println!(
            "no normative schema (set RCP_SCHEMA, or put it at ../shared/schema/rcp-1.0.json): agreement not checked"
        );
        return;
    };
    let entries = corpus();
    let builtin = Schemas::builtin();
    let mut wrong = Vec::new();
    for e in &entries {
        let theirs = e.errors(&normative);
        let ours = e.errors(&builtin).is_empty();
        if theirs.is_empty() != e.valid || ours != e.valid {
            let why = if theirs.is_empty() { String::new() } else { format!(": {}", theirs.join("; ")) };
            wrong.push(format!(
                "{}: the corpus says {}, the built-in schema {}, the normative schema {}{why}",
                e.label(),
                verdict(e.valid),
                verdict(ours),
                verdict(theirs.is_empty())
            ));
        }
    }
    for line in &wrong {
        println!("disagreement: {line}");
    }
    assert!(
        wrong.is_empty(),
        "the built-in and the normative schema ({}) disagree, or misjudge the corpus, on {} of {} entries",
        path.display(),
        wrong.len(),
        entries.len()
    );
}
