//! `rcp-conformance`: certify an RCP server (§14.5).
//!
//! ```text
//! rcp-conformance [--json] [--junit FILE] [--schema PATH] [--level L0|L1|L2] [--timeout-ms N] [--seed N] [--sweep-budget N|Ns] --stdio "<server command> [args...]"
//! rcp-conformance [...] -- <server command> [args...]
//! rcp-conformance [...] --http http://127.0.0.1:8080/rcp [--token-env VAR] [--header 'Name: value']... [--ca-cert CA.pem] [--client-cert C.pem --client-key K.pem]
//! rcp-conformance [...] --aggregator "rcp-gateway serve --registry {registry}" -- <server command>
//! ```
//!
//! `--aggregator` also certifies an aggregator's federation duties over the suite's own probe
//! engines (this binary, run as `rcp-conformance --probe-engine ...`).
//!
//! `--json` prints the full report as JSON; `--junit FILE` also writes it as JUnit XML.
//!
//! Every frame is validated against the RCP 1.0 JSON Schema shipped in the crate, or against the
//! schema at `--schema PATH` instead (e.g. the specification's normative `rcp-1.0.json`).
//!
//! Exit status: 0 when no check failed and the declared level is honest (warnings and infos do
//! not count), 1 on any failed check or overclaim, 2 when the suite could not run (bad arguments,
//! unreadable schema, a server that cannot be started, a JUnit file that cannot be written).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rcp_conformance::{
    Aggregator, Config, HttpTls, Level, PROBE_FLAG, SchemaSource, SweepBudget, SweepOptions, Target, run,
    serve_probe_engine,
};

/// Runs every MUST of the RCP specification against a server and reports the conformance level
/// it proves (L0 base, L1 retrieval, L2 SOTA) next to the level it declares.
#[derive(Debug, Parser)]
#[command(name = "rcp-conformance", version, about)]
struct Args {
    /// Print a machine-readable JSON report instead of text.
    #[arg(long)]
    json: bool,

    /// Also write the report as JUnit XML to this file (one test case per check).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Validate every frame against this JSON Schema (e.g. the spec's normative rcp-1.0.json)
    /// instead of the RCP 1.0 schema built into rcp-conformance.
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

    /// Randomise the malformed-params sweep with this seed (more values per forbidden type, a
    /// shuffled order; the same seed gives the same run). Without it the sweep is deterministic.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,

    /// What the malformed-params sweep may spend: N requests, or a time such as 30s or 500ms
    /// (0 turns it off).
    #[arg(long, value_name = "N|Ns", default_value_t = SweepBudget::DEFAULT)]
    sweep_budget: SweepBudget,

    /// Test an HTTP endpoint: the base URL, e.g. http://127.0.0.1:8080/rcp.
    #[arg(long, value_name = "URL", conflicts_with_all = ["command", "stdio"])]
    http: Option<String>,

    /// Spawn this server command and test it over stdio (split on whitespace), as the other
    /// tools' `--stdio`; the command may also follow `--`.
    #[arg(long, value_name = "COMMAND", conflicts_with = "command")]
    stdio: Option<String>,

    /// An HTTP header sent with every request, as 'Name: value' (repeatable).
    #[arg(long = "header", value_name = "'NAME: VALUE'", requires = "http")]
    headers: Vec<String>,

    /// HTTP: send `Authorization: Bearer` with the token held in this environment variable
    /// (never on the command line, where `ps` would show it).
    #[arg(long, value_name = "VAR", requires = "http")]
    token_env: Option<String>,

    /// Also certify an aggregator's federation duties (§16.2, §16.3): its stdio command, split
    /// on whitespace, with `{registry}` where the registry path goes (e.g. "rcp-gateway serve
    /// --registry {registry}"). The suite writes registries of its own probe engines (this
    /// binary, run with --probe-engine) and checks what they receive and what it answers.
    #[arg(long, value_name = "COMMAND")]
    aggregator: Option<String>,

    /// HTTPS: trust the CA certificate(s) of this PEM file beside the system's roots.
    /// Default: $RCP_CA_CERT when set.
    #[arg(long, value_name = "FILE", requires = "http")]
    ca_cert: Option<PathBuf>,

    /// HTTPS: present this client certificate (PEM) to a server that requires one (mutual
    /// TLS). Needs --client-key.
    #[arg(long, value_name = "FILE", requires_all = ["http", "client_key"])]
    client_cert: Option<PathBuf>,

    /// HTTPS: the private key of --client-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    client_key: Option<PathBuf>,

