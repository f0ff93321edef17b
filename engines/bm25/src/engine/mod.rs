//! The BM25 engine: a tantivy index with a writer/reader pair, a ring of recent snapshots,
//! hand-built term queries and the write paths (bulk load, upsert, delete).
//!
//! Everything here is blocking; the RCP handlers in [`crate::service`] run it on
//! `spawn_blocking`. Reads never take the writer lock: each search runs on one immutable
//! `Searcher` (a consistent snapshot), published after every commit.
//!
//! One file per purpose: `snapshots` (the published ring and `indexVersion` pins, §7.7.1),
//! `writes` (document preparation, upserts, deletes and bulk loads, §7.10, §7.11), `group`
//! (group commit of concurrent writes), `search`
//! (query building and hit materialisation), `rank` (the queries a search ranks with, and their
//! fusion), `rm3` (query expansion by pseudo-relevance feedback, §7.8) and `cursor`
//! (pagination cursors, §10), `units` (chunk records and ranking documents by their best
//! chunk, §7.7.2).
//! This file holds the [`Engine`] itself and how it is opened or created.

mod cursor;
mod group;
mod rank;
mod rm3;
mod search;
mod snapshots;
mod units;
mod writes;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tantivy::directory::MmapDirectory;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

use crate::analyzer::{self, ANALYZER};
use crate::error::EngineError;
use crate::integrity::{self, DirState};
use crate::schema::{self, Config, FieldSpec, Fields};
use crate::splade::SparseEncoder;

pub use group::{CancelFlag, GroupCommit, MAX_GROUP, WriteOp, WriteOutcome};
pub use rank::RRF_K;
pub use rm3::{Expansion, Rewrite, Rm3, WeightedTerm};
pub use search::{Hooks, RecencySpec, SearchPage, SearchRequest, Unit};
use snapshots::{Snapshot, Snapshots};
pub(crate) use writes::PARENT;
pub use writes::{LoadStats, Record};

/// The trust level of a document (§7.7 `hit.trust`, §15.1): the one every engine records.
pub use rcp_corpus::trust::TrustLevel;

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
    /// Verify every segment file's checksum when opening an existing index (structural
    /// checks always run; see [`crate::integrity`]).
    pub verify_checksums: bool,
    /// Rank by learned-sparse dot product instead of BM25 ([`crate::splade`]): a new index
    /// stores every document's expansion; an existing one must have been built with the same
    /// model.
    pub learned_sparse: Option<Arc<dyn SparseEncoder>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            title_boost: DEFAULT_TITLE_BOOST,
            keep_snapshots: 16,
            max_query_terms: 1024,
            writer_heap: 64 << 20,
            writer_threads: 1,
            verify_checksums: true,
            learned_sparse: None,
        }
    }
}

impl EngineOptions {
    /// The identity of the learned-sparse model, as recorded in an index's configuration.
    pub fn learned_sparse_identity(&self) -> Option<String> {
        self.learned_sparse.as_ref().map(|e| e.identity().to_owned())
    }
}

/// Bytes of stored documents compressed together in one doc-store block (tantivy's default is
/// 16 KiB). Fetching a hit decompresses its whole block; with k=100 hits spread over the
/// index that was 28% of a loaded engine's CPU at 16 KiB.
pub const DOC_STORE_BLOCK_BYTES: usize = 4096;

/// Decompressed doc-store blocks each segment reader keeps (tantivy's default is 100). Every
/// pinned snapshot holds its own segment readers, so with tantivy's default the caches of
/// the current and past snapshots held ~30 MB on Cranfield under load; searches fetch their
/// hits in address order, which makes a few blocks enough.
pub const DOC_STORE_CACHE_BLOCKS: usize = 4;

/// Default title weight. On Cranfield (whose bodies repeat the title) 0.4–0.6 is best and 0
/// costs 0.02 nDCG@10; see the `bm25_cranfield` benchmark's `--sweep`.
pub const DEFAULT_TITLE_BOOST: f32 = 0.5;

