//! The fixed corpus: twelve short documents (two sentences each) about retrieval, and the
//! weighted, undirected links between them. Words, TF-IDF scoring and sentence chunks live here
//! so the graph ops, `retrieve` and `memory` all read the same text the same way.

use std::collections::{BTreeMap, HashMap};

/// `(id, text)` of every document; each sentence is one chunk.
pub(crate) const DOCS: &[(&str, &str)] = &[
    (
        "bm25",
        "BM25 ranks documents by term frequency and document length. It is a probabilistic lexical ranking function.",
    ),
    (
        "tfidf",
        "TF-IDF weighs each term by its inverse document frequency. Lexical ranking functions such as BM25 refine it.",
    ),
    (
        "inverted-index",
        "An inverted index maps every term to its postings list. Lexical retrieval reads the postings of the query terms.",
    ),
    (
        "dense",
        "Dense retrieval embeds queries and passages as vectors. Nearest neighbour search finds the passages closest to the query vector.",
    ),
    (
        "hnsw",
        "HNSW is a layered graph for approximate nearest neighbour search. It links each vector to its closest vectors.",
    ),
    ("embeddings", "Sentence embeddings map text to vectors. Their cosine similarity reflects meaning."),
    ("rrf", "Reciprocal rank fusion merges ranked lists from several engines. It needs only the rank positions."),
    ("hybrid", "Hybrid retrieval combines lexical and dense ranked lists. Fusion merges both into one ranking."),
    (
        "cross-encoder",
        "A cross-encoder reranks candidates by reading query and passage together. It is slower than dense retrieval.",
    ),
    (
        "pagerank",
        "Personalized PageRank spreads relevance from seed nodes along graph links. GraphRAG expands entities with it.",
    ),
    ("communities", "Community detection groups densely linked graph nodes. A summary describes each community."),
    ("wal", "A write-ahead log makes acknowledged writes durable. Crash recovery replays the log."),
];

/// Undirected links `(a, b, weight)`, weights in `(0, 1]`.
pub(crate) const LINKS: &[(&str, &str, f64)] = &[
    ("bm25", "tfidf", 0.9),
    ("bm25", "inverted-index", 0.8),
    ("tfidf", "inverted-index", 0.6),
    ("dense", "embeddings", 0.9),
    ("dense", "hnsw", 0.8),
    ("hnsw", "embeddings", 0.5),
    ("rrf", "hybrid", 0.9),
    ("hybrid", "bm25", 0.6),
    ("hybrid", "dense", 0.6),
    ("cross-encoder", "dense", 0.4),
    ("cross-encoder", "rrf", 0.3),
    ("pagerank", "communities", 0.8),
    ("pagerank", "hnsw", 0.3),
    ("wal", "inverted-index", 0.2),
];

/// Words that carry no topic.
const STOP: &[&str] = &[
    "a", "an", "and", "as", "by", "each", "from", "it", "its", "is", "of", "one", "only", "such", "than", "the",
    "their", "them", "to", "with", "every", "into", "both", "several", "along", "closest", "finds", "needs",
];

/// Lower-cased alphanumeric words of `s`, stop words left out.
pub(crate) fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
}

/// Whitespace tokens of `s`: the unit `tokenBudget` counts.
pub(crate) fn tokens(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// The sentences of a document: its chunks.
pub(crate) fn chunks(text: &str) -> Vec<&str> {
    text.split_inclusive(". ").map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// The text of document `id`.
pub(crate) fn text(id: &str) -> Option<&'static str> {
    DOCS.iter().find(|(d, _)| *d == id).map(|(_, t)| *t)
}

/// TF-IDF scorer over a set of texts.
pub(crate) struct Scorer {
    docs: usize,
    df: HashMap<String, usize>,
}

impl Scorer {
    /// Document frequencies over `texts`.
    pub(crate) fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut docs = 0;
        for t in texts {
            docs += 1;
            let mut seen: Vec<String> = words(t).collect();
            seen.sort();
            seen.dedup();
            for w in seen {
                *df.entry(w).or_default() += 1;
            }
        }
        Self { docs, df }
    }

    /// Inverse document frequency of `w`.
    pub(crate) fn idf(&self, w: &str) -> f64 {
        let df = self.df.get(w).copied().unwrap_or(0) as f64;
        ((self.docs as f64 + 1.0) / (df + 0.5)).ln()
    }

    /// The TF-IDF score of `text` for `query`; 0 when no query word occurs.
    pub(crate) fn score(&self, query: &str, text: &str) -> f64 {
        let doc: Vec<String> = words(text).collect();
        words(query).map(|q| doc.iter().filter(|w| **w == q).count() as f64 * self.idf(&q)).sum()
    }

    /// The `n` words of `texts` with the highest summed TF-IDF, best first (ties by word).
    pub(crate) fn key_terms<'a>(&self, texts: impl IntoIterator<Item = &'a str>, n: usize) -> Vec<String> {
        let mut tf: BTreeMap<String, f64> = BTreeMap::new();
        for t in texts {
            for w in words(t) {
                *tf.entry(w).or_default() += 1.0;
            }
        }
        let mut ranked: Vec<(String, f64)> = tf.into_iter().map(|(w, f)| (w.clone(), f * self.idf(&w))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        ranked.into_iter().take(n).map(|(w, _)| w).collect()
    }
}

/// The scorer over the whole corpus.
pub(crate) fn corpus_scorer() -> Scorer {
    Scorer::new(DOCS.iter().map(|(_, t)| *t))
}

/// Documents matching `query`, best first: `(id, score)` with a positive score.
pub(crate) fn matches(scorer: &Scorer, query: &str) -> Vec<(&'static str, f64)> {
    let mut out: Vec<(&'static str, f64)> =
        DOCS.iter().map(|(id, t)| (*id, scorer.score(query, t))).filter(|(_, s)| *s > 0.0).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_joins_two_documents_and_chunks_are_sentences() {
        for (a, b, w) in LINKS {
            assert!(text(a).is_some() && text(b).is_some() && *w > 0.0 && *w <= 1.0, "{a} {b}");
        }
        for (_, t) in DOCS {
            assert_eq!(chunks(t).len(), 2, "{t}");
            assert_eq!(chunks(t).join(" "), *t);
        }
    }
}
