//! The `rcp-bm25` command line: `index`, `serve`, `verify` and `repair`, run by the binary
//! through [`rcp_server::cli::main`] (and by the federation example as a child process of its
//! own executable).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};

use rcp_server::cli::{DataDir, DataDirArgs, EngineCli, QuarantineCmd, ServeArgs};
use rcp_server::{EngineStats, LogFormat, Server, SessionOptions, Status};
use rcp_wire::lifecycle::ConformanceLevel;

use rcp_corpus::policy::NotIndexed;

use crate::analyzer::WordCounter;
use crate::engine::{DEFAULT_TITLE_BOOST, Engine, EngineOptions, Rm3, TrustLevel};
use crate::error::EngineError;
use crate::integrity::repair::{self, Repair};
use crate::integrity::{self, DirState};
use crate::schema::{self, FieldSpec};
use crate::splade::ScorerArgs;
use crate::{Bm25, ServiceOptions};
use rcp_corpus::chunking::ChunkPolicy;

/// A BM25 retrieval engine (tantivy) speaking RCP, the Retrieval Context Protocol.
///
/// Build an index from a JSONL corpus with `index`, then `serve` it over stdio (NDJSON) or
/// HTTP. Without `--data-dir`, `serve` answers from a built-in 30-document demo corpus, so
/// it runs with zero set-up.
#[derive(Debug, Parser)]
#[command(name = "rcp-bm25", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "Examples:
  rcp-bm25 index --data-dir ./idx --field year:int --field lang:keyword corpus.jsonl
  rcp-bm25 serve --data-dir ./idx            # NDJSON on stdin/stdout
  rcp-bm25 serve --data-dir ./idx --http 127.0.0.1:8080
  rcp-bm25 serve --data-dir ./new --create --field lang:keyword   # start empty, fill with index/add
  rcp-bm25 verify --data-dir ./idx           # exit 0 when whole, 1 when damaged
  rcp-bm25 repair --data-dir ./idx           # keep what verifies, back up the original
  rcp-bm25 serve                             # built-in demo corpus (topic:keyword, year:int)";

#[derive(Debug, Subcommand)]
enum Command {
    /// Build or extend an index from a JSONL corpus.
    ///
    /// One JSON object per line: `_id` or `id` (string or number; minted when absent),
    /// `title`, `text` (required); every other key, and the keys of a `metadata` object,
    /// become metadata, returned in `hit.meta`. Metadata keys declared with `--field` or
    /// `--fields` are also filterable (§8). Re-indexing an id replaces the document.
    ///
    /// Unusable lines (invalid UTF-8, invalid JSON, no `text`, a metadata value of the wrong
    /// type) are reported as FILE:LINE on stderr and skipped; with `--strict` the first one
    /// aborts the run and nothing of it is committed. All documents of one run become
    /// visible in one commit at the end.
    Index(IndexArgs),
    /// Serve an index over RCP (stdio by default).
    ///
    /// `retrieve` ranks by BM25 over title and body with an English analyzer; filters,
    /// pagination cursors, snapshots (`indexVersion`), streaming, logs and citations are
    /// advertised. `index/add` upserts (durable when answered) and `index/delete` removes
    /// documents; concurrent writes share one commit (group commit) while reads continue on
    /// the last snapshot. The data directory must hold an index, which is verified before it
    /// is served (a damaged one is refused); `--create` starts a new, empty one instead.
    Serve(Box<ServeCmd>),
    /// Check a data directory: configuration, `meta.json`, and every committed segment file
    /// (presence and checksum). Prints what is broken; exit code 0 when whole, 1 otherwise.
    Verify(DirArgs),
    /// Salvage a damaged data directory: the original is moved aside untouched
    /// (`DIR.bak-<unix seconds>`) and the index rebuilt from the stored documents of every
    /// segment that verifies. Prints exactly what was kept and dropped.
    Repair(RepairArgs),
    /// List or release the hits that `feedback` quarantined (`serve --quarantine-threshold`).
    #[command(subcommand)]
    Quarantine(QuarantineCmd),
}

#[derive(Debug, Args)]
struct DirArgs {
    /// The data directory.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
}

#[derive(Debug, Args)]
struct RepairArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The scorer the index was built with: a learned-sparse index is rebuilt with its model.
    #[command(flatten)]
    scorer: ScorerArgs,
}

#[derive(Debug, Clone, Args)]
struct FieldArgs {
    /// A filterable metadata field, NAME:TYPE with TYPE one of keyword, text, int, float,
    /// bool, date (RFC 3339 or epoch ms). Repeatable. Fixed when the index is created.
    #[arg(long = "field", value_name = "NAME:TYPE", value_parser = FieldSpec::parse)]
    fields: Vec<FieldSpec>,

