//! Query expansion by pseudo-relevance feedback: RM3, the relevance model of Lavrenko and
//! Croft interpolated with the original query (Abdul-Jaleel et al., UMass at TREC 2004).
//!
//! The top `fbDocs` documents of the original query are taken as relevant. Each one's terms
//! (its stored body, re-analyzed with the engine's analyzer) give `P(w|d)`, the document's
//! term frequencies normalised to sum to 1; the relevance model is
//! `P(w|R) ∝ Σ_d P(w|d) · score(d)`, cut to its `fbTerms` heaviest terms and normalised again.
//! The expanded query weighs each term `λ·P(w|Q) + (1-λ)·P(w|R)` with `λ =
//! originalQueryWeight`. As in Anserini, terms shorter than 2 or longer than 20 characters,
//! terms that are not plain `[a-z0-9]`, and terms in more than 10% of the documents are left
//! out of the feedback model.

use std::collections::HashMap;

use tantivy::collector::TopDocs;
use tantivy::query::Query;
use tantivy::schema::{Term, Value as _};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, Searcher, TantivyDocument};

use super::Engine;
use crate::error::EngineError;

/// RM3 parameters; the defaults are the usual ones (Anserini's `-rm3`: 10, 10, 0.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rm3 {
    /// Feedback documents: how many top documents of the original query are read.
    pub fb_docs: usize,
    /// Expansion terms kept from the relevance model.
    pub fb_terms: usize,
    /// `λ`: the original query's share of the final weights, in `[0,1]`.
    pub original_query_weight: f32,
    /// Terms in more than this fraction of the documents are left out of the feedback model.
    pub max_doc_freq_ratio: f64,
}

impl Default for Rm3 {
    fn default() -> Self {
        Self { fb_docs: 10, fb_terms: 10, original_query_weight: 0.5, max_doc_freq_ratio: 0.1 }
    }
}

/// How a search rewrites its query before ranking (`retrieve.rewrite`, §7.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rewrite {
    /// Rank with the RM3-expanded query.
    Rm3(Rm3),
    /// Rank with `n` variants ([`Engine::variants`]) and fuse their rankings by reciprocal rank.
    MultiQuery {
        /// The model the variants come from.
        rm3: Rm3,
        /// How many variants, at most.
        n: usize,
    },
}

/// One term of an expanded query.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedTerm {
    /// The index term (analyzed: lowercased, stemmed).
    pub term: String,
    /// The word most often seen for it in the feedback documents (`None` for a term of the
    /// original query that none of them contains).
    pub surface: Option<String>,
    /// Its weight in the ranking query.
    pub weight: f32,
}

/// An expanded query: weighted terms, heaviest first, and how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The weighted terms (original and expansion), heaviest first.
    pub terms: Vec<WeightedTerm>,
    /// The feedback documents actually read (fewer than `fbDocs` when fewer matched).
    pub feedback_docs: usize,
    /// A readable form: the original query followed by the added words, heaviest first.
    pub text: String,
}

impl Expansion {
    /// The terms that were not in the original query, heaviest first.
    pub fn added(&self, original: &[String]) -> Vec<&WeightedTerm> {
        self.terms.iter().filter(|t| !original.contains(&t.term)).collect()
    }

    /// A one-line account for `usage.notes`: the model and its added terms with weights.
    pub fn describe(&self, original: &[String]) -> String {
        let added: Vec<String> = self
            .added(original)
            .iter()
            .map(|t| format!("{} {:.3}", t.surface.as_deref().unwrap_or(&t.term), t.weight))
            .collect();
        format!(
            "rewrite: RM3 over {} feedback documents; added terms: {}",
            self.feedback_docs,
            if added.is_empty() { "none".to_owned() } else { added.join(", ") }
        )
    }
}

/// One feedback document: its analyzed terms counted, and the words seen for each.
#[derive(Debug, Default)]
pub(super) struct DocTerms {
    tf: HashMap<String, u32>,
    surfaces: HashMap<String, HashMap<String, u32>>,
}

impl DocTerms {
    /// `P(w|d)` over the terms `keep` accepts: frequencies normalised to sum to 1.
    fn model(&self, keep: &mut dyn FnMut(&str) -> bool) -> HashMap<String, f64> {
        let kept: Vec<(&String, u32)> = self.tf.iter().filter(|(t, _)| keep(t)).map(|(t, n)| (t, *n)).collect();
        let total: u32 = kept.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return HashMap::new();
        }
        kept.into_iter().map(|(t, n)| (t.clone(), f64::from(n) / f64::from(total))).collect()
    }
}

