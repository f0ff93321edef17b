//! The bundled engines as child processes of the executable that links them.
//!
//! `example_federation` links `rcp-bm25` and `rcp-dense` as libraries and starts each engine
//! as `<its own executable> engine <name> ARGS...`: real processes over real pipes, with no
//! second build and no binaries to find. Each engine runs its own command line
//! (`rcp_bm25::cli`, `rcp_dense::cli`) through the shared scaffold, [`rcp_server::cli::run`].

use std::ffi::OsString;
use std::process::ExitCode;

/// The hidden first argument that makes the executable an engine.
const ENGINE: &str = "engine";

/// The engines this executable can become: the name that follows `engine`.
pub const ENGINES: [&str; 2] = ["bm25", "dense"];

/// When this process was started as `<exe> engine <name> ARGS...`, runs engine `name` on
/// `ARGS` (as `rcp-<name> ARGS...` would) and returns its exit code; otherwise `None`, and the
/// caller goes on as itself. Call it first in `main`, before any async runtime starts.
pub fn run_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ENGINE {
        return None;
    }
    let name = args.next().unwrap_or_default();
    let program = |name: &str| std::iter::once(OsString::from(name)).chain(args);
    Some(match name.to_str() {
        Some("bm25") => rcp_server::cli::run::<rcp_bm25::cli::Cli>(program("rcp-bm25")),
        Some("dense") => rcp_server::cli::run::<rcp_dense::cli::Cli>(program("rcp-dense")),
        _ => {
            eprintln!("unknown engine {name:?}; this executable runs: {}", ENGINES.join(", "));
            ExitCode::from(2)
        }
    })
}

/// The command that starts engine `name` (one of [`ENGINES`]) as a child of this executable:
/// the executable's path, `engine`, `name`; append the engine's own arguments (`serve`, ...).
pub fn command(name: &str) -> std::io::Result<Vec<String>> {
    let exe = std::env::current_exe()?;
    Ok(vec![exe.to_string_lossy().into_owned(), ENGINE.to_owned(), name.to_owned()])
}