    /// A JSON file mapping field name to type, e.g. {"year": "int", "lang": "keyword"}.
    #[arg(long = "fields", value_name = "FILE")]
    fields_file: Option<PathBuf>,
}

impl FieldArgs {
    fn resolve(&self) -> anyhow::Result<Vec<FieldSpec>> {
        let mut all = self.fields.clone();
        if let Some(path) = &self.fields_file {
            all.extend(schema::read_fields_file(path)?);
        }
        Ok(schema::merge_fields(all)?)
    }
}

#[derive(Debug, Args)]
struct IndexArgs {
    /// Directory holding the index. A new index is built beside it (`DIR.partial-<pid>`) and
    /// moved into place only when the run succeeds; an existing one is verified and extended.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// The JSONL corpus.
    #[arg(value_name = "CORPUS.jsonl")]
    corpus: PathBuf,

    #[command(flatten)]
    fields: FieldArgs,

    /// Trust level recorded for these documents (`hit.trust.level`).
    #[arg(long, value_enum, default_value = "trusted")]
    trust: TrustArg,

    /// Citation source label (`hit.citation.source`); defaults to the corpus file name.
    #[arg(long, value_name = "LABEL")]
    source: Option<String>,

    /// Abort at the first unusable line instead of skipping it.
    #[arg(long)]
    strict: bool,

    /// Indexing memory budget in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    heap_mb: usize,

    #[command(flatten)]
    scorer: ScorerArgs,
}

#[derive(Debug, Args)]
struct ServeCmd {
    #[command(flatten)]
    dir: DataDirArgs,

    /// Skip the checksum verification of every segment file at start (the structural checks
    /// still run). Only for very large indexes whose open time matters more.
    #[arg(long, requires = "data_dir")]
    skip_verify: bool,

    #[command(flatten)]
    fields: FieldArgs,

    /// `retrieve.maxK`: larger `k`/`candidateK` are clamped.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_k: u64,

    /// Weight of title matches relative to body matches (0: body only).
    #[arg(long, value_name = "W", default_value_t = DEFAULT_TITLE_BOOST)]
    title_boost: f32,

    /// Past snapshots kept pinnable with `indexVersion`, besides the current one.
    #[arg(long, value_name = "N", default_value_t = 16)]
    keep_snapshots: usize,

    /// Trust level of documents written with `index/add` (never `trusted`).
    #[arg(long, value_enum, default_value = "community")]
    added_trust: TrustArg,

    /// RM3 (`query/transform`, `retrieve.rewrite`): feedback documents read per query.
    #[arg(long, value_name = "N", default_value_t = Rm3::default().fb_docs)]
    fb_docs: usize,

    /// RM3: expansion terms kept from the feedback documents.
    #[arg(long, value_name = "N", default_value_t = Rm3::default().fb_terms)]
    fb_terms: usize,

    /// RM3: the original query's share of the expanded query's weights, in [0,1].
    #[arg(long, value_name = "W", default_value_t = Rm3::default().original_query_weight, value_parser = unit_interval)]
    original_query_weight: f32,

    /// `index/add` `chunk:true`: most words in one chunk (sentence-aware windows).
    #[arg(long, value_name = "N", default_value_t = ChunkPolicy::default().max_words as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    chunk_words: u32,

    /// `index/add` `chunk:true`: most words a chunk repeats from the one before.
    #[arg(long, value_name = "N", default_value_t = ChunkPolicy::default().overlap_words as u32)]
    chunk_overlap: u32,

    #[cfg(feature = "rerank")]
    #[command(flatten)]
    rerank: rcp_rerank::RerankArgs,

    #[command(flatten)]
    scorer: ScorerArgs,

    #[command(flatten)]
    serve: ServeArgs,
}

/// A weight in `[0,1]` (`--original-query-weight`).
fn unit_interval(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(w) if (0.0..=1.0).contains(&w) => Ok(w),
        _ => Err(format!("'{s}' is not a number in [0,1]")),
    }
}

/// A `--trust` / `--added-trust` value (`hit.trust.level`, §15.1); converts into the engine's
/// [`TrustLevel`], which stays free of CLI concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TrustArg {
    /// Curated by the operator.
    Trusted,
    /// Contributed by known users.
    Community,
    /// Unknown provenance.
    Untrusted,
}

impl From<TrustArg> for TrustLevel {
    fn from(arg: TrustArg) -> Self {
        match arg {
            TrustArg::Trusted => TrustLevel::Trusted,
            TrustArg::Community => TrustLevel::Community,
            TrustArg::Untrusted => TrustLevel::Untrusted,
        }
    }
}

impl EngineCli for Cli {
    type Error = anyhow::Error;

    /// Commands other than `serve` print their own lines and log nothing.
    const LOGS: Option<LogFormat> = None;

