//! The `main` every engine binary shares: parse, install logging, run, and turn the outcome
//! into an error line on stderr and an exit code.

use std::ffi::OsString;
use std::fmt::Display;
use std::process::ExitCode;

use clap::Parser;

use super::ServeArgs;
use crate::operations::logging::LogFormat;

/// An engine binary's command line: a clap parser whose parsed value knows how to run itself.
/// [`main`] and [`run`] give every engine the same start-up and failure handling.
pub trait EngineCli: Parser {
    /// What a failed command returns; printed on stderr after the binary's name
    /// (`rcp-bm25: <error>`).
    type Error: Display;

    /// The exit code of a failed command: [`rcp_wire::exit::FAILURE`] (1), as for every
    /// other tool of the workspace.
    const FAILURE: u8 = rcp_wire::exit::FAILURE;

    /// The log lines on stderr of every command but `serve` (whose `--log-format` decides);
    /// `None` installs no subscriber.
    const LOGS: Option<LogFormat> = Some(LogFormat::Text);

    /// The `serve` arguments when this invocation serves.
    fn serve_args(&self) -> Option<&ServeArgs>;

    /// Runs the parsed command.
    fn run(self) -> Result<(), Self::Error>;
}

/// The whole `main` of an engine binary: [`run`] on the process's arguments.
pub fn main<C: EngineCli>() -> ExitCode {
    run::<C>(std::env::args_os())
}

/// Parses `args` (the first is the program name) as `C`, installs logging as the command asks,
/// runs it, and maps the outcome to an exit code: success, or [`EngineCli::FAILURE`] after
/// printing `<name>: <error>` on stderr. Invalid arguments exit as clap does (usage on stderr,
/// [`rcp_wire::exit::USAGE`]); `--help` and `--version` print and exit 0. This is also how one executable hosts
/// several engines, each run as a child process of itself (the federation example).
pub fn run<C: EngineCli>(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let cli = C::parse_from(args);
    let name = C::command().get_name().to_owned();
    // Held until the command has run: dropping it sends the spans not yet exported.
    let _telemetry = match cli.serve_args() {
        Some(serve) => Some(serve.init_telemetry(&name)),
        None => C::LOGS.map(|format| crate::init_telemetry(format, None, &name)),
    };
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            ExitCode::from(C::FAILURE)
        }
    }
}
