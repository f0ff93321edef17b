//! `rcp-bm25 repair`: salvage what verifies. The damaged directory is moved aside whole as a
//! backup (`DIR.bak-<unix seconds>`, never modified), and a new index is rebuilt in `DIR`
//! from the stored documents of every segment whose files all verify; segments with any
//! damaged file are dropped whole (their delete bitset may be the damaged part, and keeping
//! their documents could bring back deleted ones). The outcome counts exactly what was kept
//! and what was dropped.
//!
//! Damage to the directory itself (a missing or unreadable `rcp-bm25.json` or
//! `index/meta.json`) is not repaired: `meta.json` is the only record of which segments and
//! deletes are committed, and salvaging segment files without it could serve deleted or
//! superseded documents. Nothing is touched then.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rcp_corpus::CorpusDoc;
use rcp_wire::Meta;
use serde_json::Value;
use tantivy::directory::{INDEX_WRITER_LOCK, MmapDirectory};
use tantivy::schema::Value as _;
use tantivy::{Directory, Index, SegmentReader, TantivyDocument};

use super::{Problem, Report, verify};
use crate::engine::{Engine, EngineOptions, PARENT, Record, TrustLevel};
use crate::error::EngineError;
use crate::schema::{self, Config, Fields, INDEX_DIR};
use rcp_corpus::chunking::Chunk;

/// A segment left out of the rebuilt index, and why.
#[derive(Debug, Clone)]
pub struct Dropped {
    /// The segment's tantivy id.
    pub segment: String,
    /// Live documents it held according to `meta.json`: all of them are lost.
    pub live_docs: u64,
    /// What was wrong with it.
    pub reasons: Vec<String>,
}

/// What [`repair`] did.
#[derive(Debug, Clone)]
pub enum Repair {
    /// The directory verified; nothing was changed and no backup was made.
    Whole(Report),
    /// The index was rebuilt from the segments that verify.
    Rebuilt(Rebuilt),
}

/// The outcome of a rebuild.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    /// The data directory, now holding the rebuilt index.
    pub dir: PathBuf,
    /// Where the original directory was moved, untouched.
    pub backup: PathBuf,
    /// Live documents recorded in the original `meta.json`.
    pub docs_before: u64,
    /// Documents in the rebuilt index.
    pub kept_docs: u64,
    /// Segments whose documents were kept, with their document counts.
    pub kept_segments: Vec<(String, u64)>,
    /// Segments dropped whole.
    pub dropped: Vec<Dropped>,
    /// Documents of verified segments that could not be read back (counted, not kept).
    pub unreadable_docs: u64,
    /// The `indexVersion` of the rebuilt index (a new index identity).
    pub index_version: String,
}

impl Rebuilt {
    /// Documents lost: recorded before, not present after.
    pub fn lost_docs(&self) -> u64 {
        self.docs_before.saturating_sub(self.kept_docs)
    }
}

impl fmt::Display for Rebuilt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "repaired {}; the original is kept untouched at {}", self.dir.display(), self.backup.display())?;
        for (id, docs) in &self.kept_segments {
            writeln!(f, "  kept    segment {id}: {docs} documents")?;
        }
        for d in &self.dropped {
            writeln!(f, "  dropped segment {}: {} documents ({})", d.segment, d.live_docs, d.reasons.join("; "))?;
        }
        if self.unreadable_docs > 0 {
            writeln!(f, "  dropped {} unreadable documents of verified segments", self.unreadable_docs)?;
        }
        write!(
            f,
            "  documents: {} before, {} kept, {} lost; indexVersion {}",
            self.docs_before,
            self.kept_docs,
            self.lost_docs(),
            self.index_version
        )
    }
}

/// Repairs `dir` (see the module docs). Errors leave `dir` as it was.
pub fn repair(dir: &Path) -> Result<Repair, EngineError> {
    repair_with(dir, EngineOptions::default())
}

