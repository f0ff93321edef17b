//! Integrity of a data directory: what `serve` checks before it opens an index, what
//! `rcp-bm25 verify` reports and what `rcp-bm25 repair` salvages ([`repair`]).
//!
//! A data directory is an index exactly when it holds our configuration (`rcp-bm25.json`) or
//! any tantivy segment data under `index/`. Such a directory must be whole: the
//! configuration parses, `index/meta.json` (tantivy's record of the committed segments and
//! their deletes) is present and parses, and every file of every committed segment exists
//! and carries a valid checksum footer. Anything less is refused, never served as less data
//! (a missing `meta.json` used to open as a new, empty index).
//!
//! Checksums read every byte of every segment file once: on Cranfield (1,400 documents)
//! that is a few milliseconds; for very large indexes `serve --skip-verify` keeps the
//! structural checks (which read only `meta.json` and file sizes) and skips the checksums.

pub mod repair;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tantivy::directory::MmapDirectory;
use tantivy::index::{SegmentComponent, SegmentMeta};
use tantivy::{Index, Opstamp};

use crate::schema::{CONFIG_FILE, Config, INDEX_DIR};

/// tantivy's record of the committed segments, inside `index/`.
pub const META_FILE: &str = "meta.json";

/// Files tantivy keeps in `index/` that are not index data (locks).
const LOCK_FILES: [&str; 2] = [".tantivy-writer.lock", ".tantivy-meta.lock"];

/// The per-segment files tantivy 0.27 writes for every segment (the delete bitset only
/// exists once the segment has deletes).
const SEGMENT_COMPONENTS: [SegmentComponent; 6] = [
    SegmentComponent::Postings,
    SegmentComponent::Positions,
    SegmentComponent::Terms,
    SegmentComponent::Store,
    SegmentComponent::FastFields,
    SegmentComponent::FieldNorms,
];

/// What a data directory holds, before any deeper check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirState {
    /// The path does not exist.
    Missing,
    /// The directory exists but holds no index (empty, or only unrelated files).
    NoIndex,
    /// The directory holds an index, whole or not: [`verify`] says which.
    Index,
}

/// Classifies `dir` without reading any index data.
pub fn state(dir: &Path) -> DirState {
    if !dir.exists() {
        return DirState::Missing;
    }
    if dir.join(CONFIG_FILE).exists() {
        return DirState::Index;
    }
    let index_dir = dir.join(INDEX_DIR);
    let data_files = index_files(&index_dir);
    let only_empty_meta =
        data_files.iter().all(|n| n == META_FILE || n == ".managed.json") && empty_meta(&index_dir.join(META_FILE));
    if data_files.is_empty() || only_empty_meta { DirState::NoIndex } else { DirState::Index }
}

/// The names of the files in `index_dir`, locks excluded (empty when it does not exist).
fn index_files(index_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(index_dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !LOCK_FILES.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// Whether `meta.json` is absent or records no segment: an index created but never written
/// (what a crash between creating `index/` and writing `rcp-bm25.json` leaves).
fn empty_meta(path: &Path) -> bool {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("segments").and_then(|s| s.as_array()).map(Vec::is_empty))
            .unwrap_or(false),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// One thing wrong with a data directory: the file (or directory) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

/// The health of one committed segment.
#[derive(Debug, Clone)]
pub struct SegmentHealth {
    /// The segment's tantivy id (the stem of its file names).
    pub id: String,
    /// Live documents it holds according to `meta.json`.
    pub live_docs: u32,
    /// What is wrong with its files (empty when it verifies).
    pub problems: Vec<Problem>,
}

impl SegmentHealth {
    /// Whether every file of the segment exists and verifies.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The outcome of [`verify`].
#[derive(Debug, Clone)]
pub struct Report {
    /// The data directory.
    pub dir: PathBuf,
    /// Problems of the directory itself: configuration, `meta.json`. None of these can be
    /// repaired by dropping segments.
    pub problems: Vec<Problem>,
    /// Every committed segment (empty when `meta.json` could not be read).
    pub segments: Vec<SegmentHealth>,
    /// The opstamp of the last commit, when `meta.json` could be read.
    pub opstamp: Option<Opstamp>,
    /// Bytes whose checksum was verified.
    pub checked_bytes: u64,
    /// How long the verification took.
    pub elapsed: Duration,
}

impl Report {
    /// Whether the directory is whole.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.segments.iter().all(SegmentHealth::is_ok)
    }

    /// Live documents recorded in `meta.json`, over every segment.
    pub fn live_docs(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.live_docs)).sum()
    }

    /// Every problem, directory-level first.
    pub fn all_problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().chain(self.segments.iter().flat_map(|s| s.problems.iter()))
    }

    /// A one-paragraph refusal naming every problem, for a server that will not start.
    pub fn refusal(&self) -> String {
        let list: Vec<String> = self.all_problems().map(ToString::to_string).collect();
        format!(
            "{} is damaged; refusing to serve it (no file was changed):\n  {}\nrun `rcp-bm25 verify --data-dir {}` for a full report and `rcp-bm25 repair --data-dir {}` to salvage what verifies",
            self.dir.display(),
            list.join("\n  "),
            self.dir.display(),
            self.dir.display()
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.is_ok() { "OK" } else { "DAMAGED" };
        writeln!(f, "{}: {verdict}", self.dir.display())?;
        for p in &self.problems {
            writeln!(f, "  {p}")?;
        }
        for s in &self.segments {
            let state = if s.is_ok() { "ok" } else { "damaged" };
            writeln!(f, "  segment {}: {} live documents, {state}", s.id, s.live_docs)?;
            for p in &s.problems {
                writeln!(f, "    {p}")?;
            }
        }
        write!(
            f,
            "  {} segments, {} live documents, {} bytes checksummed in {:.1} ms",
            self.segments.len(),
            self.live_docs(),
            self.checked_bytes,
            self.elapsed.as_secs_f64() * 1e3
        )
    }
}

