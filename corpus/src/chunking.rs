//! Server-side chunking (§6 `index.chunking`, §7.10 `chunk:true`): a document's text split into
//! sentence-aware windows of at most [`ChunkPolicy::max_words`] words, each starting with the
//! last sentences of the one before (up to [`ChunkPolicy::overlap_words`] words) — the policy of
//! LlamaIndex's `SentenceSplitter` and LangChain's recursive splitters, with sizes counted in
//! words ([`word_spans`]). One implementation for every engine that chunks (rcp-bm25, rcp-pg),
//! so a document splits into the same chunks, at the same byte offsets, wherever it is added.
//!
//! - **Words** are runs of letters and digits (Unicode `alphanumeric`) shorter than
//!   [`MAX_WORD_BYTES`] bytes; stopwords count. rcp-bm25's analyzer tokenizes the same way, and
//!   counts `tokenBudget` with these spans.
//! - **Sentences** end at `.`, `!` or `?` followed by whitespace, or at a blank line. A
//!   sentence longer than the window is cut into pieces of `max_words` words at word
//!   boundaries.
//! - **Offsets** are UTF-8 byte offsets into the original text, half-open (`start..end`), the
//!   integers `hit.citation.start`/`end` carry (§4.6 counts offsets in bytes). A chunk's text is
//!   exactly `text[start..end]`: leading and trailing whitespace of a window is left out, nothing
//!   inside it is changed.
//! - Every word of the document is in at least one chunk; a text with no words is one chunk
//!   covering all of it.

/// Words of this many bytes or more are not words (base64, URLs): they are skipped, neither
/// counted nor cut at.
pub const MAX_WORD_BYTES: usize = 64;

/// The words of `text`: byte ranges (`start..end`) of its runs of letters and digits shorter
/// than [`MAX_WORD_BYTES`] bytes, in order. The unit in which chunk sizes (and rcp-bm25's
/// `tokenBudget`, §7.7.2) count.
pub fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                start = None;
                if i - s < MAX_WORD_BYTES {
                    out.push((s, i));
                }
            }
            _ => {}
        }
    }
    if let Some(s) = start
        && text.len() - s < MAX_WORD_BYTES
    {
        out.push((s, text.len()));
    }
    out
}

/// The granularity of a search's hits (§7.7.2 `unit`), for engines that index chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// One hit per document: a chunked document is ranked by its best chunk (MaxP) and
    /// returned whole.
    #[default]
    Document,
    /// One hit per chunk; a document added whole is its own single chunk.
    Chunk,
}

impl Unit {
    /// The unit a `retrieve` asks for: `chunk`, or `document` for anything else (the framework
    /// has checked it against `retrieve.units`).
    pub fn of(unit: Option<&str>) -> Self {
        if unit == Some("chunk") { Unit::Chunk } else { Unit::Document }
    }

    /// The wire name (`hit.unit`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Document => "document",
            Unit::Chunk => "chunk",
        }
    }
}

/// The window sizes of [`chunk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPolicy {
    /// Most words in one chunk (at least 1).
    pub max_words: usize,
    /// Most words a chunk repeats from the end of the one before (whole sentences only).
    pub overlap_words: usize,
}

impl Default for ChunkPolicy {
    /// 128-word windows with up to 32 words of overlap: about 170 subword tokens, the passage
    /// size of MS MARCO-style retrieval, a quarter repeated.
    fn default() -> Self {
        Self { max_words: 128, overlap_words: 32 }
    }
}

/// One chunk of a document: its position and its byte range in the original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Position in the document, from 0.
    pub index: usize,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

/// A sentence, or a piece of a long one: its byte range and word count.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    words: usize,
}

/// Splits `text` into chunks under `policy` (see the module docs; §7.10 `chunk:true`).
pub fn chunk(text: &str, policy: ChunkPolicy) -> Vec<Chunk> {
    let max = policy.max_words.max(1);
    let units = units(text, max);
    if units.is_empty() {
        return vec![Chunk { index: 0, start: 0, end: text.len() }];
    }
    let mut chunks = Vec::new();
    let mut first = 0;
    loop {
        // Greedily take units while they fit; always at least one.
        let mut last = first;
        let mut words = units[first].words;
        while last + 1 < units.len() && words + units[last + 1].words <= max {
            last += 1;
            words += units[last].words;
        }
        chunks.push(Chunk { index: chunks.len(), start: units[first].start, end: units[last].end });
        if last + 1 == units.len() {
            return chunks;
        }
        // The next window starts with the trailing units of this one that fit in the overlap
        // and leave room for the unit after this window, so every window moves forward.
        let mut next = last + 1;
        let mut overlap = 0;
        let room = max.saturating_sub(units[last + 1].words).min(policy.overlap_words);
        while next > first + 1 && overlap + units[next - 1].words <= room {
            next -= 1;
            overlap += units[next].words;
        }
        first = next;
    }
}

