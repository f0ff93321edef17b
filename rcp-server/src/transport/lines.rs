//! NDJSON framing (§5.1): split a byte stream on `\n`, buffer partial lines, skip blank lines,
//! and cap line length without ever holding an over-long line in memory.

use memchr::memchr;

/// Bytes a stream transport reads at once.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// One unit read from the stream.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A complete, non-blank line (without its `\n` or trailing `\r`).
    Frame(Vec<u8>),
    /// A line longer than the limit was skipped; carries its length in bytes.
    TooLong(usize),
}

/// Incremental line splitter with a length limit.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    discarding: Option<usize>,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max: max.max(1), discarding: None }
    }

    fn emit(&mut self, mut line: Vec<u8>, out: &mut Vec<Line>) {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            out.push(Line::Frame(line));
        }
    }

    /// Feeds bytes; complete lines are appended to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<Line>) {
        while let Some(pos) = memchr(b'\n', data) {
            let chunk = &data[..pos];
            data = &data[pos + 1..];
            if let Some(skipped) = self.discarding.take() {
                out.push(Line::TooLong(skipped + chunk.len()));
                continue;
            }
            if self.buf.len() + chunk.len() > self.max {
                out.push(Line::TooLong(self.buf.len() + chunk.len()));
                self.buf.clear();
                continue;
            }
            let line = if self.buf.is_empty() {
                chunk.to_vec()
            } else {
                self.buf.extend_from_slice(chunk);
                std::mem::take(&mut self.buf)
            };
            self.emit(line, out);
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

    /// At end of stream: a final line without `\n` still counts.
    pub fn finish(&mut self, out: &mut Vec<Line>) {
        if let Some(skipped) = self.discarding.take() {
            out.push(Line::TooLong(skipped));
        } else if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.emit(line, out);
        }
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
}
