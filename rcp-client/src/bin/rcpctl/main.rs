//! `rcpctl`: a command-line client for RCP engines.
//!
//! ```sh
//! rcpctl info --stdio "rcp-bm25 serve"
//! rcpctl retrieve --http http://127.0.0.1:8080/rcp "wing lift" -k 5 --filter 'year>=1990'
//! rcpctl transform --stdio "rcp-bm25 serve" "wing lift" --method multi-query -n 3
//! rcpctl graph --stdio "rcp-dense serve" --op neighbors --seed doc-7 --hops 2
//! rcpctl feedback --http http://127.0.0.1:8080/rcp --session s1 --used doc-7 --reward doc-7=0.8
//! rcpctl memory recall --stdio "rcp-dense serve" "wing lift" -n 3
//! rcpctl graph --registry examples/rcp.json --op communities   # every graph engine, merged
//! rcpctl embed --registry examples/rcp.json "wing lift" --engine dense
//! rcpctl rerank --stdio "rcp-rerank serve" --query "wing lift" "lift of a wing" "heat transfer"
//! rcpctl federate examples/rcp.json "wing lift" -k 5 --fusion convex
//! rcpctl index add --http http://127.0.0.1:8080/rcp --token-env RCP_TOKEN corpus.jsonl
//! rcpctl eval ../shared/data/cranfield --registry examples/rcp.json --limit 50
//! rcpctl inspect --registry examples/rcp.json          # the RCP Inspector, in a browser
//! ```

mod embed;
mod eval;
mod eval_rerank;
mod explain;
mod federated;
mod feedback;
mod filter;
mod graph;
mod index;
mod inspect;
mod memory;
mod out;
mod rerank;
mod table;
mod target;
mod transform;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use clap_complete::Shell;
use out::outln;
use rcp_client::federation::EngineOutcome;
use rcp_client::{EngineSpec, Federation, FederationOptions, Registry, Transport};
use rcp_wire::RetrieveParams;
use rcp_wire::capabilities::Capability;
use rcp_wire::fusion::FusionMethod;
use rcp_wire::methods::Method;
use serde_json::json;
use target::{Auth, Target};

#[derive(Parser)]
#[command(name = "rcpctl", version, about = "Talk to RCP (Retrieval Context Protocol) engines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    auth: Auth,
}

