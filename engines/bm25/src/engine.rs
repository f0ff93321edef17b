//! The BM25 engine: a tantivy index with a writer/reader pair, a ring of recent snapshots,
//! hand-built term queries and the write paths (bulk load, upsert, delete).
//!
//! Everything here is blocking; the RCP handlers in [`crate::service`] run it on
//! `spawn_blocking`. Reads never take the writer lock: each search runs on one immutable
//! `Searcher` (a consistent snapshot), published after every commit.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rcp_corpus::CorpusDoc;
use rcp_protocol::filter::{FieldType, Filter, date_to_epoch_ms};
use rcp_protocol::retrieve::{Citation, Trust};
use rcp_protocol::{Hit, Meta};
use serde_json::Value;
use tantivy::collector::{Count, TopDocs};
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{IndexRecordOption, Term, Value as _};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, Opstamp, ReloadPolicy, Searcher, TantivyDocument};

use crate::analyzer::{self, ANALYZER};
use crate::error::EngineError;
use crate::filter;
use crate::schema::{self, Config, FieldSpec, Fields, MetaField};

/// The trust level of a document (§7.7 `hit.trust`, §15.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustLevel {
    /// Curated by the operator.
    Trusted,
    /// Contributed by known users.
    Community,
    /// Unknown provenance.
    Untrusted,
}

impl TrustLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TrustLevel::Trusted => "trusted",
            TrustLevel::Community => "community",
            TrustLevel::Untrusted => "untrusted",
        }
    }
}

/// Tunables of a running engine.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Weight of title matches relative to body matches (0 disables title matching).
    pub title_boost: f32,
    /// How many past snapshots stay pinnable with `indexVersion` (§7.7.1), besides the current.
    pub keep_snapshots: usize,
    /// Most analyzed terms a query may have (§15.5).
    pub max_query_terms: usize,
    /// Indexing memory budget of the writer, in bytes.
    pub writer_heap: usize,
    /// Indexing threads (0: tantivy's default for the machine).
    pub writer_threads: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            title_boost: DEFAULT_TITLE_BOOST,
            keep_snapshots: 16,
            max_query_terms: 1024,
            writer_heap: 64 << 20,
            writer_threads: 1,
        }
    }
}

/// Default title weight. On Cranfield (whose bodies repeat the title) 0.4–0.6 is best and 0
/// costs 0.02 nDCG@10; see the `bm25_cranfield` benchmark's `--sweep`.
pub const DEFAULT_TITLE_BOOST: f32 = 0.5;

/// The deepest rank a page may start at (§15.5): a cursor cannot make a search collect more.
pub const MAX_OFFSET: usize = 100_000;

/// How many hits are materialised between cancellation checks and partial-hit frames.
const CHUNK: usize = 32;

/// One published snapshot: the commit it reflects and a searcher over it.
struct Snapshot {
    opstamp: Opstamp,
    searcher: Searcher,
    /// When it was published: the clock `recency` decays against, so a pinned snapshot
    /// gives identical scores on every call (§7.7.1).
    published_ms: i64,
}

struct Snapshots {
    current: Arc<Snapshot>,
    /// Older snapshots, newest last.
    recent: VecDeque<Arc<Snapshot>>,
}

/// `recency` (§7.7): exponential decay on a date field.
#[derive(Debug, Clone, PartialEq)]
pub struct RecencySpec {
    /// The date field.
    pub field: String,
    /// Half-life in days.
    pub half_life_days: f64,
}

/// One search, in engine terms.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The user's query text (analyzed, never parsed as syntax).
    pub query: String,
    /// Page size.
    pub k: usize,
    /// Recall-stage depth (`candidateK`), reported in `usage.candidates`.
    pub candidate_k: usize,
    /// Validated metadata filter.
    pub filter: Option<Filter>,
    /// Drop hits scoring below this.
    pub min_score: Option<f64>,
    /// Recency decay: the score is multiplied by `0.5^(age / half-life)`, age measured from
    /// the snapshot's publication; a document without the date field scores 0.
    pub recency: Option<RecencySpec>,
    /// Whether hits carry their text.
    pub include_text: bool,
    /// A pinned snapshot token (`indexVersion`).
    pub index_version: Option<String>,
    /// A pagination cursor from a previous page.
    pub cursor: Option<String>,
}

