//! `rcpctl memory build|recall`: an engine's memory (§7.17), built over its live index or over the
//! documents of a JSONL file, and recalled as clues to feed back into `retrieve` or `graph`.
//!
//! With `--registry` both go through the federation core: `build` is routed to one engine
//! (`--engine ID`, else the capable engine of highest priority) and the memory id comes back as
//! `<engine>:<id>`; `recall` with such an id goes back to that engine, and without one is asked
//! of every engine with memory, the clues and hits merged.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rcp_wire::capabilities::Capability;
use rcp_wire::index::Document;
use rcp_wire::memory::{MemoryBuildParams, MemoryRecallParams};
use rcp_wire::request;

use crate::federated;
use crate::index::document;
use crate::out::outln;
use crate::print_json;
use crate::table::{self, clip};
use crate::target::{self, Auth, Target};

/// Inline documents `rcpctl memory build --documents` sends at most; a larger corpus belongs in
/// the engine's index (`rcpctl index add`), which `memory build` then covers without a file.
const MAX_INLINE_DOCS: usize = 10_000;

/// `rcpctl memory` subcommands.
#[derive(Subcommand)]
pub(crate) enum MemoryOp {
    /// Build a memory (or update one with --memory-id) over the engine's live index, or over
    /// the documents of a JSONL file (--documents).
    Build {
        #[command(flatten)]
        target: Target,
        /// A JSONL file of documents ({id?, text} or BEIR corpus lines) to build over instead
        /// of the live index.
        #[arg(long, value_name = "FILE")]
        documents: Option<PathBuf>,
        /// The memory to update; absent creates one.
        #[arg(long, value_name = "ID")]
        memory_id: Option<String>,
        /// global (corpus-wide) or session (trajectory-scoped): one the engine lists in
        /// memory.scopes.
        #[arg(long)]
        scope: Option<String>,
        /// With --registry: the engine (its registry id) that builds the memory (sent as
        /// `_meta.engine`); without it, the capable engine of highest priority. A --memory-id
        /// (`<engine>:<id>`) names its engine itself.
        #[arg(long, value_name = "ID", conflicts_with_all = ["stdio", "http", "memory_id"])]
        engine: Option<String>,
    },
    /// Recall clues (surrogate queries, seed node ids) for a query from a memory.
    Recall {
        #[command(flatten)]
        args: RecallArgs,
    },
}

/// `rcpctl memory recall` flags.
#[derive(Args)]
pub(crate) struct RecallArgs {
    #[command(flatten)]
    pub target: Target,
    /// The query.
    pub query: String,
    /// The memory to recall from (as `rcpctl memory build` printed it); absent lets the engine pick
    /// (with --registry: every engine with memory is asked).
    #[arg(long, value_name = "ID")]
    pub memory_id: Option<String>,
    /// The trajectory this call belongs to (§7.7.3).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// How many clues.
    #[arg(short, long, value_parser = clap::value_parser!(u32).range(1..))]
    pub n: Option<u32>,
}

/// The documents of a JSONL file; an unreadable line is an error naming it.
fn read_documents(path: &Path) -> Result<Vec<Document>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut docs = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        if docs.len() == MAX_INLINE_DOCS {
            return Err(format!(
                "{}: more than {MAX_INLINE_DOCS} documents: add them to the engine's index (rcpctl index add) and run \
                 rcpctl memory build without --documents",
                path.display()
            ));
        }
        docs.push(document(&line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?);
    }
    Ok(docs)
}

/// Runs one `rcpctl memory` subcommand.
pub(crate) async fn run(op: &MemoryOp, auth: &Auth, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    match op {
        MemoryOp::Build { target, documents, memory_id, scope, engine } => {
            let documents = documents.as_deref().map(read_documents).transpose()?;
            let params =
                MemoryBuildParams { documents, memory_id: memory_id.clone(), scope: scope.clone(), meta: None };
            let res = match &target.registry {
                Some(path) => {
                    let fed = federated::open(path, auth).await?;
                    let meta = federated::engine_meta(engine.as_deref());
                    let res = fed.fed.memory_build(MemoryBuildParams { meta, ..params }).await;
                    if let Ok(s) = &res {
                        fed.served(&s.notes);
                    }
                    fed.close().await;
                    res?.answer
                }
                None => {
                    let c = target::connect(target, auth, Some(Capability::Memory)).await?;
                    let res = c.memory_build(params).await;
                    let _ = c.shutdown().await;
                    res?
                }
            };
            if json {
                print_json(&res);
            } else {
                let tokens = res.tokens.map(|t| format!(" ({t} tokens)")).unwrap_or_default();
                outln!("memory {}{tokens}", res.memory_id);
            }
        }
        MemoryOp::Recall { args } => {
            let params = MemoryRecallParams {
                query: args.query.clone(),
                memory_id: args.memory_id.clone(),
                session_id: args.session.clone(),
                n: args.n,
                meta: None,
            };
            let res = match &args.target.registry {
                Some(path) => {
                    let fed = federated::open(path, auth).await?;
                    let res = fed.fed.memory_recall(params).await;
                    match &res {
                        // A federated memory id is routed back to the engine that built it.
                        Ok(m) if args.memory_id.is_some() => fed.served(&m.notes),
                        Ok(m) => fed.merged(m.answer.meta.as_ref(), &m.notes),
                        Err(_) => {}
                    }
                    fed.close().await;
                    res?.answer
                }
                None => {
                    let c = target::connect(&args.target, auth, Some(Capability::Memory)).await?;
                    let res = c.request::<request::MemoryRecall>(&params).await;
                    let _ = c.shutdown().await;
                    res?
                }
            };
            if json {
                print_json(&res);
                return Ok(());
            }
            outln!("{:>6}  {:<24}  query", "weight", "seeds");
            for clue in &res.clues {
                let w = clue.weight.map(|w| format!("{w:.3}")).unwrap_or_else(|| "-".into());
                let seeds = clue.seed_ids.as_deref().unwrap_or_default().join(", ");
                outln!("{w:>6}  {:<24}  {}", clip(&seeds, 24), clue.query.as_deref().unwrap_or(""));
            }
            if res.clues.is_empty() {
                outln!("(no clue for this query)");
            }
            if let Some(hits) = res.hits.as_ref().filter(|h| !h.is_empty()) {
                outln!("draft hits:");
                table::print_hits(hits);
            }
        }
    }
    Ok(())
}
