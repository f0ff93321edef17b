//! How an `index` command ends, the same for every engine (`rcp-bm25`, `rcp-dense`, `rcp-pg`)
//! and for `rcpctl index add`: exit 0 when every line was indexed; exit [`EXIT_NOT_INDEXED`] (1)
//! when any line was not (each reported as `FILE:LINE: ...`, the summary line still printed),
//! or when `--strict` stopped the run at the first bad line (nothing of the run written); usage
//! errors exit 2 as clap does, and a failure of the run itself (I/O, model, database) exits 1
//! too: the one rule of [`rcp_wire::exit`].

/// The exit code of an `index` run that left lines out.
pub const EXIT_NOT_INDEXED: u8 = rcp_wire::exit::FAILURE;

/// An `index` run that left lines out: returned as the command's error after its summary, so
/// the binary ends with [`EXIT_NOT_INDEXED`] ([`NotIndexed::exit`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotIndexed {
    /// Lines were skipped and reported; the others were indexed.
    #[error("{0} line(s) were not indexed (see above)")]
    Skipped(u64),
    /// `--strict` stopped at this line (its `FILE:LINE: ...` report); nothing was written.
    #[error("{0} (--strict: nothing of this run was written)")]
    Strict(String),
}

impl NotIndexed {
    /// `Err(Skipped)` when `skipped` lines were left out, else `Ok`.
    pub fn check(skipped: u64) -> Result<(), NotIndexed> {
        if skipped == 0 { Ok(()) } else { Err(NotIndexed::Skipped(skipped)) }
    }

    /// Prints `<program>: <self>` on stderr and ends the process with [`EXIT_NOT_INDEXED`].
    /// Call it once the run has released what it holds (the index is committed or rolled
    /// back).
    pub fn exit(&self, program: &str) -> ! {
        eprintln!("{program}: {self}");
        std::process::exit(i32::from(EXIT_NOT_INDEXED))
    }
}

/// The end of an `index` command whose binary maps errors to another exit code: when `result`
/// is a [`NotIndexed`], [`NotIndexed::exit`]; any other result is returned as is.
pub fn exit_if_not_indexed<E>(program: &str, result: Result<(), E>) -> Result<(), E>
where
    E: AsRef<dyn std::error::Error + Send + Sync + 'static>,
{
    if let Err(e) = &result
        && let Some(not_indexed) = e.as_ref().downcast_ref::<NotIndexed>()
    {
        not_indexed.exit(program);
    }
    result
}
