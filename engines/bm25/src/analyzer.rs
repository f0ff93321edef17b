//! The English analyzer shared by indexing and querying: split on non-alphanumerics, drop
//! over-long tokens, lowercase, remove stopwords, Snowball-stem.
//!
//! Queries go through the very same analyzer and become term queries built by hand, so user
//! text is never interpreted as query syntax (§15.4).

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer, TokenStream,
};

/// The name under which the analyzer is registered in every index this engine opens.
pub const ANALYZER: &str = "rcp_en";

/// Tokens of this many bytes or more are dropped: they are almost always noise (base64, URLs).
/// The shared chunker's word limit, so word counts and index tokens agree.
const MAX_TOKEN_BYTES: usize = rcp_corpus::chunking::MAX_WORD_BYTES;

/// Common English function words. Removing them keeps low-information terms out of both the
/// postings and the queries ("what are the problems of ..." searches for "problem").
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Builds the analyzer (§ engine behaviour, documented in the README of the crate).
pub fn english() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOPWORDS.iter().map(|w| (*w).to_owned())))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The analyzer's word tokens of `text` before stopword removal and stemming, as byte ranges
/// (`start..end`) in order: the unit in which `tokenBudget` (§7.7.2) and chunk sizes count.
/// They are [`rcp_corpus::chunking::word_spans`], the words the shared chunker counts: the
/// analyzer's tokenizer (letter/digit runs, tokens of 64 bytes or more dropped)
/// splits text the same way (tested below).
pub fn word_spans(text: &str) -> Vec<(usize, usize)> {
    rcp_corpus::chunking::word_spans(text)
}

/// `tokenBudget` counts (§7.7.2) with this engine's own analyzer: its word tokens (runs of
/// letters and digits up to 64 bytes), stopwords included, since they are part of the body a
/// reader receives. Not a language model's subword tokenizer: a reader's count runs higher
/// (about 1.3 subword tokens per English word).
#[derive(Debug, Clone, Copy, Default)]
pub struct WordCounter;

impl rcp_server::TokenCounter for WordCounter {
    fn name(&self) -> String {
        "the rcp-bm25 analyzer's word tokens (letter/digit runs, stopwords included; not a subword tokenizer)".into()
    }

    fn count(&self, text: &str) -> usize {
        word_spans(text).len()
    }
}

/// Analyzes `text` into its index terms, in order (duplicates kept).
pub fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_drops_stopwords_and_stems() {
        let mut a = english();
        assert_eq!(terms(&mut a, "What are the Problems of heated wings?"), ["problem", "heat", "wing"]);
        assert!(terms(&mut a, "the of and").is_empty());
        // Query syntax is just text: no field prefixes, no operators.
        assert_eq!(terms(&mut a, "title:rust AND -tokio*"), ["titl", "rust", "tokio"]);
    }

    #[test]
    fn words_are_counted_with_stopwords_and_their_byte_spans() {
        let text = "The wing, é-heated.";
        assert_eq!(word_spans(text), [(0, 3), (4, 8), (10, 12), (13, 19)]);
        assert_eq!(&text[10..12], "é");
        assert_eq!(rcp_server::TokenCounter::count(&WordCounter, "What are the problems?"), 4);
    }

    /// The analyzer's own tokenizer, before stopwords and stemming: what `word_spans` was before
    /// it became the shared chunker's.
    fn tokenizer_spans(text: &str) -> Vec<(usize, usize)> {
        let mut words =
            TextAnalyzer::builder(SimpleTokenizer::default()).filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES)).build();
        let mut out = Vec::new();
        let mut stream = words.token_stream(text);
        while stream.advance() {
            let t = stream.token();
            out.push((t.offset_from, t.offset_to));
        }
        out
    }

    #[test]
    fn word_spans_are_the_tokenizers_words() {
        let long = "z".repeat(MAX_TOKEN_BYTES);
        let almost = "y".repeat(MAX_TOKEN_BYTES - 1);
        let texts = [
            String::new(),
            "The wing, é-heated.".to_owned(),
            "  ...  ".to_owned(),
            format!("{long} a {almost} {long}b {almost}"),
            format!("{almost}é"),
            "naïve café — ß9 ٣x 漢字かな e\u{301} x\u{200d}y 1,000.5 _under_score O'Brien".to_owned(),
            "tab\there\nnew\r\nline 🙂emoji🙂 end".to_owned(),
        ];
        for t in &texts {
            assert_eq!(word_spans(t), tokenizer_spans(t), "{t:?}");
        }
    }
}