impl SearchRequest {
    /// A plain query for the top `k`.
    pub fn new(query: impl Into<String>, k: usize) -> Self {
        Self {
            query: query.into(),
            k,
            candidate_k: k.max(100),
            filter: None,
            min_score: None,
            recency: None,
            include_text: true,
            index_version: None,
            cursor: None,
        }
    }
}

/// Callbacks a search makes while it runs.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Polled between phases; `true` stops the search with [`EngineError::Cancelled`].
    pub cancelled: Option<&'a (dyn Fn() -> bool + Sync)>,
    /// Receives progress in `[0,1]`, a message, and hits as they are materialised.
    pub progress: Option<&'a (dyn Fn(f64, String, Vec<Hit>) + Sync)>,
}

impl Hooks<'_> {
    fn check(&self) -> Result<(), EngineError> {
        match self.cancelled {
            Some(c) if c() => Err(EngineError::Cancelled),
            _ => Ok(()),
        }
    }
}

/// One page of results.
#[derive(Debug, Clone)]
pub struct SearchPage {
    /// Ranked hits, best first.
    pub hits: Vec<Hit>,
    /// The snapshot served (`indexVersion`).
    pub index_version: String,
    /// Cursor for the next page, when there is one.
    pub next_cursor: Option<String>,
    /// Documents that matched the query and filter.
    pub matched: u64,
    /// Effective recall-stage depth.
    pub candidates: u64,
    /// Analyzed query terms.
    pub terms: usize,
    /// What was done differently from what was asked.
    pub notes: Vec<String>,
}

/// Outcome of loading a corpus file.
#[derive(Debug, Clone, Default)]
pub struct LoadStats {
    /// Documents written.
    pub indexed: u64,
    /// Lines skipped as unusable.
    pub skipped: u64,
    /// Documents in the index after the commit.
    pub total: u64,
    /// The snapshot token after the commit.
    pub index_version: String,
}

/// The engine.
pub struct Engine {
    index: Index,
    reader: IndexReader,
    writer: Arc<tokio::sync::Mutex<IndexWriter>>,
    fields: Fields,
    config: Config,
    analyzer: TextAnalyzer,
    snapshots: RwLock<Snapshots>,
    options: EngineOptions,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("config", &self.config).field("options", &self.options).finish()
    }
}

impl Engine {
    /// Opens the index in `dir`, creating it with `declared` fields if the directory holds
    /// none. For an existing index, `declared` must be empty or equal to its fields.
    pub fn open(dir: &Path, declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        let config = match Config::load(dir)? {
            Some(c) => {
                if !declared.is_empty() && declared != c.fields {
                    return Err(EngineError::Config(format!(
                        "{} was created with fields [{}]; it cannot change to [{}] (index into a new data dir instead)",
                        dir.display(),
                        describe(&c.fields),
                        describe(&declared)
                    )));
                }
                c
            }
            None => {
                let c = Config::new(declared);
                std::fs::create_dir_all(dir.join(schema::INDEX_DIR))
                    .map_err(|e| EngineError::Config(format!("{}: {e}", dir.display())))?;
                c.save(dir)?;
                c
            }
        };
        let (tantivy_schema, fields) = schema::build(&config);
        let index_dir = dir.join(schema::INDEX_DIR);
        std::fs::create_dir_all(&index_dir)
            .map_err(|e| EngineError::Config(format!("{}: {e}", index_dir.display())))?;
        let directory = MmapDirectory::open(&index_dir).map_err(|e| EngineError::Config(e.to_string()))?;
        let index = Index::open_or_create(directory, tantivy_schema)?;
        Self::start(index, fields, config, options)
    }

    /// An index held in memory (the built-in demo corpus; nothing is persisted).
    pub fn in_ram(declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        let config = Config::new(declared);
        let (tantivy_schema, fields) = schema::build(&config);
        Self::start(Index::create_in_ram(tantivy_schema), fields, config, options)
    }

