//! NDJSON framing (§5.1): one JSON message per `\n`-terminated line. [`LineSplitter`] cuts a
//! byte stream into lines as it arrives, buffers a partial line across reads, skips blank
//! lines, drops a trailing `\r`, and caps a line's length without ever holding an over-long
//! line in memory. Servers and clients, blocking or async, frame with it alike.

use memchr::memchr;

/// The default cap on one line: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One unit cut from the stream, borrowed from the splitter or the bytes pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRef<'a> {
    /// A complete, non-blank line (without its `\n` or trailing `\r`).
    Frame(&'a [u8]),
    /// A line longer than the cap was skipped; carries its length in bytes.
    TooLong(usize),
}

/// One unit cut from the stream, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete, non-blank line (without its `\n` or trailing `\r`).
    Frame(Vec<u8>),
    /// A line longer than the cap was skipped; carries its length in bytes.
    TooLong(usize),
}

impl From<LineRef<'_>> for Line {
    fn from(line: LineRef<'_>) -> Self {
        match line {
            LineRef::Frame(f) => Self::Frame(f.to_vec()),
            LineRef::TooLong(n) => Self::TooLong(n),
        }
    }
}

/// Incremental line splitter with a length cap.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    discarding: Option<usize>,
    verbatim: bool,
}

impl LineSplitter {
    /// A splitter that skips lines longer than `max` bytes (at least 1).
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max: max.max(1), discarding: None, verbatim: false }
    }

    /// Hands lines on exactly as they came, blank ones and a trailing `\r` included: for a
    /// harness that checks what a peer writes rather than reading its messages.
    pub fn verbatim(mut self) -> Self {
        self.verbatim = true;
        self
    }

    /// Feeds bytes; each complete line is handed to `each`, borrowed (no copy unless the
    /// line spans two pushes).
    pub fn push_each(&mut self, mut data: &[u8], mut each: impl FnMut(LineRef<'_>)) {
        while let Some(pos) = memchr(b'\n', data) {
            let chunk = &data[..pos];
            data = &data[pos + 1..];
            if let Some(skipped) = self.discarding.take() {
                each(LineRef::TooLong(skipped + chunk.len()));
                continue;
            }
            if self.buf.len() + chunk.len() > self.max {
                each(LineRef::TooLong(self.buf.len() + chunk.len()));
                self.buf.clear();
                continue;
            }
            if self.buf.is_empty() {
                emit(chunk, self.verbatim, &mut each);
            } else {
                self.buf.extend_from_slice(chunk);
                emit(&self.buf, self.verbatim, &mut each);
                self.buf.clear();
            }
        }
        if let Some(skipped) = self.discarding.as_mut() {
            *skipped += data.len();
        } else if self.buf.len() + data.len() > self.max {
            self.discarding = Some(self.buf.len() + data.len());
            self.buf = Vec::new();
        } else {
            self.buf.extend_from_slice(data);
        }
    }

    /// Feeds bytes; complete lines are appended to `out`.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<Line>) {
        self.push_each(data, |line| out.push(line.into()));
    }

    /// Bytes of an unfinished line received so far (held, or being discarded as too long);
    /// `0` between lines. Lets a reader bound the time one line may take.
    pub fn partial_len(&self) -> usize {
        self.discarding.unwrap_or(self.buf.len())
    }

    /// At the end of the stream: a final line without `\n` still counts.
    pub fn finish_each(&mut self, mut each: impl FnMut(LineRef<'_>)) {
        if let Some(skipped) = self.discarding.take() {
            each(LineRef::TooLong(skipped));
        } else if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            emit(&line, self.verbatim, &mut each);
        }
    }

    /// [`Self::finish_each`], appending to `out`.
    pub fn finish(&mut self, out: &mut Vec<Line>) {
        self.finish_each(|line| out.push(line.into()));
    }
}

/// Hands `line` on without its trailing `\r`, unless it is blank (or as it is, `verbatim`).
fn emit(line: &[u8], verbatim: bool, each: &mut impl FnMut(LineRef<'_>)) {
    if verbatim {
        return each(LineRef::Frame(line));
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if !line.iter().all(u8::is_ascii_whitespace) {
        each(LineRef::Frame(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(out: &[Line]) -> Vec<String> {
        out.iter()
            .map(|l| match l {
                Line::Frame(f) => String::from_utf8_lossy(f).into_owned(),
                Line::TooLong(n) => format!("<{n}>"),
            })
            .collect()
    }

    #[test]
    fn splits_buffers_and_skips_blank_lines() {
        let mut s = LineSplitter::new(100);
        let mut out = Vec::new();
        s.push(b"{\"a\":1}\n\n  \r\n{\"b\"", &mut out);
        s.push(b":2}\r\n{\"c\":3}", &mut out);
        s.finish(&mut out);
        assert_eq!(frames(&out), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn over_long_lines_are_skipped_across_chunks() {
        let mut s = LineSplitter::new(10);
        let mut out = Vec::new();
        s.push(b"0123456789abc", &mut out);
        s.push(b"def\nok\n", &mut out);
        s.push(b"01234567890\nyes\n", &mut out);
        assert_eq!(frames(&out), ["<16>", "ok", "<11>", "yes"]);
    }

    #[test]
    fn verbatim_keeps_blank_lines_and_carriage_returns() {
        let mut s = LineSplitter::new(100).verbatim();
        let mut out = Vec::new();
        s.push(b"{}\r\n\n{}", &mut out);
        s.finish(&mut out);
        assert_eq!(frames(&out), ["{}\r", "", "{}"]);
    }
}