    fn serve_args(&self) -> Option<&ServeArgs> {
        match &self.command {
            Command::Serve(args) => Some(&args.serve),
            _ => None,
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Index(args) => run_index(args),
            Command::Serve(args) => run_serve(*args),
            Command::Verify(args) => run_verify(&args),
            Command::Repair(args) => run_repair(&args),
            Command::Quarantine(cmd) => Ok(cmd.run(&mut std::io::stdout())?),
        }
    }
}

fn run_index(args: IndexArgs) -> anyhow::Result<()> {
    let declared = args.fields.resolve()?;
    let options = EngineOptions {
        writer_heap: args.heap_mb << 20,
        writer_threads: 0,
        learned_sparse: args.scorer.encoder()?,
        ..EngineOptions::default()
    };
    if integrity::state(&args.data_dir) == DirState::Index {
        let engine = Engine::open_existing(&args.data_dir, declared, options)?;
        let skipped = load(&engine, &args)?;
        drop(engine);
        return Ok(NotIndexed::check(skipped)?);
    }
    // A new index: build it beside the target and move it in only when the run succeeds, so a
    // failed or interrupted run never leaves an empty index that `serve` would open.
    let partial = partial_dir(&args.data_dir);
    let built = Engine::create(&partial, declared, options)
        .map_err(anyhow::Error::from)
        .and_then(|engine| load(&engine, &args));
    // Lines skipped do not fail the build: the valid ones are indexed, then the exit code says
    // that some were not (the ingestion policy, `rcp_corpus::policy`).
    match built.and_then(|skipped| move_into_place(&partial, &args.data_dir).map(|()| skipped)) {
        Ok(skipped) => Ok(NotIndexed::check(skipped)?),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

/// `DIR.partial-<pid>`, beside `dir`.
fn partial_dir(dir: &Path) -> PathBuf {
    let name = dir.file_name().map_or_else(|| "data".to_owned(), |n| n.to_string_lossy().into_owned());
    dir.with_file_name(format!("{name}.partial-{}", std::process::id()))
}

/// Moves a freshly built index from `partial` to `dir` (which does not exist or holds no
/// index): the whole directory when `dir` is absent or empty, else its two entries, the
/// configuration last (it is what marks the directory as an index).
fn move_into_place(partial: &Path, dir: &Path) -> anyhow::Result<()> {
    let io = |p: &Path, e: std::io::Error| anyhow::Error::new(e).context(p.display().to_string());
    let empty = std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(true);
    if empty {
        std::fs::rename(partial, dir).map_err(|e| io(dir, e))?;
        // Make the rename itself durable.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
        }
        return Ok(());
    }
    let index_dir = dir.join(schema::INDEX_DIR);
    if index_dir.exists() {
        // Classified as holding no index: at most lock files and an empty meta.json.
        std::fs::remove_dir_all(&index_dir).map_err(|e| io(&index_dir, e))?;
    }
    std::fs::rename(partial.join(schema::INDEX_DIR), &index_dir).map_err(|e| io(&index_dir, e))?;
    let config = dir.join(schema::CONFIG_FILE);
    std::fs::rename(partial.join(schema::CONFIG_FILE), &config).map_err(|e| io(&config, e))?;
    std::fs::remove_dir_all(partial).map_err(|e| io(partial, e))
}

/// Loads the corpus; the number of lines skipped (each reported on stderr as `FILE:LINE: ...`).
fn load(engine: &Engine, args: &IndexArgs) -> anyhow::Result<u64> {
    let total = rcp_corpus::count_lines(&args.corpus)?;
    let declared = engine.field_specs().iter().map(|f| (f.name.clone(), f.ty.clone())).collect();
    let docs = rcp_corpus::read_jsonl_checked(&args.corpus, declared)?;
    let source = args.source.clone().unwrap_or_else(|| {
        args.corpus.file_name().map_or_else(|| "corpus".to_owned(), |n| n.to_string_lossy().into_owned())
    });
    let bar = rcp_corpus::progress::bar(total, "");
    let started = Instant::now();
    let stats = engine.load(docs, args.trust.into(), &source, args.strict, |problem| {
        bar.inc(1);
        if let Some(p) = problem {
            bar.suspend(|| eprintln!("{p}"));
        }
    });
    bar.finish_and_clear();
    let stats = stats.map_err(|e| match e {
        EngineError::NotIndexed(n) => anyhow::Error::from(n),
        e => e.into(),
    })?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "indexed {} documents ({} skipped) in {secs:.2} s, {:.0} docs/s; {} now holds {} documents (indexVersion {})",
        stats.indexed,
        stats.skipped,
        stats.indexed as f64 / secs.max(1e-9),
        args.data_dir.display(),
        stats.total,
        stats.index_version
    );
    Ok(stats.skipped)
}