    fn start(index: Index, fields: Fields, config: Config, options: EngineOptions) -> Result<Self, EngineError> {
        index.tokenizers().register(ANALYZER, analyzer::english());
        let writer = if options.writer_threads == 0 {
            index.writer(options.writer_heap)
        } else {
            index.writer_with_num_threads(options.writer_threads, options.writer_heap)
        };
        let writer = writer.map_err(|e| match e {
            tantivy::TantivyError::LockFailure(..) => EngineError::Config(
                "the index is open for writing by another process (a running `rcp-bm25 serve` or `index`?)".into(),
            ),
            other => other.into(),
        })?;
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        let opstamp = index.load_metas()?.opstamp;
        let current = Arc::new(Snapshot { opstamp, searcher: reader.searcher(), published_ms: now_millis() });
        Ok(Self {
            index,
            reader,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            fields,
            config,
            analyzer: analyzer::english(),
            snapshots: RwLock::new(Snapshots { current, recent: VecDeque::new() }),
            options,
        })
    }

    /// The filterable fields.
    pub fn field_specs(&self) -> &[FieldSpec] {
        &self.config.fields
    }

    /// The options in force.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The writer lock; hold it (from `spawn_blocking`) around [`Engine::write`] and
    /// [`Engine::delete`].
    pub fn writer(&self) -> Arc<tokio::sync::Mutex<IndexWriter>> {
        Arc::clone(&self.writer)
    }

    /// Live documents in the current snapshot.
    pub fn num_docs(&self) -> u64 {
        self.current().searcher.num_docs()
    }

    /// The token of the current snapshot.
    pub fn index_version(&self) -> String {
        self.token(self.current().opstamp)
    }

    fn current(&self) -> Arc<Snapshot> {
        match self.snapshots.read() {
            Ok(s) => Arc::clone(&s.current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner().current),
        }
    }

    fn token(&self, opstamp: Opstamp) -> String {
        format!("{}-{opstamp}", self.config.uid)
    }

    /// Resolves an `indexVersion` token to a held snapshot (§7.7.1).
    fn pinned(&self, token: &str) -> Result<Arc<Snapshot>, EngineError> {
        let gone = || {
            EngineError::SnapshotGone(format!(
                "indexVersion '{token}' is not held by this server (it keeps the {} most recent snapshots; current is '{}')",
                self.options.keep_snapshots + 1,
                self.index_version()
            ))
        };
        let (uid, opstamp) = token.rsplit_once('-').ok_or_else(gone)?;
        let opstamp: Opstamp = opstamp.parse().map_err(|_| gone())?;
        if uid != self.config.uid {
            return Err(gone());
        }
        let snaps = self.snapshots.read().map_err(|_| EngineError::Internal("snapshot lock poisoned".into()))?;
        std::iter::once(&snaps.current)
            .chain(snaps.recent.iter().rev())
            .find(|s| s.opstamp == opstamp)
            .cloned()
            .ok_or_else(gone)
    }

    /// Reloads the reader after a commit and publishes the new snapshot. Called with the
    /// writer lock held, so snapshots are published in commit order.
    fn publish(&self, opstamp: Opstamp) -> Result<(), EngineError> {
        self.reader.reload()?;
        let snap = Arc::new(Snapshot { opstamp, searcher: self.reader.searcher(), published_ms: now_millis() });
        let mut snaps = self.snapshots.write().map_err(|_| EngineError::Internal("snapshot lock poisoned".into()))?;
        let old = std::mem::replace(&mut snaps.current, snap);
        if old.opstamp != opstamp {
            snaps.recent.push_back(old);
        }
        while snaps.recent.len() > self.options.keep_snapshots {
            snaps.recent.pop_front();
        }
        Ok(())
    }

    // ---------------------------------------------------------------- documents

    /// Converts a corpus document to a tantivy document. Errors name the offending metadata
    /// key (`meta.year`) and say what the field's type expects.
    pub fn prepare(
        &self,
        doc: &CorpusDoc,
        id: &str,
        trust: TrustLevel,
        source: &str,
    ) -> Result<TantivyDocument, EngineError> {
        let f = &self.fields;
        let mut d = TantivyDocument::new();
        d.add_text(f.id, id);
        if let Some(title) = &doc.title {
            d.add_text(f.title, title);
            d.add_text(f.title_raw, title);
        }
        d.add_text(f.text, &doc.text);
        d.add_text(f.text_raw, &doc.text);
        d.add_text(f.meta, Value::Object(doc.meta.clone()).to_string());
        d.add_text(f.trust, trust.as_str());
        d.add_text(f.source, source);
        for (name, m) in &f.filterable {
            let Some(v) = doc.meta.get(name).filter(|v| !v.is_null()) else { continue };
            d.add_text(f.present, name);
            match v {
                Value::Array(items) => {
                    d.add_text(f.arrays, name);
                    for (i, item) in items.iter().enumerate() {
                        add_value(&mut d, m, item).map_err(|e| EngineError::invalid(format!("meta.{name}[{i}]"), e))?;
                    }
                }
                v => add_value(&mut d, m, v).map_err(|e| EngineError::invalid(format!("meta.{name}"), e))?,
            }
        }
        Ok(d)
    }

