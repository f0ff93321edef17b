//! The data-directory flags every engine with a persistent store shares.

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

impl DataDirArgs {
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
}