/// [`repair`] of an index built with a learned-sparse scorer: `options` carries the encoder
/// it was built with, which recomputes the kept documents' expansions. An encoder other than
/// the index's is refused before anything is changed.
pub fn repair_with(dir: &Path, options: EngineOptions) -> Result<Repair, EngineError> {
    let report = verify(dir, true);
    if report.is_ok() {
        return Ok(Repair::Whole(report));
    }
    if !report.problems.is_empty() {
        let list: Vec<String> = report.problems.iter().map(Problem::to_string).collect();
        return Err(EngineError::Integrity(format!(
            "cannot repair {}: {}; repair only drops damaged segments and needs rcp-bm25.json and index/meta.json intact (restore them from a backup, or rebuild with `rcp-bm25 index`); nothing was changed",
            dir.display(),
            list.join("; ")
        )));
    }
    let config = Config::load(dir)?
        .ok_or_else(|| EngineError::Integrity(format!("{}: rcp-bm25.json vanished", dir.display())))?;
    let encoder = options.learned_sparse.as_ref().map(|e| e.identity().to_owned());
    if config.learned_sparse != encoder {
        return Err(EngineError::Config(format!(
            "{} was built with scorer {}; repair it with the same scorer (--scorer {}); nothing was changed",
            dir.display(),
            config.learned_sparse.as_deref().unwrap_or("bm25"),
            if config.learned_sparse.is_some() { "splade" } else { "bm25" }
        )));
    }
    // Hold the writer lock through the repair: a running `serve` or `index` (say, one started
    // with --skip-verify) would keep writing into the directory being moved aside.
    let _lock = MmapDirectory::open(dir.join(INDEX_DIR))?
        .acquire_lock(&INDEX_WRITER_LOCK)
        .map_err(|_| {
            EngineError::Integrity(format!(
                "{} is open for writing by another process (a running `rcp-bm25 serve` or `index`?): stop it first; nothing was changed",
                dir.display()
            ))
        })?;
    let backup = sibling(dir, &format!("bak-{}", unix_secs()));
    let partial = sibling(dir, &format!("repair-{}", std::process::id()));
    std::fs::rename(dir, &backup).map_err(|e| EngineError::io(dir, e))?;
    match rebuild(&backup, &partial, &config, &report, options) {
        Ok(mut rebuilt) => {
            std::fs::rename(&partial, dir).map_err(|e| EngineError::io(&partial, e))?;
            rebuilt.dir = dir.to_path_buf();
            rebuilt.backup = backup;
            Ok(Repair::Rebuilt(rebuilt))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            let _ = std::fs::rename(&backup, dir);
            Err(e)
        }
    }
}