    /// Whether a document with this id is live in the current snapshot.
    pub fn contains_id(&self, id: &str) -> Result<bool, EngineError> {
        let q = TermQuery::new(Term::from_field_text(self.fields.id, id), IndexRecordOption::Basic);
        Ok(self.current().searcher.search(&q, &Count)? > 0)
    }

    /// A fresh id that no live document and none of `taken` uses.
    pub fn mint_id(&self, taken: &HashSet<String>) -> Result<String, EngineError> {
        loop {
            let id = format!("doc-{}", uuid::Uuid::new_v4().simple());
            if !taken.contains(&id) && !self.contains_id(&id)? {
                return Ok(id);
            }
        }
    }

    /// Upserts prepared documents and commits: each id's previous version is deleted, then the
    /// new one added, so re-adding an id replaces it. Durable when this returns (tantivy
    /// commit: segments and `meta.json` are fsynced). `cancelled` is polled before the commit;
    /// a cancelled batch is rolled back and nothing is written.
    pub fn write(
        &self,
        writer: &mut IndexWriter,
        docs: Vec<(String, TantivyDocument)>,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<String, EngineError> {
        if cancelled() {
            return Err(EngineError::Cancelled);
        }
        let staged = (|| {
            for (id, doc) in docs {
                writer.delete_term(Term::from_field_text(self.fields.id, &id));
                writer.add_document(doc)?;
            }
            Ok::<_, EngineError>(())
        })();
        if let Err(e) = staged {
            writer.rollback()?;
            return Err(e);
        }
        if cancelled() {
            writer.rollback()?;
            return Err(EngineError::Cancelled);
        }
        let opstamp = writer.commit()?;
        self.publish(opstamp)?;
        Ok(self.token(opstamp))
    }

    /// Deletes documents by id and commits; returns how many live documents were removed.
    /// Absent ids are not an error; when none is present nothing is committed.
    pub fn delete(&self, writer: &mut IndexWriter, ids: &[String]) -> Result<u64, EngineError> {
        let unique: HashSet<&String> = ids.iter().collect();
        let terms: Vec<Term> = unique.iter().map(|id| Term::from_field_text(self.fields.id, id)).collect();
        if terms.is_empty() {
            return Ok(0);
        }
        // The writer lock is held and every commit publishes, so the current snapshot is
        // exactly the committed state the deletes apply to.
        let present = self.current().searcher.search(&TermSetQuery::new(terms.clone()), &Count)? as u64;
        if present == 0 {
            return Ok(0);
        }
        for t in terms {
            writer.delete_term(t);
        }
        let opstamp = writer.commit()?;
        self.publish(opstamp)?;
        Ok(present)
    }

    /// Loads documents in bulk (the `index` command): upserts each, mints ids for id-less
    /// documents, commits once at the end. `on_doc` is called after each input item.
    pub fn load<E: std::fmt::Display>(
        &self,
        docs: impl Iterator<Item = Result<CorpusDoc, E>>,
        trust: TrustLevel,
        source: &str,
        strict: bool,
        mut on_item: impl FnMut(Option<String>),
    ) -> Result<LoadStats, EngineError> {
        let writer_lock = self.writer();
        let mut writer = writer_lock.blocking_lock();
        let had_docs = self.num_docs() > 0;
        let mut seen: HashSet<String> = HashSet::new();
        let mut stats = LoadStats::default();
        let result = (|| {
            for item in docs {
                let doc = match item {
                    Ok(d) => d,
                    Err(e) if strict => return Err(EngineError::Config(format!("{e} (aborted: --strict)"))),
                    Err(e) => {
                        stats.skipped += 1;
                        on_item(Some(format!("{e} (skipped)")));
                        continue;
                    }
                };
                let id = match &doc.id {
                    Some(id) => id.clone(),
                    None => self.mint_id(&seen)?,
                };
                let prepared = match self.prepare(&doc, &id, trust, source) {
                    Ok(p) => p,
                    Err(e) if strict => return Err(EngineError::Config(format!("document '{id}': {e} (aborted)"))),
                    Err(e) => {
                        stats.skipped += 1;
                        on_item(Some(format!("document '{id}': {e} (skipped)")));
                        continue;
                    }
                };
                if had_docs || seen.contains(&id) {
                    writer.delete_term(Term::from_field_text(self.fields.id, &id));
                }
                writer.add_document(prepared)?;
                seen.insert(id);
                stats.indexed += 1;
                on_item(None);
            }
            Ok(())
        })();
        if let Err(e) = result {
            writer.rollback()?;
            return Err(e);
        }
        let opstamp = writer.commit()?;
        self.publish(opstamp)?;
        stats.total = self.num_docs();
        stats.index_version = self.token(opstamp);
        Ok(stats)
    }

    // ---------------------------------------------------------------- search

    /// The ranking query for analyzed terms: one BM25 term query per distinct term on the
    /// body (and on the title when `title_boost > 0`), weighted by the term's count in the
    /// query, OR-ed together.
    fn text_query(&self, terms: &[String]) -> Box<dyn Query> {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for t in terms {
            match index.get(t.as_str()) {
                Some(&i) => counts[i].1 += 1,
                None => {
                    index.insert(t, counts.len());
                    counts.push((t, 1));
                }
            }
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let weighted = |q: TermQuery, w: f32| -> Box<dyn Query> {
            if w == 1.0 { Box::new(q) } else { Box::new(BoostQuery::new(Box::new(q), w)) }
        };
        for (t, n) in counts {
            let n = n as f32;
            let body = TermQuery::new(Term::from_field_text(self.fields.text, t), IndexRecordOption::WithFreqs);
            clauses.push((Occur::Should, weighted(body, n)));
            if self.options.title_boost > 0.0 {
                let title = TermQuery::new(Term::from_field_text(self.fields.title, t), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, weighted(title, n * self.options.title_boost)));
            }
        }
        Box::new(BooleanQuery::new(clauses))
    }

    /// A stable fingerprint of what defines a ranking, carried in cursors so a cursor cannot
    /// be replayed against a different query.
    fn fingerprint(req: &SearchRequest) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for b in bytes.iter().chain([0xffu8].iter()) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        feed(req.query.as_bytes());
        feed(req.filter.as_ref().map(|f| f.to_value().to_string()).unwrap_or_default().as_bytes());
        feed(req.min_score.map(|m| m.to_string()).unwrap_or_default().as_bytes());
        feed(req.recency.as_ref().map(|r| format!("{}:{}", r.field, r.half_life_days)).unwrap_or_default().as_bytes());
        h
    }