/// The deepest rank a page may start at (§15.5): a cursor cannot make a search collect more.
pub const MAX_OFFSET: usize = 100_000;

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
    /// Opens the index in `dir`, creating it with `declared` fields if the directory does not
    /// exist or holds no index. For an existing index, `declared` must be empty or equal to its
    /// fields, and the index must verify (see [`Engine::open_existing`]).
    pub fn open(dir: &Path, declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        match integrity::state(dir) {
            DirState::Index => Self::open_existing(dir, declared, options),
            DirState::Missing | DirState::NoIndex => Self::create(dir, declared, options),
        }
    }

    /// Opens the existing index in `dir`. A directory that does not exist or holds no index
    /// is an error, and so is a damaged one ([`integrity::verify`]: configuration,
    /// `meta.json`, every committed segment file, checksums unless
    /// [`EngineOptions::verify_checksums`] is off); nothing in `dir` is changed then.
    pub fn open_existing(dir: &Path, declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        match integrity::state(dir) {
            DirState::Missing => {
                return Err(EngineError::NoIndex(format!(
                    "{} does not exist (pass --create to create a new, empty index there)",
                    dir.display()
                )));
            }
            DirState::NoIndex => {
                return Err(EngineError::NoIndex(format!(
                    "{} holds no rcp-bm25 index (pass --create to create a new, empty index there)",
                    dir.display()
                )));
            }
            DirState::Index => {}
        }
        let report = integrity::verify(dir, options.verify_checksums);
        if !report.is_ok() {
            return Err(EngineError::Integrity(report.refusal()));
        }
        let config = Config::load(dir)?
            .ok_or_else(|| EngineError::Integrity(format!("{}: {} vanished", dir.display(), schema::CONFIG_FILE)))?;
        let wanted = options.learned_sparse_identity();
        if config.learned_sparse != wanted {
            let scorer =
                |model: &Option<String>| model.as_deref().map_or("bm25".to_owned(), |m| format!("splade ({m})"));
            return Err(EngineError::Config(format!(
                "{} was built with the {} scorer; it cannot be served with {} (pass --scorer {}, or index into a new data dir)",
                dir.display(),
                scorer(&config.learned_sparse),
                scorer(&wanted),
                if config.learned_sparse.is_some() { "splade" } else { "bm25" },
            )));
        }
        if !declared.is_empty() && declared != config.fields {
            return Err(EngineError::Config(format!(
                "{} was created with fields [{}]; it cannot change to [{}] (index into a new data dir instead)",
                dir.display(),
                describe(&config.fields),
                describe(&declared)
            )));
        }
        let (tantivy_schema, fields) = schema::build(&config);
        let directory = MmapDirectory::open(dir.join(schema::INDEX_DIR))?;
        let index = Index::open(directory)?;
        if index.schema() != tantivy_schema {
            return Err(EngineError::Integrity(format!(
                "{}: the index schema does not match the fields in {}",
                dir.display(),
                schema::CONFIG_FILE
            )));
        }
        Self::start(index, fields, config, options)
    }

    /// Creates a new, empty index with `declared` fields in `dir` (created if missing; it must
    /// hold no index). The tantivy index is created first and `rcp-bm25.json` written last,
    /// so an interrupted creation leaves no configuration behind.
    pub fn create(dir: &Path, declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        if integrity::state(dir) == DirState::Index {
            return Err(EngineError::Config(format!("{} already holds an index", dir.display())));
        }
        let config = Config::with_learned_sparse(declared, options.learned_sparse_identity());
        let (tantivy_schema, fields) = schema::build(&config);
        let index_dir = dir.join(schema::INDEX_DIR);
        std::fs::create_dir_all(&index_dir).map_err(|e| EngineError::io(&index_dir, e))?;
        let directory = MmapDirectory::open(&index_dir)?;
        // A directory classified as holding no index may still have an empty meta.json left by
        // an interrupted creation: reuse it rather than fail.
        let index = Index::open_or_create(directory, tantivy_schema)?;
        config.save(dir)?;
        Self::start(index, fields, config, options)
    }

    /// An index held in memory (the built-in demo corpus; nothing is persisted).
    pub fn in_ram(declared: Vec<FieldSpec>, options: EngineOptions) -> Result<Self, EngineError> {
        let config = Config::with_learned_sparse(declared, options.learned_sparse_identity());
        let (tantivy_schema, fields) = schema::build(&config);
        Self::start(Index::create_in_ram(tantivy_schema), fields, config, options)
    }

    fn start(mut index: Index, fields: Fields, config: Config, options: EngineOptions) -> Result<Self, EngineError> {
        index.tokenizers().register(ANALYZER, analyzer::english());
        // Segments written from now on (bulk and serving alike); older ones keep theirs.
        index.settings_mut().docstore_blocksize = DOC_STORE_BLOCK_BYTES;
        let writer = if options.writer_threads == 0 {
            index.writer(options.writer_heap)
        } else {
            // A serving writer commits small groups: one indexing thread, one merge thread
            // (tantivy's default is four) and no doc-store compressor thread beside each new
            // segment keep the engine's threads few and fixed.
            index.settings_mut().docstore_compress_dedicated_thread = false;
            let threads = options.writer_threads;
            index.writer_with_options(
                tantivy::indexer::IndexWriterOptions::builder()
                    .num_worker_threads(threads)
                    .num_merge_threads(1)
                    .memory_budget_per_thread(options.writer_heap / threads)
                    .build(),
            )
        };
        let writer = writer.map_err(|e| match e {
            tantivy::TantivyError::LockFailure(..) => EngineError::Config(
                "the index is open for writing by another process (a running `rcp-bm25 serve` or `index`?)".into(),
            ),
            other => other.into(),
        })?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
            .try_into()?;
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

    /// Whether the index can hold chunked documents (format 2, §7.10): `index.chunking` and
    /// `retrieve.units` `chunk`.
    pub fn chunking(&self) -> bool {
        self.fields.chunks.is_some()
    }

    /// The learned-sparse model the index ranks with, if any ([`crate::splade`]).
    pub fn learned_sparse(&self) -> Option<&str> {
        self.config.learned_sparse.as_deref()
    }

    /// The tantivy fields.
    pub fn fields(&self) -> &Fields {
        &self.fields
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