/// The query's own distribution `P(w|Q)`: term counts normalised to sum to 1, in first-seen
/// order.
pub(super) fn query_model(terms: &[String]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut position: HashMap<&str, usize> = HashMap::new();
    for t in terms {
        match position.get(t.as_str()) {
            Some(&i) => out[i].1 += 1.0,
            None => {
                position.insert(t, out.len());
                out.push((t.clone(), 1.0));
            }
        }
    }
    let total = terms.len().max(1) as f64;
    out.iter_mut().for_each(|(_, n)| *n /= total);
    out
}

/// The relevance model `P(w|R) ∝ Σ_d P(w|d)·weight(d)`, cut to the `fb_terms` heaviest terms
/// (ties by term) and normalised to sum to 1.
pub(super) fn relevance_model(docs: &[(f64, HashMap<String, f64>)], fb_terms: usize) -> Vec<(String, f64)> {
    let mut sum: HashMap<&str, f64> = HashMap::new();
    for (weight, model) in docs {
        for (t, p) in model {
            *sum.entry(t.as_str()).or_default() += p * weight;
        }
    }
    let mut ranked: Vec<(String, f64)> =
        sum.into_iter().filter(|(_, w)| *w > 0.0 && w.is_finite()).map(|(t, w)| (t.to_owned(), w)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(fb_terms);
    let total: f64 = ranked.iter().map(|(_, w)| w).sum();
    if total > 0.0 {
        ranked.iter_mut().for_each(|(_, w)| *w /= total);
    }
    ranked
}

/// `λ·query + (1-λ)·model`, heaviest first (ties: original-query terms first, in order).
pub(super) fn interpolate(query: &[(String, f64)], model: &[(String, f64)], lambda: f64) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = query.iter().map(|(t, p)| (t.clone(), lambda * p)).collect();
    for (t, p) in model {
        match out.iter_mut().find(|(u, _)| u == t) {
            Some((_, w)) => *w += (1.0 - lambda) * p,
            None => out.push((t.clone(), (1.0 - lambda) * p)),
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Anserini's shape filter on feedback terms: 2 to 20 characters of `[a-z0-9]`.
fn plain_term(t: &str) -> bool {
    (2..=20).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl Engine {
    /// The top `n` documents of `query` on `searcher`, with their scores.
    pub(super) fn feedback_docs(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        n: usize,
    ) -> Result<Vec<(f32, DocAddress)>, EngineError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        Ok(searcher.search(query, &TopDocs::with_limit(n).order_by_score())?)
    }

    /// A stored document's body analyzed into counted terms and the words behind them.
    pub(super) fn doc_terms(&self, searcher: &Searcher, addr: DocAddress) -> Result<DocTerms, EngineError> {
        let doc: TantivyDocument = searcher.doc(addr)?;
        let text = doc.get_first(self.fields.text_raw).and_then(|v| v.as_str()).unwrap_or_default();
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut out = DocTerms::default();
        while stream.advance() {
            let token = stream.token();
            let surface = text.get(token.offset_from..token.offset_to).unwrap_or(&token.text).to_lowercase();
            *out.tf.entry(token.text.clone()).or_default() += 1;
            *out.surfaces.entry(token.text.clone()).or_default().entry(surface).or_default() += 1;
        }
        Ok(out)
    }

    /// RM3 from feedback documents already read (`docs`: score and terms, best first) for
    /// the analyzed query `terms`. Weights are scaled so that they sum to the query's term
    /// count, which keeps scores of the expanded query on the scale of the original's.
    pub(super) fn rm3_from(
        &self,
        searcher: &Searcher,
        terms: &[String],
        docs: &[(f32, DocTerms)],
        rm3: &Rm3,
        original: &str,
    ) -> Expansion {
        let n = searcher.num_docs().max(1) as f64;
        let mut df_ok: HashMap<String, bool> = HashMap::new();
        let mut keep = |t: &str| {
            if !plain_term(t) {
                return false;
            }
            *df_ok.entry(t.to_owned()).or_insert_with(|| {
                let df = searcher.doc_freq(&Term::from_field_text(self.fields.text, t)).unwrap_or(u64::MAX);
                df as f64 / n <= rm3.max_doc_freq_ratio
            })
        };
        let models: Vec<(f64, HashMap<String, f64>)> =
            docs.iter().map(|(score, d)| (f64::from(*score), d.model(&mut keep))).collect();
        let lambda = f64::from(rm3.original_query_weight.clamp(0.0, 1.0));
        let weighted = interpolate(&query_model(terms), &relevance_model(&models, rm3.fb_terms), lambda);
        let scale = terms.len() as f64;
        let expanded: Vec<WeightedTerm> = weighted
            .into_iter()
            .map(|(term, w)| WeightedTerm {
                surface: surface_of(&term, docs.iter().map(|(_, d)| d)),
                term,
                weight: (w * scale) as f32,
            })
            .collect();
        let added: Vec<&str> = expanded
            .iter()
            .filter(|t| !terms.contains(&t.term))
            .map(|t| t.surface.as_deref().unwrap_or(&t.term))
            .collect();
        let text = std::iter::once(original.trim()).chain(added).collect::<Vec<_>>().join(" ");
        Expansion { terms: expanded, feedback_docs: docs.len(), text }
    }

    /// Reads the top `rm3.fb_docs` documents of `query` (the original query, filtered as the
    /// request is) and expands `terms` from them.
    pub(super) fn rm3(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        terms: &[String],
        rm3: &Rm3,
        original: &str,
    ) -> Result<(Expansion, Vec<(f32, DocTerms)>), EngineError> {
        let top = self.feedback_docs(searcher, query, rm3.fb_docs)?;
        let docs =
            top.into_iter().map(|(s, a)| self.doc_terms(searcher, a).map(|d| (s, d))).collect::<Result<Vec<_>, _>>()?;
        Ok((self.rm3_from(searcher, terms, &docs, rm3, original), docs))
    }
}

impl Engine {
    /// The RM3 expansion of `query` on the current snapshot (`query/transform` `rewrite`).
    pub fn expand(&self, query: &str, rm3: &Rm3) -> Result<Expansion, EngineError> {
        Ok(self.variants(query, rm3, 1)?.swap_remove(0))
    }

    /// Up to `n` expansions of `query` on the current snapshot (`query/transform`
    /// `multi-query`); see `variants_on`. A query with no searchable terms comes back as is.
    pub fn variants(&self, query: &str, rm3: &Rm3, n: usize) -> Result<Vec<Expansion>, EngineError> {
        let snap = self.current();
        let terms = self.analyze_query(query)?;
        if terms.is_empty() {
            return Ok(vec![Expansion { terms: Vec::new(), feedback_docs: 0, text: query.trim().to_owned() }]);
        }
        let base = self.text_query(&terms);
        self.variants_on(&snap.searcher, base.as_ref(), &terms, rm3, query, n)
    }

    /// Up to `n` expansions of one query for `multi-query`: the RM3 expansion over all
    /// feedback documents first, then one expansion per feedback document alone, in rank
    /// order, so each further variant leans toward a different top document. Variants
    /// identical to an earlier one are dropped, so fewer than `n` may come back.
    pub(super) fn variants_on(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        terms: &[String],
        rm3: &Rm3,
        original: &str,
        n: usize,
    ) -> Result<Vec<Expansion>, EngineError> {
        let (full, docs) = self.rm3(searcher, query, terms, rm3, original)?;
        let mut out = vec![full];
        for one in docs.chunks(1) {
            if out.len() >= n {
                break;
            }
            let e = self.rm3_from(searcher, terms, one, rm3, original);
            if !out.iter().any(|o| o.text == e.text) {
                out.push(e);
            }
        }
        out.truncate(n.max(1));
        Ok(out)
    }
}

/// The word seen most often for `term` across `docs` (ties: the shortest, then the first
/// alphabetically).
fn surface_of<'a>(term: &str, docs: impl Iterator<Item = &'a DocTerms>) -> Option<String> {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for d in docs {
        for (w, n) in d.surfaces.get(term).into_iter().flatten() {
            *seen.entry(w.as_str()).or_default() += n;
        }
    }
    seen.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.len().cmp(&a.0.len())).then_with(|| b.0.cmp(a.0)))
        .map(|(w, _)| w.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
        pairs.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
    }

    #[test]
    fn query_model_counts_repeats() {
        let q = query_model(&["wing".into(), "heat".into(), "wing".into()]);
        assert_eq!(q, [("wing".to_owned(), 2.0 / 3.0), ("heat".to_owned(), 1.0 / 3.0)]);
    }

    #[test]
    fn relevance_model_weighs_documents_by_score_and_prunes() {
        let docs = [(2.0, model(&[("a", 0.5), ("b", 0.5)])), (1.0, model(&[("b", 0.25), ("c", 0.75)]))];
        // a: 1.0, b: 1.25, c: 0.75 → keep b, a, normalised by 2.25.
        let rm = relevance_model(&docs, 2);
        assert_eq!(rm.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        assert!((rm[0].1 - 1.25 / 2.25).abs() < 1e-12);
        assert!((rm.iter().map(|(_, w)| w).sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn interpolation_mixes_query_and_model() {
        let q = [("x".to_owned(), 1.0)];
        let m = [("x".to_owned(), 0.5), ("y".to_owned(), 0.5)];
        let out = interpolate(&q, &m, 0.5);
        assert_eq!(out, [("x".to_owned(), 0.75), ("y".to_owned(), 0.25)]);
        assert_eq!(interpolate(&q, &m, 1.0)[1], ("y".to_owned(), 0.0));
    }

    #[test]
    fn feedback_terms_must_be_plain() {
        assert!(plain_term("wing") && plain_term("b52"));
        assert!(!plain_term("x") && !plain_term("naïve") && !plain_term(&"a".repeat(21)));
    }
}