    /// Runs one search: resolves the snapshot (pinned, from the cursor, or current), analyzes
    /// the query, collects one page plus one look-ahead hit, and materialises the hits.
    pub fn search(&self, req: &SearchRequest, hooks: &Hooks<'_>) -> Result<SearchPage, EngineError> {
        let fp = Self::fingerprint(req);
        let mut notes = Vec::new();
        // Snapshot, offset and the recency clock: from the cursor, else fresh.
        let (snap, offset, now_ms) = match &req.cursor {
            Some(c) => {
                let cur = Cursor::decode(c)?;
                if cur.offset > MAX_OFFSET {
                    return Err(EngineError::invalid(
                        "cursor",
                        format!("pages may start at rank {MAX_OFFSET} at most; narrow the query or filter"),
                    ));
                }
                if cur.fingerprint != fp {
                    return Err(EngineError::invalid(
                        "cursor",
                        "this cursor belongs to a different query (query, filter, minScore and recency must not change between pages)",
                    ));
                }
                if let Some(v) = &req.index_version
                    && *v != cur.version
                {
                    return Err(EngineError::invalid(
                        "cursor",
                        format!("cursor is for indexVersion '{}', but '{v}' was pinned", cur.version),
                    ));
                }
                let snap = self.pinned(&cur.version).map_err(|_| {
                    EngineError::CursorExpired(format!(
                        "cursor expired: snapshot '{}' is no longer held; restart pagination",
                        cur.version
                    ))
                })?;
                (snap, cur.offset, cur.now_ms)
            }
            None => {
                let snap = match &req.index_version {
                    Some(v) => self.pinned(v)?,
                    None => self.current(),
                };
                let now = snap.published_ms;
                (snap, 0, now)
            }
        };
        let version = self.token(snap.opstamp);
        let searcher = &snap.searcher;

        let mut analyzer = self.analyzer.clone();
        let terms = analyzer::terms(&mut analyzer, &req.query);
        if terms.len() > self.options.max_query_terms {
            return Err(EngineError::invalid(
                "query",
                format!(
                    "query has {} terms after analysis; at most {} are allowed",
                    terms.len(),
                    self.options.max_query_terms
                ),
            ));
        }
        let empty = |notes: Vec<String>| SearchPage {
            hits: Vec::new(),
            index_version: version.clone(),
            next_cursor: None,
            matched: 0,
            candidates: 0,
            terms: terms.len(),
            notes,
        };
        if terms.is_empty() {
            notes.push("query has no searchable terms after analysis (only stopwords or punctuation)".into());
            return Ok(empty(notes));
        }
        let text = self.text_query(&terms);
        let query: Box<dyn Query> = match &req.filter {
            None => text,
            Some(f) => {
                let compiled = filter::compile(f, &self.fields, searcher, &self.analyzer)?;
                Box::new(BooleanQuery::new(vec![
                    (Occur::Must, text),
                    (Occur::Must, Box::new(ConstScoreQuery::new(compiled, 0.0))),
                ]))
            }
        };
        hooks.check()?;

        let k = req.k.max(1);
        let window = TopDocs::with_limit(k + 1).and_offset(offset);
        let (ranked, matched): (Vec<(f32, f32, DocAddress)>, usize) = match &req.recency {
            None => {
                let (top, n) = searcher.search(&query, &(window.order_by_score(), Count))?;
                (top.into_iter().map(|(s, a)| (s, s, a)).collect(), n)
            }
            Some(r) => {
                let m = self.date_field(&r.field)?;
                let column = m.column.clone();
                let half_life_ms = r.half_life_days * 86_400_000.0;
                let tweak = window.tweak_score(move |segment: &tantivy::SegmentReader| {
                    let col = segment.fast_fields().column_opt::<i64>(&column).ok().flatten();
                    move |doc: tantivy::DocId, score: tantivy::Score| {
                        let decay = col.as_ref().and_then(|c| c.first(doc)).map_or(0.0, |date| {
                            let age = (now_ms - date).max(0) as f64;
                            0.5f64.powf(age / half_life_ms)
                        });
                        ((score as f64 * decay) as f32, score)
                    }
                });
                let (top, n) = searcher.search(&query, &(tweak, Count))?;
                (top.into_iter().map(|((s, raw), a)| (s, raw, a)).collect(), n)
            }
        };
        let matched = matched as u64;
        if let Some(p) = hooks.progress {
            p(0.5, format!("recall matched {matched} documents"), Vec::new());
        }

        // Page, cut at minScore (the list is sorted, so the first miss ends it).
        let passes = |s: f32| req.min_score.is_none_or(|m| f64::from(s) >= m);
        let more = ranked.len() > k && passes(ranked[k].0);
        let page: Vec<(f32, f32, DocAddress)> = ranked.into_iter().take(k).take_while(|(s, _, _)| passes(*s)).collect();
        let mut hits = Vec::with_capacity(page.len());
        let total = page.len().max(1);
        for chunk in page.chunks(CHUNK) {
            hooks.check()?;
            let mut part = Vec::with_capacity(chunk.len());
            for &(score, raw, addr) in chunk {
                part.push(self.hit(searcher, addr, score, raw, req.include_text)?);
            }
            if let Some(p) = hooks.progress {
                let done = hits.len() + part.len();
                p(0.5 + 0.5 * done as f64 / total as f64, format!("{done} hits"), part.clone());
            }
            hits.extend(part);
        }
        let next_cursor = more.then(|| {
            Cursor { version: version.clone(), offset: offset + hits.len(), fingerprint: fp, now_ms }.encode()
        });
        let candidates = matched.min(req.candidate_k.max(offset + k) as u64);
        Ok(SearchPage { hits, index_version: version, next_cursor, matched, candidates, terms: terms.len(), notes })
    }

