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

/// Tokens longer than this (in bytes) are dropped: they are almost always noise (base64, URLs).
const MAX_TOKEN_BYTES: usize = 64;

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
}