fn run_verify(args: &DirArgs) -> anyhow::Result<()> {
    let report = integrity::verify(&args.data_dir, true);
    if report.is_ok() {
        println!("{report}");
        Ok(())
    } else {
        Err(anyhow::anyhow!("{report}"))
    }
}

fn run_repair(args: &RepairArgs) -> anyhow::Result<()> {
    let options = EngineOptions { learned_sparse: args.scorer.encoder()?, ..EngineOptions::default() };
    match repair::repair_with(&args.dir.data_dir, options)? {
        Repair::Whole(report) => println!("{report}\nnothing to repair; nothing was changed"),
        Repair::Rebuilt(rebuilt) => println!("{rebuilt}"),
    }
    Ok(())
}

/// What `/readyz`, `/metrics` and the start-up line report: the index is open once serving.
struct IndexStatus {
    engine: Arc<Engine>,
    data_dir: Option<PathBuf>,
}

impl Status for IndexStatus {
    fn stats(&self) -> EngineStats {
        // The `indexVersion` token is `<uid>-<opstamp>`; the opstamp grows with every commit.
        let opstamp = self.engine.index_version().rsplit('-').next().and_then(|o| o.parse().ok());
        EngineStats {
            documents: Some(self.engine.num_docs()),
            index_version: opstamp,
            data_dir: self.data_dir.clone(),
            ..EngineStats::default()
        }
    }
}

fn run_serve(args: ServeCmd) -> anyhow::Result<()> {
    let declared = args.fields.resolve()?;
    let options = EngineOptions {
        title_boost: args.title_boost,
        keep_snapshots: args.keep_snapshots,
        verify_checksums: !args.skip_verify,
        learned_sparse: args.scorer.encoder()?,
        ..Default::default()
    };
    let started = Instant::now();
    let held = |dir: &Path| integrity::state(dir) == DirState::Index;
    let engine = match args.dir.resolve("rcp-bm25", held)? {
        DataDir::Create(dir) => Engine::open(dir, declared, options)?,
        DataDir::Existing(dir) => Engine::open_existing(dir, declared, options)?,
        DataDir::InMemory => {
            let fields = if declared.is_empty() { crate::builtin_fields() } else { declared };
            let engine = Engine::in_ram(fields, options)?;
            let docs = rcp_corpus::builtin().into_iter().map(Ok::<_, String>);
            engine.load(docs, TrustLevel::Trusted, "builtin", true, |_| {})?;
            engine
        }
    };
    args.dir.warn_if_in_memory("rcp-bm25");
    tracing::info!(
        data_dir = %args.dir.label(),
        documents = engine.num_docs(),
        index_version = %engine.index_version(),
        checksums_verified = args.dir.data_dir.is_some() && !args.skip_verify,
        open_ms = started.elapsed().as_millis() as u64,
        "rcp-bm25 index opened"
    );
    let service = Arc::new(Bm25::new(
        Arc::new(engine),
        ServiceOptions {
            max_k: args.max_k,
            added_trust: args.added_trust.into(),
            rm3: Rm3 {
                fb_docs: args.fb_docs,
                fb_terms: args.fb_terms,
                original_query_weight: args.original_query_weight,
                ..Rm3::default()
            },
            chunking: ChunkPolicy { max_words: args.chunk_words as usize, overlap_words: args.chunk_overlap as usize },
            ..Default::default()
        },
    ));
    let status = IndexStatus { engine: Arc::clone(service.engine()), data_dir: args.dir.data_dir.clone() };
    let builder = Server::builder("rcp-bm25", env!("CARGO_PKG_VERSION"))
        .status(status)
        .retrieve(Arc::clone(&service))
        .transform(Arc::clone(&service))
        .index(service)
        .session(SessionOptions::default())
        .token_counter(WordCounter)
        .streaming()
        .log()
        .conformance(ConformanceLevel::L2);
    #[cfg(feature = "rerank")]
    let builder = args.rerank.register(builder)?;
    let builder = args.serve.durable_feedback(builder, args.dir.dir())?;
    Ok(args.serve.run(builder)?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn trust_flags_convert_to_the_engine_level_of_the_same_wire_name() {
        for arg in TrustArg::value_variants() {
            let name = arg.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(name.as_deref(), Some(TrustLevel::from(*arg).as_str()));
        }
        let cli = Cli::try_parse_from(["rcp-bm25", "index", "--data-dir", "d", "--trust", "untrusted", "c.jsonl"])
            .expect("valid command line");
        let Command::Index(args) = cli.command else { panic!("expected the index subcommand") };
        assert_eq!(TrustLevel::from(args.trust), TrustLevel::Untrusted);
    }
}