    fn date_field(&self, name: &str) -> Result<&MetaField, EngineError> {
        match self.fields.filterable.get(name) {
            Some(m) if m.spec.ty == FieldType::Date => Ok(m),
            Some(m) => Err(EngineError::invalid("recency.field", format!("field '{name}' is {}, not date", m.spec.ty))),
            None => Err(EngineError::invalid("recency.field", format!("field '{name}' is not a declared date field"))),
        }
    }

    fn hit(
        &self,
        searcher: &Searcher,
        addr: DocAddress,
        score: f32,
        raw: f32,
        include_text: bool,
    ) -> Result<Hit, EngineError> {
        let f = &self.fields;
        let doc: TantivyDocument = searcher.doc(addr)?;
        let text_of = |field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
        let id = text_of(f.id).unwrap_or_default();
        let mut hit = Hit::new(id.as_str(), f64::from(score));
        hit.unit = Some("document".into());
        hit.scores = Some([("sparse".to_owned(), f64::from(raw))].into_iter().collect());
        if include_text {
            hit.text = text_of(f.text_raw);
        }
        if let Some(Ok(Value::Object(meta))) = text_of(f.meta).map(|m| serde_json::from_str::<Value>(&m)) {
            hit.meta = (!meta.is_empty()).then_some(meta as Meta);
        }
        hit.citation = Some(Citation { source: text_of(f.source), title: text_of(f.title_raw), ..Default::default() });
        hit.trust = Some(Trust {
            level: text_of(f.trust).unwrap_or_else(|| TrustLevel::Untrusted.as_str().to_owned()),
            score: None,
            injection_suspected: None,
            sanitized: None,
        });
        Ok(hit)
    }