/// Rebuilds the index of `original` into `target` from the segments `report` found whole.
fn rebuild(
    original: &Path,
    target: &Path,
    config: &Config,
    report: &Report,
    options: EngineOptions,
) -> Result<Rebuilt, EngineError> {
    let index_dir = original.join(INDEX_DIR);
    let directory = MmapDirectory::open(&index_dir)?;
    let index = Index::open(directory)?;
    let (_, fields) = schema::build(config);
    let engine = Engine::open(target, config.fields.clone(), options)?;
    let mut rebuilt = Rebuilt {
        dir: target.to_path_buf(),
        backup: original.to_path_buf(),
        docs_before: report.live_docs(),
        kept_docs: 0,
        kept_segments: Vec::new(),
        dropped: Vec::new(),
        unreadable_docs: 0,
        index_version: String::new(),
    };
    let mut seen: HashSet<String> = HashSet::new();
    let writer_lock = engine.writer();
    let mut writer = writer_lock.blocking_lock();
    for meta in index.load_metas()?.segments {
        let id = meta.id().uuid_string();
        let Some(health) = report.segments.iter().find(|s| s.id == id) else { continue };
        if !health.is_ok() {
            rebuilt.dropped.push(Dropped {
                segment: id,
                live_docs: u64::from(health.live_docs),
                reasons: health.problems.iter().map(Problem::to_string).collect(),
            });
            continue;
        }
        let reader = match SegmentReader::open(&index.segment(meta.clone())) {
            Ok(r) => r,
            Err(e) => {
                rebuilt.dropped.push(Dropped {
                    segment: id,
                    live_docs: u64::from(health.live_docs),
                    reasons: vec![format!("verified but cannot be opened: {e}")],
                });
                continue;
            }
        };
        let store =
            reader.get_store_reader(64).map_err(|source| EngineError::Segment { segment: id.to_string(), source })?;
        let mut kept = 0u64;
        for doc_id in reader.doc_ids_alive() {
            let restored = store
                .get::<TantivyDocument>(doc_id)
                .map_err(|e| e.to_string())
                .and_then(|stored| restore(&stored, &fields))
                .and_then(|(doc, trust, source, record)| {
                    let id = doc.id.clone().unwrap_or_default();
                    // Records are told apart by their own id (a chunk's is `<doc>#<index>`).
                    let key = match record {
                        Record::Chunk(c) => format!("{id}#{}", c.index),
                        Record::Whole | Record::Parent => id.clone(),
                    };
                    engine
                        .prepare_record(&doc, &id, trust, &source, record)
                        .map(|d| (key, d))
                        .map_err(|e| e.to_string())
                });
            match restored {
                Ok((id, prepared)) if !seen.contains(&id) => {
                    seen.insert(id);
                    writer.add_document(prepared)?;
                    kept += 1;
                }
                Ok(_) | Err(_) => rebuilt.unreadable_docs += 1,
            }
        }
        rebuilt.kept_docs += kept;
        rebuilt.kept_segments.push((id, kept));
    }
    let opstamp = writer.commit()?;
    drop(writer);
    rebuilt.index_version = format!("{}-{opstamp}", engine_uid(target)?);
    Ok(rebuilt)
}

/// A stored record back as a corpus document (its document id, and its own text), with its
/// trust level, source and what record it is (a chunk, a chunked document's parent, or whole).
fn restore(stored: &TantivyDocument, f: &Fields) -> Result<(CorpusDoc, TrustLevel, String, Record), String> {
    let text_of = |field| stored.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
    let num = |field| stored.get_first(field).and_then(|v| v.as_u64()).and_then(|n| usize::try_from(n).ok());
    let mut id = text_of(f.id).ok_or("stored document without an id")?;
    let mut record = Record::Whole;
    if let Some(c) = &f.chunks {
        id = text_of(c.doc).unwrap_or(id);
        if text_of(c.role).as_deref() == Some(PARENT) {
            record = Record::Parent;
        } else if let (Some(index), Some(start), Some(end)) = (num(c.index), num(c.start), num(c.end)) {
            record = Record::Chunk(Chunk { index, start, end });
        }
    }
    let text = text_of(f.text_raw).ok_or_else(|| format!("document '{id}': no stored text"))?;
    let meta = match text_of(f.meta).map(|m| serde_json::from_str::<Value>(&m)) {
        Some(Ok(Value::Object(m))) => m as Meta,
        None => Meta::new(),
        Some(_) => return Err(format!("document '{id}': stored metadata is not a JSON object")),
    };
    let trust = text_of(f.trust).and_then(|t| TrustLevel::from_wire(&t)).unwrap_or(TrustLevel::Untrusted);
    let source = text_of(f.source).unwrap_or_default();
    Ok((CorpusDoc { id: Some(id), title: text_of(f.title_raw), text, meta }, trust, source, record))
}

fn engine_uid(dir: &Path) -> Result<String, EngineError> {
    Ok(Config::load(dir)?.map(|c| c.uid).unwrap_or_default())
}

/// `DIR.<suffix>` beside `dir`, made unique with a counter if it exists.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir.file_name().map_or_else(|| "data".to_owned(), |n| n.to_string_lossy().into_owned());
    let base = dir.with_file_name(format!("{name}.{suffix}"));
    let mut candidate = base.clone();
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    candidate
}

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
