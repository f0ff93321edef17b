//! The `quarantine` command every engine with a data directory shares: list the hits feedback
//! quarantined, and release one (see [`crate::feedback`]).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::retrieval::feedback::{FeedbackOptions, FeedbackStore};

/// `quarantine list|release`, as an engine's subcommand (`#[command(subcommand)]`).
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum QuarantineCmd {
    /// List quarantined hits, one per line: the hit id, a tab, the integrity signals it drew.
    /// Reads the log only, so it works while a server runs on the directory.
    List {
        /// The engine's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
    /// Release a hit from quarantine (its signal count starts again at 0). The server must be
    /// stopped (it holds the log); the release takes effect when it starts again.
    Release {
        /// The hit id to release.
        hit_id: String,
        /// The engine's data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
    },
}

impl QuarantineCmd {
    /// Runs the command, printing to `out`.
    pub fn run(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Self::List { data_dir } => list(data_dir, out),
            Self::Release { hit_id, data_dir } => release(data_dir, hit_id, out),
        }
    }
}

fn list(dir: &Path, out: &mut impl Write) -> io::Result<()> {
    for q in FeedbackStore::list(dir)? {
        writeln!(out, "{}\t{}", q.hit_id, q.signals)?;
    }
    Ok(())
}

fn release(dir: &Path, hit_id: &str, out: &mut impl Write) -> io::Result<()> {
    let store = FeedbackStore::open(dir, FeedbackOptions::default())?;
    if store.release(hit_id)? {
        writeln!(out, "released {hit_id}")
    } else {
        Err(io::Error::new(io::ErrorKind::NotFound, format!("{hit_id} is not quarantined")))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use rcp_wire::feedback::Signal;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: QuarantineCmd,
    }

    fn poison(id: &str) -> Signal {
        serde_json::from_value(serde_json::json!({"hitId": id, "poisonSuspected": true})).expect("signal")
    }

    #[test]
    fn list_then_release_then_list() {
        let dir = std::env::temp_dir().join(format!("rcp-quarantine-cli-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_string_lossy().into_owned();
        {
            let options = FeedbackOptions { threshold: 2, ..FeedbackOptions::default() };
            let store = FeedbackStore::open(&dir, options).expect("opens");
            assert!(store.record(vec![poison("d1"), poison("d1"), poison("d2")]).is_ok());
        }
        let run = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("parses");
            let mut out = Vec::new();
            cli.cmd.run(&mut out).map(|()| String::from_utf8_lossy(&out).into_owned())
        };
        assert_eq!(run(&["t", "list", "--data-dir", &d]).ok().as_deref(), Some("d1\t2\n"));
        assert_eq!(run(&["t", "release", "d1", "--data-dir", &d]).ok().as_deref(), Some("released d1\n"));
        assert!(run(&["t", "release", "d1", "--data-dir", &d]).is_err(), "not quarantined any more");
        assert_eq!(run(&["t", "list", "--data-dir", &d]).ok().as_deref(), Some(""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