    /// The tantivy index (for tests and tools).
    pub fn index(&self) -> &Index {
        &self.index
    }
}

fn describe(fields: &[FieldSpec]) -> String {
    fields.iter().map(|f| format!("{}:{}", f.name, f.ty)).collect::<Vec<_>>().join(", ")
}

fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Adds one scalar metadata value to its field, checking it against the declared type.
fn add_value(d: &mut TantivyDocument, m: &MetaField, v: &Value) -> Result<(), String> {
    let name = &m.spec.name;
    let ty = &m.spec.ty;
    let bad = |want: &str| format!("field '{name}' is {ty}: expected {want}, got {v}");
    match ty {
        FieldType::Int => {
            let n = v
                .as_i64()
                .or_else(|| v.as_f64().filter(|x| x.fract() == 0.0 && x.abs() < 9.0e15).map(|x| x as i64))
                .ok_or_else(|| bad("an integer"))?;
            d.add_i64(m.field, n);
        }
        FieldType::Float => d.add_f64(m.field, v.as_f64().ok_or_else(|| bad("a number"))?),
        FieldType::Bool => d.add_bool(m.field, v.as_bool().ok_or_else(|| bad("a boolean"))?),
        FieldType::Date => {
            let ms = date_to_epoch_ms(v).ok_or_else(|| bad("an RFC 3339 date or integer epoch milliseconds"))?;
            d.add_i64(m.field, ms);
        }
        _ => {
            let s = v.as_str().ok_or_else(|| bad("a string"))?;
            d.add_text(m.field, s);
            if let Some(tokens) = m.tokens {
                d.add_text(tokens, s);
            }
        }
    }
    Ok(())
}

/// A pagination cursor (§10): the snapshot, the offset of the next page, the fingerprint of
/// the ranking and the recency clock, so every page is cut from the same ranking.
struct Cursor {
    version: String,
    offset: usize,
    fingerprint: u64,
    now_ms: i64,
}

impl Cursor {
    fn encode(&self) -> String {
        format!("{}.{}.{:016x}.{}", self.version, self.offset, self.fingerprint, self.now_ms)
    }

    fn decode(s: &str) -> Result<Self, EngineError> {
        let bad = || EngineError::invalid("cursor", "not a cursor issued by this server");
        let parts: Vec<&str> = s.split('.').collect();
        let [version, offset, fp, now] = parts.as_slice() else { return Err(bad()) };
        Ok(Self {
            version: (*version).to_owned(),
            offset: offset.parse().map_err(|_| bad())?,
            fingerprint: u64::from_str_radix(fp, 16).map_err(|_| bad())?,
            now_ms: now.parse().map_err(|_| bad())?,
        })
    }
}
