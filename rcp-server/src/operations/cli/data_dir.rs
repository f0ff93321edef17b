//! The data-directory flags every engine with a persistent store shares, and the one rule
//! that decides what they ask for: a directory that holds no store (missing, or existing and
//! empty) is served only with `--create`.

use std::path::{Path, PathBuf};

use clap::Args;

/// `--data-dir` and `--create`, flattened into an engine's `serve` command
/// (`#[command(flatten)]`). Without `--data-dir` an engine serves a built-in corpus from
/// memory; with it, a directory that holds no store is an error unless `--create` asks for an
/// empty one, so a mistyped path is never served as an empty index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct DataDirArgs {
    /// Serve (and persist writes to) this data directory; without it the built-in demo corpus
    /// is served from memory and writes are not persisted.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Start a new, empty store in `--data-dir` when it holds none yet (without it, such a
    /// directory is an error: a mistyped path must not serve nothing).
    #[arg(long, requires = "data_dir")]
    pub create: bool,
}

/// What `--data-dir` and `--create` ask an engine to serve ([`DataDirArgs::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDir<'a> {
    /// No `--data-dir`: the built-in corpus, in memory.
    InMemory,
    /// A directory that holds the engine's store: open it.
    Existing(&'a Path),
    /// `--create` on a directory that holds no store yet (missing or empty): start an empty one.
    Create(&'a Path),
}

/// Why a `--data-dir` is refused: it holds no store and `--create` was not passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DataDirError {
    /// The directory does not exist.
    #[error(
        "{}: no such data directory: it does not exist (build one with `{engine} index --data-dir {} CORPUS`, or pass --create to start an empty one)",
        dir.display(),
        dir.display()
    )]
    Missing {
        /// The directory named.
        dir: PathBuf,
        /// The engine's binary name.
        engine: String,
    },
    /// The path exists but holds no store of this engine (an empty directory, unrelated files,
    /// or a file).
    #[error(
        "{}: holds no {engine} store (build one with `{engine} index --data-dir {} CORPUS`, or pass --create to start an empty one)",
        dir.display(),
        dir.display()
    )]
    NoStore {
        /// The directory named.
        dir: PathBuf,
        /// The engine's binary name.
        engine: String,
    },
}

impl DataDirArgs {
    /// The one data-directory rule of every engine: without `--data-dir`, the built-in corpus;
    /// a directory for which `holds_store` is true is opened; one that does not exist or holds
    /// no store (an existing empty directory too) is an error naming `engine` unless `--create`
    /// asks for a new, empty store there.
    pub fn resolve(&self, engine: &str, holds_store: impl FnOnce(&Path) -> bool) -> Result<DataDir<'_>, DataDirError> {
        let Some(dir) = self.dir() else { return Ok(DataDir::InMemory) };
        if dir.is_dir() && holds_store(dir) {
            return Ok(DataDir::Existing(dir));
        }
        if self.create {
            return Ok(DataDir::Create(dir));
        }
        let (dir, engine) = (dir.to_path_buf(), engine.to_owned());
        Err(if dir.exists() { DataDirError::NoStore { dir, engine } } else { DataDirError::Missing { dir, engine } })
    }

    /// The directory, when one was named.
    pub fn dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// What is served, for start-up lines: the directory, or the in-memory demo corpus.
    pub fn label(&self) -> String {
        self.dir().map_or_else(|| "(built-in demo corpus, in memory)".to_owned(), |d| d.display().to_string())
    }

    /// Logs, once at start, that writes will not outlive the process when no directory was
    /// named.
    pub fn warn_if_in_memory(&self, engine: &str) {
        if self.data_dir.is_none() {
            tracing::warn!(
                engine,
                "no --data-dir: the built-in demo corpus, in memory; index/add writes are not persisted"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        dir: DataDirArgs,
    }

    #[test]
    fn create_needs_a_directory() {
        assert!(Cli::try_parse_from(["t", "--create"]).is_err());
        let cli = Cli::try_parse_from(["t", "--data-dir", "d", "--create"]).expect("parses");
        assert_eq!(cli.dir, DataDirArgs { data_dir: Some("d".into()), create: true });
        assert_eq!(cli.dir.label(), "d");
        assert_eq!(Cli::try_parse_from(["t"]).expect("parses").dir.label(), "(built-in demo corpus, in memory)");
    }

    #[test]
    fn an_empty_or_missing_directory_needs_create() {
        let tmp = std::env::temp_dir().join(format!("rcp-data-dir-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("mkdir");
        let args = |create| DataDirArgs { data_dir: Some(tmp.clone()), create };
        let holds = |held: bool| move |_: &Path| held;
        let err = args(false).resolve("rcp-x", holds(false)).expect_err("empty directory refused");
        assert!(matches!(err, DataDirError::NoStore { .. }), "{err}");
        assert!(err.to_string().contains("holds no rcp-x store") && err.to_string().contains("--create"), "{err}");
        assert_eq!(args(true).resolve("rcp-x", holds(false)), Ok(DataDir::Create(&tmp)));
        assert_eq!(args(false).resolve("rcp-x", holds(true)), Ok(DataDir::Existing(&tmp)));
        assert_eq!(args(true).resolve("rcp-x", holds(true)), Ok(DataDir::Existing(&tmp)));
        let missing = DataDirArgs { data_dir: Some(tmp.join("nope")), create: false };
        let err = missing.resolve("rcp-x", holds(true)).expect_err("missing directory refused");
        assert!(err.to_string().contains("no such data directory"), "{err}");
        assert_eq!(DataDirArgs::default().resolve("rcp-x", holds(false)), Ok(DataDir::InMemory));
        std::fs::remove_dir_all(&tmp).expect("rm");
    }
}
