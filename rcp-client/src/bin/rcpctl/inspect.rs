//! `rcpctl inspect ...`: runs `rcp-inspect` (package `rcp-inspector`) with the same arguments,
//! found next to this `rcpctl` or else on `PATH`, the way cargo runs its external subcommands.
//! rcp-client cannot depend on the inspector (which depends on it), hence a separate binary.

use std::path::PathBuf;
use std::process::Command;

/// The name of the inspector's binary.
const BINARY: &str = "rcp-inspect";

/// Where `rcp-inspect` is: beside the running `rcpctl`, else whatever `PATH` resolves.
fn locate() -> PathBuf {
    let name = format!("{BINARY}{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(&name))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Replaces this process with `rcp-inspect args...` (Unix) or runs it and exits with its status.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let bin = locate();
    let mut cmd = Command::new(&bin);
    cmd.args(args);
    let missing = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`rcpctl inspect` runs the {BINARY} binary, which is neither next to rcpctl nor on PATH; \
                 build it with `cargo build -p rcp-inspector` (or `cargo build --workspace`)"
            )
        } else {
            format!("cannot run {}: {e}", bin.display())
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        Err(missing(cmd.exec()))
    }
    #[cfg(not(unix))]
    {
        let status = cmd.status().map_err(missing)?;
        std::process::exit(status.code().unwrap_or(1));
    }
}