#[derive(Subcommand)]
enum Command {
    /// Show an engine's identity, negotiated version and capabilities. With --json, the `info`
    /// result exactly as the engine sent it (capability objects verbatim: unknown keys, other
    /// spellings); --parsed prints it as this client understood it instead.
    Info {
        #[command(flatten)]
        target: Target,
        /// Print the result as parsed by this client (re-serialised from its types) as JSON.
        #[arg(long)]
        parsed: bool,
    },
    /// Run one query against one engine.
    Retrieve {
        #[command(flatten)]
        target: Target,
        /// The query text.
        query: String,
        /// How many hits.
        #[arg(short, long, default_value_t = 10)]
        k: u64,
        /// A metadata filter: JSON (§8) or FIELD OP VALUE with OP one of =, !=, >, >=, <, <=
        /// (e.g. 'year>=1990'); repeated flags are ANDed.
        #[arg(long, value_name = "FILTER")]
        filter: Vec<String>,
    },
    /// Rewrite a query with an engine's `query/transform` (e.g. rcp-bm25's RM3 `rewrite`); with
    /// --registry, routed by the federation core to one engine offering the method.
    Transform {
        #[command(flatten)]
        target: Target,
        /// The query text.
        query: String,
        /// The method: one the engine advertises in `transform.methods` (rewrite, multi-query,
        /// hyde, decompose, step-back).
        #[arg(short, long, default_value = "rewrite")]
        method: String,
        /// How many queries, for methods that make several (multi-query, decompose).
        #[arg(short, long, value_parser = clap::value_parser!(u32).range(1..))]
        n: Option<u32>,
        /// With --registry: the engine (its registry id) that transforms (sent as
        /// `_meta.engine`); without it, the engine of highest priority offering the method.
        #[arg(long, value_name = "ID", conflicts_with_all = ["stdio", "http"])]
        engine: Option<String>,
    },
    /// Embed texts with an engine's `embed`: each input's dimension and first numbers; with
    /// --registry, routed by the federation core to one embedder.
    Embed {
        #[command(flatten)]
        args: embed::EmbedArgs,
    },
    /// Score passages against a query with an engine's `rerank`, printed best first; with
    /// --registry, routed by the federation core to one reranker.
    Rerank {
        #[command(flatten)]
        args: rerank::RerankArgs,
    },
    /// Run one `graph` op (neighbors, local, global, drift, communities) against an engine
    /// that advertises `graph`; with --registry, against every engine offering the op, the
    /// answers merged.
    Graph {
        #[command(flatten)]
        args: graph::GraphArgs,
    },
    /// Tell an engine how earlier hits fared (`feedback`): used, cited, helpful, a reward, or
    /// suspected poisoning or injection; with --registry, each signal routed back to the
    /// engines that returned its hit.
    Feedback {
        #[command(flatten)]
        args: feedback::FeedbackArgs,
    },
    /// Build an engine's memory, or recall clues from it (`memory/build`, `memory/recall`).
    Memory {
        #[command(subcommand)]
        op: memory::MemoryOp,
    },
    /// Call any method of RCP/1 by its wire name (`memory/recall`, `embed/sparse`, ...) with
    /// params as JSON, gated on the capability that method needs; prints the result as JSON.
    Call {
        #[command(flatten)]
        target: Target,
        /// The method's wire name, one of the methods RCP/1 declares.
        method: String,
        /// The params: a JSON object (default `{}`).
        params: Option<String>,
    },
    /// Fan a query out to every engine of an rcp.json registry and fuse the lists. Given an
    /// aggregator's URL (http:// or https://) instead, the engines are discovered from its
    /// catalog/list (§16.1): those it exposes are asked directly, within the hop budget.
    Federate {
        /// The registry (rcp.json), or an aggregator's URL.
        registry: PathBuf,
        /// The query text.
        query: String,
        /// How many fused hits.
        #[arg(short, long, default_value_t = 10)]
        k: u64,
        /// Fusion: rrf, weighted or convex (the default: §16.3 prefers it when every engine
        /// advertises scoreFloor, and it falls back to rrf, with a note, when one does not).
        #[arg(long, default_value = "convex")]
        fusion: String,
        /// Per-engine deadline in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// A metadata filter, as for `retrieve` (engines without `filter` are skipped).
        #[arg(long, value_name = "FILTER")]
        filter: Vec<String>,
    },
    /// Write to a running engine's index (needs its `index` capability).
    Index {
        #[command(subcommand)]
        op: IndexOp,
    },
    /// Evaluate engines on a BEIR collection: nDCG@10, Recall@50, Recall@100 and MRR@10.
    ///
    /// DATASET holds queries.jsonl and graded qrels/test.tsv (or qrels.tsv). With --stdio or
    /// --http one engine is evaluated; with --registry every engine of the registry, then their
    /// RRF and convex fusions. The engines must already hold the collection's corpus.jsonl
    /// (e.g. `rcpctl index add`).
    Eval {
        /// The collection's directory.
        dataset: PathBuf,
        /// One engine (--stdio / --http) or every engine of a registry (--registry).
        #[command(flatten)]
        target: Target,
        /// Evaluate only the first N queries (a fast subset).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Exit with status 1 when an engine returns no hits for most queries (it most likely
        /// does not hold the collection's corpus); without it that is a warning.
        #[arg(long)]
        strict: bool,
        /// Also rerank the evaluated ranking (the RRF fusion with --registry, else the
        /// engine's list) through this reranking engine's `rerank`: a command run over stdio
        /// (split on whitespace), an http(s) URL, or the id of an entry of --registry (which is
        /// then not evaluated itself).
        #[arg(long, value_name = "ENGINE")]
        rerank: Option<String>,
        /// The rerank method to evaluate (repeatable, one row each) [default: the reranker's first].
        #[arg(long = "rerank-method", value_name = "METHOD", requires = "rerank")]
        rerank_methods: Vec<String>,
        /// Candidates reranked per query.
        #[arg(long, value_name = "N", default_value_t = 100, requires = "rerank")]
        rerank_top_n: usize,
    },
    /// Open the RCP Inspector (a local web page) on one engine or a registry.
    ///
    /// `rcpctl inspect [--stdio CMD | --http URL | --registry rcp.json] [--port P]` runs the
    /// `rcp-inspect` binary (package rcp-inspector) found next to `rcpctl` or on PATH.
    #[command(disable_help_flag = true)]
    Inspect {
        /// Arguments passed to rcp-inspect unchanged (`rcpctl inspect --help` shows its own).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: Shell,
    },
}

