//! Key terms, extractive summaries and follow-up queries (§7.9 `global`, `communities`,
//! `drift`): words taken from the member documents, ranked by tf-idf against the corpus.
//! Nothing here writes prose: a summary is the community's key terms and the titles (or ids)
//! of its most central documents, exactly as stored.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// Words too common in English to describe a community.
const STOPWORDS: &[&str] = &[
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "and",
    "any",
    "are",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "can",
    "could",
    "did",
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
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "into",
    "its",
    "itself",
    "just",
    "more",
    "most",
    "not",
    "now",
    "off",
    "once",
    "only",
    "other",
    "our",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "too",
    "under",
    "until",
    "very",
    "was",
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
    "may",
    "one",
    "two",
    "upon",
    "thus",
    "shown",
    "show",
    "shows",
    "given",
    "obtained",
    "used",
    "using",
    "made",
    "well",
    "however",
    "results",
    "result",
    "paper",
    "present",
    "presented",
    "found",
    "method",
    "methods",
];

/// Lower-cased alphanumeric words of at least three characters, stopwords and pure numbers
/// left out, in text order.
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
}

/// Document frequencies of the corpus, kept as documents come and go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vocabulary {
    df: HashMap<String, u32>,
    docs: u32,
}

impl Vocabulary {
    /// Counts a document's distinct terms.
    pub fn add(&mut self, text: &str) {
        self.docs += 1;
        for t in tokenize(text).collect::<HashSet<_>>() {
            *self.df.entry(t).or_default() += 1;
        }
    }

    /// Uncounts a document added before.
    pub fn remove(&mut self, text: &str) {
        self.docs = self.docs.saturating_sub(1);
        for t in tokenize(text).collect::<HashSet<_>>() {
            if let Some(n) = self.df.get_mut(&t) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.df.remove(&t);
                }
            }
        }
    }

    /// Documents counted.
    pub fn documents(&self) -> u32 {
        self.docs
    }

    /// Smoothed inverse document frequency: ln(1 + N / (1 + df)).
    pub fn idf(&self, term: &str) -> f64 {
        let df = self.df.get(term).copied().unwrap_or(0);
        (1.0 + f64::from(self.docs) / (1.0 + f64::from(df))).ln()
    }
}

/// The `n` terms of `texts` with the highest tf-idf (term frequency over all the texts,
/// sub-linear, times the corpus idf), best first; a term must occur in two texts when there
/// are several, so one document's idiosyncrasy does not name a community.
pub fn key_terms<'a>(texts: impl IntoIterator<Item = &'a str>, vocabulary: &Vocabulary, n: usize) -> Vec<String> {
    let mut tf: HashMap<String, (u32, u32)> = HashMap::new();
    let mut count = 0;
    for text in texts {
        count += 1;
        let mut seen = HashSet::new();
        for t in tokenize(text) {
            let entry = tf.entry(t.clone()).or_default();
            entry.0 += 1;
            if seen.insert(t) {
                entry.1 += 1;
            }
        }
    }
    let min_docs = if count > 1 { 2 } else { 1 };
    let mut scored: Vec<(String, f64)> = tf
        .into_iter()
        .filter(|(_, (_, docs))| *docs >= min_docs)
        .map(|(t, (f, _))| {
            let s = (1.0 + f64::from(f).ln()) * vocabulary.idf(&t);
            (t, s)
        })
        .collect();
    scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then_with(|| a.0.cmp(&b.0)));
    scored.into_iter().take(n).map(|(t, _)| t).collect()
}

/// An extractive community summary: its key terms and its representative documents, each as
/// its stored title when it has one, else its id.
pub fn summary(terms: &[String], representatives: &[(&str, Option<&str>)], members: usize) -> String {
    let docs: Vec<String> = representatives
        .iter()
        .map(|(id, title)| match title {
            Some(t) => format!("\"{}\" ({id})", t.trim()),
            None => (*id).to_owned(),
        })
        .collect();
    format!("{members} documents. Key terms: {}. Representative: {}.", terms.join(", "), docs.join("; "))
}

/// A follow-up query from a community's key terms: its first `n` terms that are not already
/// words of the `query`; `None` when nothing new is left.
pub fn followup(query: &str, terms: &[String], n: usize) -> Option<String> {
    let asked: HashSet<String> = tokenize(query).collect();
    let fresh: Vec<&str> = terms.iter().filter(|t| !asked.contains(*t)).take(n).map(String::as_str).collect();
    (!fresh.is_empty()).then(|| fresh.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_skip_stopwords_numbers_and_short_words() {
        let t: Vec<String> = tokenize("The Boundary-layer of a 1958 jet, at Mach 2.5").collect();
        assert_eq!(t, ["boundary", "layer", "jet", "mach"]);
    }

    #[test]
    fn key_terms_favour_what_distinguishes_the_members() {
        let corpus = [
            "boundary layer transition on a flat plate",
            "boundary layer heat transfer on a flat plate",
            "supersonic flow over a wing",
            "supersonic wing flutter",
            "wing loads in flight",
        ];
        let mut v = Vocabulary::default();
        for d in corpus {
            v.add(d);
        }
        let terms = key_terms(corpus[..2].iter().copied(), &v, 3);
        assert_eq!(terms.len(), 3);
        assert!(terms.iter().all(|t| ["boundary", "layer", "flat", "plate"].contains(&t.as_str())), "{terms:?}");
        assert!(!terms.contains(&"transition".to_owned()), "one member's word does not name the pair");
        v.remove(corpus[4]);
        assert_eq!(v.documents(), 4);
        assert!(v.idf("loads") > v.idf("wing"));
    }

    #[test]
    fn summary_and_followup_are_extractive() {
        let terms = vec!["boundary".to_owned(), "layer".to_owned(), "plate".to_owned()];
        let s = summary(&terms, &[("12", Some(" Flat plates ")), ("7", None)], 4);
        assert_eq!(s, "4 documents. Key terms: boundary, layer, plate. Representative: \"Flat plates\" (12); 7.");
        assert_eq!(followup("boundary layers", &terms, 2).as_deref(), Some("layer plate"));
        assert_eq!(followup("boundary layer plate", &terms, 2), None);
    }
}