    /// The server command to spawn (stdio), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The `Authorization` header for the token in `$var`; an unset or empty variable is an error
/// naming it.
fn bearer(var: &str, value: Option<String>) -> Result<(String, String), String> {
    match value.map(|v| v.trim().to_owned()) {
        Some(token) if !token.is_empty() => Ok(("Authorization".to_owned(), format!("Bearer {token}"))),
        Some(_) => Err(format!("--token-env: the variable {var} is empty")),
        None => Err(format!("--token-env: the variable {var} is not set")),
    }
}

fn config(args: &Args) -> Result<Config, String> {
    if args.http.is_none() && (args.token_env.is_some() || !args.headers.is_empty()) {
        return Err("--token-env and --header apply to --http only".into());
    }
    let stdio: Vec<String> = match &args.stdio {
        Some(cmd) => cmd.split_whitespace().map(str::to_owned).collect(),
        None => args.command.clone(),
    };
    let target = match (&args.http, stdio.split_first()) {
        (Some(base), None) => {
            let mut headers: Vec<(String, String)> = args
                .headers
                .iter()
                .map(|h| {
                    h.split_once(':')
                        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                        .filter(|(k, _)| !k.is_empty())
                        .ok_or_else(|| format!("--header '{h}' is not 'Name: value'"))
                })
                .collect::<Result<_, _>>()?;
            if let Some(var) = &args.token_env {
                headers.push(bearer(var, std::env::var(var).ok())?);
            }
            Target::Http { base: base.clone(), headers }
        }
        (None, Some((program, rest))) => Target::Stdio { program: program.clone(), args: rest.to_vec() },
        _ => return Err("give either --http URL, --stdio \"COMMAND\" or -- <server command> [args...]".into()),
    };
    let mut c = Config::new(target).with_level(args.level).with_timeout(Duration::from_millis(args.timeout_ms.max(1)));
    c.schema = Some(args.schema.clone().map_or(SchemaSource::Builtin, SchemaSource::File));
    c.query = args.query.clone();
    c.sweep = SweepOptions { seed: args.seed, budget: args.sweep_budget };
    if let Some(command) = &args.aggregator {
        if !command.contains("{registry}") {
            return Err("--aggregator: the command must contain {registry} where the registry path goes".into());
        }
        let me = std::env::current_exe().map_err(|e| format!("--aggregator: cannot find this binary: {e}"))?;
        c = c.with_aggregator(Aggregator {
            command: command.split_whitespace().map(str::to_owned).collect(),
            probe: vec![me.to_string_lossy().into_owned(), PROBE_FLAG.to_owned()],
        });
    }
    if args.http.is_some() {
        let env_ca = std::env::var_os("RCP_CA_CERT").filter(|v| !v.is_empty()).map(PathBuf::from);
        c.tls = HttpTls {
            ca_cert: args.ca_cert.clone().or(env_ca),
            client_cert: args.client_cert.clone().zip(args.client_key.clone()),
        };
    }
    Ok(c)
}

#[tokio::main]
async fn main() -> ExitCode {
    // Run as a probe engine behind an aggregator under test (see --aggregator).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(PROBE_FLAG) {
        return match serve_probe_engine(&argv[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rcp-conformance {PROBE_FLAG}: {e}");
                ExitCode::from(2)
            }
        };
    }
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
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::write(path, report.to_junit())
    {
        eprintln!("rcp-conformance: cannot write the JUnit report to {}: {e}", path.display());
        return ExitCode::from(2);
    }
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Config, String> {
        let args = Args::try_parse_from(std::iter::once("rcp-conformance").chain(argv.iter().copied()))
            .map_err(|e| e.to_string())?;
        config(&args)
    }

    #[test]
    fn stdio_as_a_flag_or_after_the_separator() {
        let stdio = |c: Config| match c.target {
            Target::Stdio { program, args } => (program, args),
            other => panic!("not stdio: {other:?}"),
        };
        let flag = stdio(parse(&["--stdio", "rcp-bm25 serve --data-dir d"]).expect("--stdio"));
        let rest = stdio(parse(&["--", "rcp-bm25", "serve", "--data-dir", "d"]).expect("--"));
        assert_eq!(flag, rest);
        assert_eq!(flag.0, "rcp-bm25");
        assert!(parse(&["--stdio", "a", "--", "b"]).is_err(), "one command, not two");
        assert!(parse(&[]).unwrap_err().contains("--stdio"));
    }

    #[test]
    fn the_builtin_schema_unless_one_is_given() {
        assert_eq!(parse(&["--", "srv"]).expect("parse").schema, Some(SchemaSource::Builtin));
        let given = parse(&["--schema", "rcp-1.0.json", "--", "srv"]).expect("parse").schema;
        assert_eq!(given, Some(SchemaSource::File(PathBuf::from("rcp-1.0.json"))));
    }

    #[test]
    fn token_env_sends_a_bearer_header() {
        let headers = |c: Config| match c.target {
            Target::Http { headers, .. } => headers,
            other => panic!("not http: {other:?}"),
        };
        // PATH is set in any test environment; its value stands in for a token.
        let path = std::env::var("PATH").expect("PATH");
        let h = headers(parse(&["--http", "http://127.0.0.1:1/rcp", "--token-env", "PATH"]).expect("parse"));
        assert_eq!(h, vec![("Authorization".to_owned(), format!("Bearer {}", path.trim()))]);
        let e = parse(&["--http", "http://x/rcp", "--token-env", "RCP_CONFORMANCE_NO_SUCH_VAR"]).unwrap_err();
        assert!(e.contains("RCP_CONFORMANCE_NO_SUCH_VAR is not set"), "{e}");
        assert!(parse(&["--stdio", "x", "--token-env", "PATH"]).is_err(), "--token-env needs --http");
    }
}
