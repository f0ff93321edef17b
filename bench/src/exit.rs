//! How a benchmark binary ends: its `main` runs the benchmark as a function returning
//! `anyhow::Result<()>` and hands the outcome to [`finish`], which prints a failure with its
//! whole cause chain and maps it to the exit status.
//!
//! This crate is `publish = false` and its library exists only to support the binaries in
//! `src/bin`, so its helpers (this module and [`crate::stdio`]) use `anyhow` with context, as
//! binaries do, rather than the typed `thiserror` errors a published library would carry.

use std::process::ExitCode;

/// The exit status of a benchmark's `main` for `result`: success, or 1 after printing
/// `NAME: ERROR: CAUSE...` on stderr (see [`chain`]).
pub fn finish(name: &str, result: anyhow::Result<()>) -> ExitCode {
    finish_with(name, result, 1)
}

/// As [`finish`], with `code` as the exit status of a failure (2 for a usage error).
pub fn finish_with(name: &str, result: anyhow::Result<()>, code: u8) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {}", chain(&e));
            ExitCode::from(code)
        }
    }
}

/// The error and its causes, outermost first, joined by `": "` as `{e:#}` prints them, except
/// that a cause whose text already ends the message before it is left out: several library
/// errors print their source inside their own message (`PATH: No such file or directory`, with
/// the `io::Error` also as their source), which `{e:#}` would show twice.
pub fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use anyhow::{Context, anyhow};

    use super::chain;
    use crate::quality::Collection;

    /// An error that prints its source inside its own message, as several library errors do.
    #[derive(Debug)]
    struct Embeds(std::io::Error);

    impl std::fmt::Display for Embeds {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "data.bin: {}", self.0)
        }
    }

    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn chain_lists_contexts_outermost_first() {
        let e = Err::<(), _>(anyhow!("innermost")).context("middle").context("outer").unwrap_err();
        assert_eq!(chain(&e), "outer: middle: innermost");
        assert_eq!(chain(&e), format!("{e:#}"));
    }

    #[test]
    fn chain_shows_a_source_its_error_already_prints_once() {
        let e = anyhow::Error::new(Embeds(std::io::Error::other("disk on fire"))).context("read the workload");
        assert_eq!(format!("{e:#}"), "read the workload: data.bin: disk on fire: disk on fire");
        assert_eq!(chain(&e), "read the workload: data.bin: disk on fire");
    }

    #[test]
    fn chain_of_a_missing_collection_names_the_file_and_the_cause_once() {
        let dir = Path::new("/nonexistent/rcp-bench-collection");
        let e = Collection::load(dir).context("load the collection").unwrap_err();
        let text = chain(&e);
        let cause = e.root_cause().to_string();
        assert!(text.starts_with("load the collection: /nonexistent/rcp-bench-collection/queries.jsonl: "), "{text}");
        assert!(text.ends_with(&cause), "{text}");
        assert_eq!(text.matches(&cause).count(), 1, "{text}");
    }
}