#[derive(Subcommand)]
enum IndexOp {
    /// Upsert the documents of a JSONL file: BEIR corpus lines ({_id, title, text, ...}) or
    /// RCP documents ({id, text, meta}).
    Add {
        #[command(flatten)]
        target: Target,
        /// The JSONL file.
        file: PathBuf,
        /// Documents per `index/add` call.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
        batch: u64,
    },
    /// Delete documents by id.
    Delete {
        #[command(flatten)]
        target: Target,
        /// The ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

impl Command {
    /// The engine the command talks to, if it talks to one.
    fn target(&self) -> Option<&Target> {
        match self {
            Self::Info { target, .. }
            | Self::Call { target, .. }
            | Self::Retrieve { target, .. }
            | Self::Transform { target, .. }
            | Self::Embed { args: embed::EmbedArgs { target, .. } }
            | Self::Rerank { args: rerank::RerankArgs { target, .. } }
            | Self::Graph { args: graph::GraphArgs { target, .. } }
            | Self::Feedback { args: feedback::FeedbackArgs { target, .. } }
            | Self::Memory {
                op:
                    memory::MemoryOp::Build { target, .. }
                    | memory::MemoryOp::Recall { args: memory::RecallArgs { target, .. } },
            }
            | Self::Eval { target, .. }
            | Self::Index { op: IndexOp::Add { target, .. } | IndexOp::Delete { target, .. } } => Some(target),
            Self::Federate { .. } | Self::Inspect { .. } | Self::Completions { .. } => None,
        }
    }

    /// The `--filter` flags, if the command takes them.
    fn filters(&self) -> Option<&[String]> {
        match self {
            Self::Retrieve { filter, .. } | Self::Federate { filter, .. } => Some(filter),
            _ => None,
        }
    }
}

/// Prints `v` as pretty JSON.
fn print_json(v: &impl serde::Serialize) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// Runs one command; any failure (a client error, an unreadable registry, a bad option) ends
/// the program with its message.
async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let auth = &cli.auth;
    match cli.command {
        Command::Info { target, parsed } => {
            let c = target::connect(&target, auth, None).await?;
            if parsed {
                print_json(&c.info().await?);
            } else if cli.json {
                // The result as received: capability objects are printed verbatim, not
                // re-serialised from the parsed types.
                print_json(&c.call(rcp_wire::methods::Method::Info.name(), json!({})).await?);
            } else {
                table::print_info(&c.info().await?);
            }
            let _ = c.shutdown().await;
        }
        Command::Retrieve { target, query, k, filter } => {
            let mut params = RetrieveParams::new(query, k);
            params.filter = filter::parse_all(&filter)?;
            let c = target::connect(&target, auth, Some(Capability::Retrieve)).await?;
            let res = c.retrieve(params).await?;
            if cli.json {
                print_json(&res);
            } else {
                table::print_hits(&res.hits);
                if let Some(line) = res.usage.as_ref().and_then(table::usage_line) {
                    outln!("{line}");
                }
            }
            let _ = c.shutdown().await;
        }
        Command::Transform { target, query, method, n, engine } => {
            let params = rcp_wire::transform::TransformParams { query, method, n, meta: None };
            transform::run(&target, auth, params, engine.as_deref(), cli.json).await?;
        }
        Command::Embed { args } => embed::run(&args, auth, cli.json).await?,
        Command::Rerank { args } => rerank::run(&args, auth, cli.json).await?,
        Command::Graph { args } => graph::run(&args, auth, cli.json).await?,
        Command::Feedback { args } => feedback::run(&args, auth, cli.json).await?,
        Command::Memory { op } => memory::run(&op, auth, cli.json).await?,
        Command::Call { target, method, params } => {
            let m = Method::from_name(&method).ok_or_else(|| {
                let known: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
                format!("unknown method '{method}'; RCP/1 declares: {}", known.join(", "))
            })?;
            let params: serde_json::Value = match params.as_deref() {
                Some(p) => serde_json::from_str(p).map_err(|e| format!("params are not JSON: {e}"))?,
                None => json!({}),
            };
            if !params.is_object() {
                return Err("params must be a JSON object".into());
            }
            let c = target::connect(&target, auth, m.capability()).await?;
            let res = c.call_method(m, params).await;
            let _ = c.shutdown().await;
            print_json(&res?);
        }
        Command::Federate { registry, query, k, fusion, timeout_ms, filter } => {
            let fusion = FusionMethod::from_name(&fusion)
                .ok_or_else(|| format!("unknown fusion '{fusion}'; expected rrf, weighted or convex"))?;
            let mut params = RetrieveParams::new(query, k);
            params.filter = filter::parse_all(&filter)?;
            let options = FederationOptions {
                client: auth.options()?,
                fusion,
                engine_timeout: Duration::from_millis(timeout_ms),
                ..Default::default()
            };
            let url = registry.to_string_lossy();
            let fed = if url.starts_with("http://") || url.starts_with("https://") {
                let aggregator = EngineSpec::new("aggregator", Transport::Http { url: url.into_owned() });
                let (fed, notes) = Federation::discover(aggregator, options).await?;
                for n in notes {
                    eprintln!("rcpctl: discovery: {n}");
                }
                fed
            } else {
                Federation::from_registry_file(&registry)?.with_options(options)
            };
            let out = fed.retrieve(params).await?;
            if cli.json {
                print_json(&out.to_json());
            } else {
                for (id, o) in &out.engines {
                    match o {
                        EngineOutcome::Answered { hits, latency } => {
                            let shown = &hits[..hits.len().min(usize::try_from(k).unwrap_or(usize::MAX))];
                            let more = if shown.len() < hits.len() {
                                format!(" of {} returned", hits.len())
                            } else {
                                String::new()
                            };
                            outln!("== {id} ({} hits{more}, {} ms)", shown.len(), latency.as_millis());
                            table::print_hits(shown);
                        }
                        EngineOutcome::Skipped(r) => outln!("== {id}: skipped ({r})"),
                        EngineOutcome::Failed(e) => outln!("== {id}: failed ({e})"),
                    }
                    outln!();
                }
                outln!("== fused ({})", out.fusion.name());
                let ids: Vec<&str> = fed.registry().engines.iter().map(|e| e.id.as_str()).collect();
                table::print_fused(&out.result.hits, &ids);
                if let Some(line) = out.result.usage.as_ref().and_then(table::usage_line) {
                    outln!("{line}");
                }
            }
        }
        Command::Index { op: IndexOp::Add { target, file, batch } } => {
            if let Some(cmd) = &target.stdio
                && !cmd.split_whitespace().any(|w| w.starts_with("--data-dir") || w.starts_with("--database-url"))
            {
                eprintln!(
                    "rcp: warning: the engine command has no --data-dir: an engine that then keeps its index in \
                     memory (rcp-bm25, rcp-dense) loses these documents when rcp exits; add --data-dir DIR to \
                     the command, or write to a running server with --http"
                );
            }
            let c = target::connect(&target, auth, Some(Capability::Index)).await?;
            let summary = index::add(&c, &file, usize::try_from(batch).unwrap_or(usize::MAX)).await?;
            if cli.json {
                print_json(&summary.to_json());
            } else {
                outln!("added {}, failed {}, in {:.1} s", summary.added, summary.failed, summary.elapsed.as_secs_f64());
            }
            let _ = c.shutdown().await;
            if summary.failed > 0 {
                let n = summary.failed;
                return Err(if n == 1 {
                    "1 document was not added (see above)".to_owned()
                } else {
                    format!("{n} documents were not added (see above)")
                }
                .into());
            }
        }
        Command::Index { op: IndexOp::Delete { target, ids } } => {
            let c = target::connect(&target, auth, Some(Capability::Index)).await?;
            let deleted = index::delete(&c, ids).await?;
            if cli.json {
                print_json(&json!({"deleted": deleted}));
            } else {
                outln!("deleted {deleted}");
            }
            let _ = c.shutdown().await;
        }
        Command::Eval { dataset, target, limit, strict, rerank, rerank_methods, rerank_top_n } => {
            let mut engines = match &target.registry {
                Some(path) => {
                    let fed = Federation::new(
                        Registry::load(path)?,
                        FederationOptions { client: auth.options()?, ..Default::default() },
                    );
                    let mut engines = Vec::new();
                    for (id, c) in fed.connect().await {
                        engines.push((id.clone(), c.map_err(|e| format!("engine '{id}': {e}"))?));
                    }
                    engines
                }
                None => {
                    let c = target::connect(&target, auth, Some(Capability::Retrieve)).await?;
                    let name = c.server_info().map(|i| i.server.name.clone()).unwrap_or_else(|| "engine".into());
                    vec![(name, c)]
                }
            };
            let reranker = match rerank {
                Some(engine) => {
                    let (label, client) = match engines.iter().position(|(id, _)| *id == engine) {
                        Some(i) => engines.remove(i),
                        None => {
                            let t = if engine.starts_with("http://") || engine.starts_with("https://") {
                                target::Target { stdio: None, http: Some(engine.clone()), registry: None }
                            } else {
                                target::Target { stdio: Some(engine.clone()), http: None, registry: None }
                            };
                            let c = target::connect(&t, auth, Some(Capability::Rerank)).await?;
                            (c.server_info().map(|i| i.server.name.clone()).unwrap_or(engine), c)
                        }
                    };
                    Some(eval_rerank::Reranker { label, client, methods: rerank_methods, top_n: rerank_top_n.max(1) })
                }
                None => None,
            };
            let report = eval::run(&dataset, limit, &engines, reranker.as_ref()).await?;
            if cli.json {
                print_json(&report.to_json());
            } else {
                report.print();
            }
            for (_, c) in engines.into_iter().chain(reranker.map(|r| (r.label, r.client))) {
                let _ = c.shutdown().await;
            }
            let empty = report.warn_empty(&dataset);
            if strict && !empty.is_empty() {
                return Err(format!("--strict: no hits for most queries from {}", empty.join(", ")).into());
            }
        }
        Command::Inspect { args } => inspect::run(&args)?,
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "rcpctl", &mut std::io::stdout());
        }
    }
    Ok(())
}

/// Diagnostics on stderr: the filter of `RCP_LOG`, else `RUST_LOG`, else `warn`; colours only
/// when stderr is a terminal.
fn init_logging() {
    let filter = std::env::var("RCP_LOG").or_else(|_| std::env::var("RUST_LOG")).unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
}

#[tokio::main]
async fn main() {
    // `rcpctl inspect ...` hands every argument to rcp-inspect as typed, before rcpctl's own global
    // options (`--header`, `--json`) could claim any of them.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("inspect") {
        if let Err(e) = inspect::run(&argv[2..]) {
            eprintln!("rcp: {e}");
            std::process::exit(i32::from(rcp_wire::exit::FAILURE));
        }
        return;
    }
    init_logging();
    let cli = Cli::parse();
    let ctx = explain::Context {
        http: cli.command.target().and_then(|t| t.http.clone()),
        token_env: cli.auth.token_env.clone(),
        filter: cli.command.filters().and_then(|f| filter::parse_all(f).ok().flatten()).map(|v| v.to_string()),
    };
    if let Err(e) = run(cli).await {
        eprintln!("rcp: {}", explain::report(e.as_ref(), &ctx));
        std::process::exit(i32::from(rcp_wire::exit::FAILURE));
    }
}