/// The sentences of `text` that hold words, long ones cut into pieces of at most `max` words.
fn units(text: &str, max: usize) -> Vec<Piece> {
    let spans = word_spans(text);
    let mut out = Vec::new();
    let mut w = 0;
    for (start, end) in sentences(text) {
        let from = w;
        while w < spans.len() && spans[w].1 <= end {
            w += 1;
        }
        let words = &spans[from..w];
        if words.is_empty() {
            continue;
        }
        if words.len() <= max {
            out.push(Piece { start, end, words: words.len() });
            continue;
        }
        // A long sentence: pieces of `max` words, the first from the sentence start, the last
        // to its end, each other from its first word to its last.
        let pieces = words.chunks(max).collect::<Vec<_>>();
        let n = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let s = if i == 0 { start } else { piece[0].0 };
            let e = if i + 1 == n { end } else { piece[piece.len() - 1].1 };
            out.push(Piece { start: s, end: e, words: piece.len() });
        }
    }
    out
}

/// Byte ranges of the sentences of `text`, without surrounding whitespace.
fn sentences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if start.is_none() && !c.is_whitespace() {
            start = Some(i);
        }
        let next = chars.peek().map(|&(_, n)| n);
        let ends = match c {
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            '\n' => {
                // A blank line: this newline, optional spaces, another newline.
                let rest = &text[i + 1..];
                rest.trim_start_matches([' ', '\t', '\r']).starts_with('\n')
            }
            _ => next.is_none(),
        };
        if ends && let Some(s) = start.take() {
            let end = if c == '\n' { text[..i].trim_end().len() } else { i + c.len_utf8() };
            if end > s {
                out.push((s, end));
            }
        }
    }
    if let Some(s) = start {
        let end = text.trim_end().len();
        if end > s {
            out.push((s, end));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(text: &'a str, chunks: &[Chunk]) -> Vec<&'a str> {
        chunks.iter().map(|c| &text[c.start..c.end]).collect()
    }

    #[test]
    fn words_are_letter_and_digit_runs_shorter_than_the_limit() {
        let text = "The wing, é-heated.";
        assert_eq!(word_spans(text), [(0, 3), (4, 8), (10, 12), (13, 19)]);
        let long = "x".repeat(MAX_WORD_BYTES);
        let text = format!("a {long} b{}", "y".repeat(MAX_WORD_BYTES - 2));
        assert_eq!(word_spans(&text), [(0, 1), (MAX_WORD_BYTES + 3, 2 * MAX_WORD_BYTES + 2)], "63 bytes is a word");
        assert_eq!(word_spans(&long), []);
        assert_eq!(word_spans("ß9 ٣x"), [(0, 3), (4, 7)]);
    }

    #[test]
    fn sentences_are_packed_into_windows_with_sentence_overlap() {
        let text = "One two three. Four five six.  Seven eight!\n\nNine ten eleven twelve? Thirteen.";
        let got = chunk(text, ChunkPolicy { max_words: 6, overlap_words: 3 });
        assert_eq!(
            texts(text, &got),
            [
                "One two three. Four five six.",
                "Four five six.  Seven eight!",
                "Seven eight!\n\nNine ten eleven twelve?",
                "Thirteen."
            ]
        );
        assert_eq!(got.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn a_short_text_is_one_chunk_and_a_wordless_one_too() {
        let text = "  A short document.  ";
        assert_eq!(texts(text, &chunk(text, ChunkPolicy::default())), ["A short document."]);
        assert_eq!(chunk("  ...  ", ChunkPolicy::default()), [Chunk { index: 0, start: 0, end: 7 }]);
        assert_eq!(chunk("", ChunkPolicy::default()), [Chunk { index: 0, start: 0, end: 0 }]);
    }

    #[test]
    fn a_long_sentence_is_cut_at_word_boundaries_and_offsets_are_bytes() {
        let text = "éa éb éc éd ée éf ég";
        let got = chunk(text, ChunkPolicy { max_words: 3, overlap_words: 0 });
        assert_eq!(texts(text, &got), ["éa éb éc", "éd ée éf", "ég"]);
        assert_eq!((got[1].start, got[1].end), (12, 23), "byte offsets, not characters");
    }

    #[test]
    fn every_word_is_covered_and_windows_move_forward() {
        let text = "Alpha beta gamma delta. ".repeat(40);
        for (max, overlap) in [(5, 4), (7, 0), (12, 12), (1, 1)] {
            let got = chunk(&text, ChunkPolicy { max_words: max, overlap_words: overlap });
            let spans = word_spans(&text);
            assert!(spans.iter().all(|&(s, e)| got.iter().any(|c| c.start <= s && e <= c.end)));
            assert!(got.windows(2).all(|w| w[0].start < w[1].start && w[0].end < w[1].end));
            assert!(got.iter().all(|c| word_spans(&text[c.start..c.end]).len() <= max));
        }
    }
}
