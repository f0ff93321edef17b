//! `rcp-conformance`: certify an RCP server (§14.5).
//!
//! ```text
//! rcp-conformance [--json] [--schema PATH] [--level L0|L1|L2] [--timeout-ms N] -- <server command> [args...]
//! rcp-conformance [...] --http http://127.0.0.1:8080/rcp [--header 'Authorization: Bearer x']...
//! ```
//!
//! Exit status: 0 when every check passed and the declared level is honest, 1 on any failed
//! check or overclaim, 2 when the suite could not run (bad arguments, unreadable schema, a server
//! that cannot be started).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rcp_conformance::{Config, Level, Target, run};

/// Runs every MUST of the RCP specification against a server and reports the conformance level
/// it proves (L0 base, L1 retrieval, L2 SOTA) next to the level it declares.
#[derive(Debug, Parser)]
#[command(name = "rcp-conformance", version, about)]
struct Args {
    /// Print a machine-readable JSON report instead of text.
    #[arg(long)]
    json: bool,

    /// Validate every frame against this JSON Schema (the normative rcp-1.0.json).
    #[arg(long, value_name = "PATH")]
    schema: Option<PathBuf>,

    /// Run checks up to this level only.
    #[arg(long, value_name = "L0|L1|L2", default_value = "L2")]
    level: Level,

    /// How long to wait for each response, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    timeout_ms: u64,

    /// A query matching many documents of the server's corpus (default: tries a few broad ones).
    #[arg(long, value_name = "TEXT")]
    query: Option<String>,

    /// Test an HTTP endpoint: the base URL, e.g. http://127.0.0.1:8080/rcp.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    http: Option<String>,

    /// An HTTP header sent with every request, as 'Name: value' (repeatable).
    #[arg(long = "header", value_name = "'NAME: VALUE'", requires = "http")]
    headers: Vec<String>,

    /// The server command to spawn (stdio), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn config(args: &Args) -> Result<Config, String> {
    let target = match (&args.http, args.command.split_first()) {
        (Some(base), None) => {
            let headers = args
                .headers
                .iter()
                .map(|h| {
                    h.split_once(':')
                        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                        .filter(|(k, _)| !k.is_empty())
                        .ok_or_else(|| format!("--header '{h}' is not 'Name: value'"))
                })
                .collect::<Result<_, _>>()?;
            Target::Http { base: base.clone(), headers }
        }
        (None, Some((program, rest))) => Target::Stdio { program: program.clone(), args: rest.to_vec() },
        _ => return Err("give either --http URL or -- <server command> [args...]".into()),
    };
    let mut c = Config::new(target).with_level(args.level).with_timeout(Duration::from_millis(args.timeout_ms.max(1)));
    c.schema = args.schema.clone();
    c.query = args.query.clone();
    Ok(c)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rcp-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match run(&cfg).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rcp-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json()).unwrap_or_default());
    } else {
        print!("{}", report.render_text());
    }
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(1))
}