/// Checks a data directory that [`state`] classifies as [`DirState::Index`] (any other
/// directory is reported as a problem). Reads only: no file is created, changed or removed.
/// With `checksums` every segment file's footer checksum is verified; without, only that
/// the files exist and are large enough to hold a footer.
pub fn verify(dir: &Path, checksums: bool) -> Report {
    let started = Instant::now();
    let mut report = Report {
        dir: dir.to_path_buf(),
        problems: Vec::new(),
        segments: Vec::new(),
        opstamp: None,
        checked_bytes: 0,
        elapsed: Duration::ZERO,
    };
    let problem = |path: PathBuf, what: String| Problem { path, what };
    match state(dir) {
        DirState::Missing => report.problems.push(problem(dir.into(), "does not exist".into())),
        DirState::NoIndex => report.problems.push(problem(dir.into(), "holds no rcp-bm25 index".into())),
        DirState::Index => check_index(dir, checksums, &mut report),
    }
    report.elapsed = started.elapsed();
    report
}

fn check_index(dir: &Path, checksums: bool, report: &mut Report) {
    let problem = |path: PathBuf, what: String| Problem { path, what };
    let config_path = dir.join(CONFIG_FILE);
    let index_dir = dir.join(INDEX_DIR);
    match Config::load(dir) {
        Ok(Some(_)) => {}
        Ok(None) => report.problems.push(problem(
            config_path,
            format!("missing, but {} holds index data (the filter-field schema is lost)", index_dir.display()),
        )),
        Err(e) => report.problems.push(problem(config_path, format!("unreadable: {e}"))),
    }
    let meta_path = index_dir.join(META_FILE);
    if !meta_path.exists() {
        let files = index_files(&index_dir);
        let what = if files.is_empty() {
            "missing (the index directory is empty or absent)".to_owned()
        } else {
            format!(
                "missing, but {} other files are present (segment data without the record of what is committed)",
                files.len()
            )
        };
        report.problems.push(problem(meta_path, what));
        return;
    }
    let index = match MmapDirectory::open(&index_dir)
        .map_err(|e| e.to_string())
        .and_then(|d| Index::open(d).map_err(|e| e.to_string()))
    {
        Ok(i) => i,
        Err(e) => {
            report.problems.push(problem(meta_path, format!("cannot be opened: {e}")));
            return;
        }
    };
    let metas = match index.load_metas() {
        Ok(m) => m,
        Err(e) => {
            report.problems.push(problem(meta_path, format!("unreadable: {e}")));
            return;
        }
    };
    report.opstamp = Some(metas.opstamp);
    for segment in &metas.segments {
        let health = check_segment(&index, &index_dir, segment, checksums, &mut report.checked_bytes);
        report.segments.push(health);
    }
}

/// The files of one committed segment, relative to `index/`.
pub(crate) fn segment_files(segment: &SegmentMeta) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = SEGMENT_COMPONENTS.iter().map(|c| segment.relative_path(c.clone())).collect();
    if segment.has_deletes() {
        files.push(segment.relative_path(SegmentComponent::Delete));
    }
    files
}

fn check_segment(
    index: &Index,
    index_dir: &Path,
    segment: &SegmentMeta,
    checksums: bool,
    checked_bytes: &mut u64,
) -> SegmentHealth {
    let mut problems = Vec::new();
    for rel in segment_files(segment) {
        let path = index_dir.join(&rel);
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(Problem { path, what: "missing (listed as committed in meta.json)".into() });
                continue;
            }
            Err(e) => {
                problems.push(Problem { path, what: format!("unreadable: {e}") });
                continue;
            }
        };
        if !checksums {
            // A tantivy footer is at least a few bytes; an empty file cannot be whole.
            if len == 0 {
                problems.push(Problem { path, what: "empty (truncated)".into() });
            }
            continue;
        }
        match index.directory().validate_checksum(&rel) {
            Ok(true) => *checked_bytes += len,
            Ok(false) => problems.push(Problem { path, what: "checksum mismatch (the content is corrupt)".into() }),
            Err(e) => problems
                .push(Problem { path, what: format!("no valid checksum footer ({e}): truncated or overwritten") }),
        }
    }
    SegmentHealth { id: segment.id().uuid_string(), live_docs: segment.num_docs(), problems }
}

#[cfg(test)]
mod tests;
