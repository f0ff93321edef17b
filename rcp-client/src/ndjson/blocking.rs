//! The same NDJSON harness for threads without an async runtime: test suites that drive an
//! engine step by step, and measuring clients whose timings must not include a runtime's
//! hops. Framing is [`LineSplitter`]'s, as everywhere.

use std::io::{self, Read, Write};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Stdio};

use rcp_wire::ndjson::LineSplitter;

use super::stream::{Framer, READ_CHUNK};

/// A child process with piped stdin and stdout, killed and reaped when dropped. Derefs to the
/// [`std::process::Child`] for its pipes, id and exit status.
#[derive(Debug)]
pub struct BlockingChild {
    child: Child,
}

impl BlockingChild {
    /// Spawns `cmd` with piped stdin and stdout; stderr stays as `cmd` sets it (inherited by
    /// default).
    pub fn spawn(mut cmd: Command) -> io::Result<Self> {
        let child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        Ok(Self { child })
    }

    /// Spawns `argv` (program, then arguments) with stderr discarded.
    pub fn spawn_quiet<S: AsRef<std::ffi::OsStr>>(argv: &[S]) -> io::Result<Self> {
        let (program, rest) =
            argv.split_first().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        let mut cmd = Command::new(program);
        cmd.args(rest).stderr(Stdio::null());
        Self::spawn(cmd)
    }

    /// Kills the process (SIGKILL: no chance to flush or clean up) and reaps it.
    pub fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Deref for BlockingChild {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for BlockingChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for BlockingChild {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Writes `line` and its `\n`, and flushes: one frame, sent now.
pub fn write_line(writer: &mut impl Write, line: &[u8]) -> io::Result<()> {
    writer.write_all(line)?;
    writer.write_all(b"\n")?;
    writer.flush()
}

/// Lines read from a blocking stream, framed by [`LineSplitter`]; an iterator of lines.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    framer: Framer,
    buf: Vec<u8>,
}

impl<R: Read> LineReader<R> {
    /// Reads lines from `reader`, refusing any longer than `max_line_bytes`.
    pub fn new(reader: R, max_line_bytes: usize) -> Self {
        Self { reader, framer: Framer::new(max_line_bytes), buf: vec![0; READ_CHUNK] }
    }

    /// As [`Self::new`], but every line comes as it was written, blank lines and a trailing
    /// `\r` included: for a harness that checks what a peer writes.
    pub fn verbatim(reader: R, max_line_bytes: usize) -> Self {
        let splitter = LineSplitter::new(max_line_bytes).verbatim();
        Self { reader, framer: Framer::with(splitter, max_line_bytes), buf: vec![0; READ_CHUNK] }
    }

    /// The next non-blank line, `None` at the end of the stream. A line longer than the cap,
    /// or not UTF-8, is an [`io::ErrorKind::InvalidData`] error; reading may go on after it.
    pub fn next_line(&mut self) -> io::Result<Option<String>> {
        loop {
            if let Some(line) = self.framer.next() {
                return line;
            }
            match self.reader.read(&mut self.buf) {
                Ok(n) => {
                    self.framer.feed(&self.buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl<R: Read> Iterator for LineReader<R> {
    type Item = io::Result<String>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_line().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_speaks_lines_and_dies_with_its_handle() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "while read l; do echo \"got $l\"; done"]);
        let mut child = BlockingChild::spawn(cmd).expect("spawn sh");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut lines = LineReader::new(child.stdout.take().expect("stdout"), 64);
        write_line(&mut stdin, b"{}").expect("write");
        assert_eq!(lines.next_line().ok().flatten().as_deref(), Some("got {}"));
        let pid = child.id();
        drop(child);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty(), "reaped: {stat}");
    }
}
