//! The learned-sparse ranking query: for each query term `t` with weight `q_t`, a scorer that
//! walks `t`'s postings in the impact field and scores each document `q_t · tf / QUANTIZATION`
//! (its stored impact); the terms are OR-ed by a [`BooleanQuery`], whose union sums them, so a
//! document scores `Σ q_t · d_t`, the dot product of the two sparse vectors. Deleted documents
//! are skipped by the collectors through each segment's alive bitset, as for every query.

use tantivy::postings::Postings;
use tantivy::query::{BooleanQuery, EmptyQuery, EmptyScorer, EnableScoring, Explanation, Occur, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption, Term};
use tantivy::{DocId, DocSet, Score, SegmentReader, TantivyError};

use super::QUANTIZATION;

/// `Σ q_t · d_t` over `terms` (`(vocabulary id, query weight)`) in the impact `field`.
pub(crate) fn dot_product(field: Field, terms: &[(u32, f32)]) -> Box<dyn Query> {
    if terms.is_empty() {
        return Box::new(EmptyQuery);
    }
    let clauses: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .map(|&(id, weight)| {
            let term = Term::from_field_text(field, &super::term_text(id));
            (Occur::Should, Box::new(ImpactQuery { term, weight }) as Box<dyn Query>)
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
}

/// One query term: its postings scored by stored impact times the query weight.
#[derive(Debug, Clone)]
struct ImpactQuery {
    term: Term,
    weight: f32,
}

impl Query for ImpactQuery {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(ImpactWeight { term: self.term.clone(), weight: self.weight }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        visitor(&self.term, false);
    }
}

struct ImpactWeight {
    term: Term,
    weight: f32,
}

impl Weight for ImpactWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let inverted = reader.inverted_index(self.term.field())?;
        Ok(match inverted.read_postings(&self.term, IndexRecordOption::WithFreqs)? {
            Some(postings) => Box::new(ImpactScorer { postings, weight: self.weight * boost / QUANTIZATION }),
            None => Box::new(EmptyScorer),
        })
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) != doc {
            return Err(TantivyError::InvalidArgument(format!("document {doc} lacks the term")));
        }
        Ok(Explanation::new("query weight × document impact", scorer.score()))
    }
}

/// A term's postings, each scored `weight × term frequency` (the quantized impact).
struct ImpactScorer<P> {
    postings: P,
    /// The query weight over [`QUANTIZATION`], times the boost.
    weight: f32,
}

impl<P: Postings> DocSet for ImpactScorer<P> {
    fn advance(&mut self) -> DocId {
        self.postings.advance()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.postings.seek(target)
    }

    fn doc(&self) -> DocId {
        self.postings.doc()
    }

    fn size_hint(&self) -> u32 {
        self.postings.size_hint()
    }
}

impl<P: Postings> Scorer for ImpactScorer<P> {
    fn score(&mut self) -> Score {
        self.weight * self.postings.term_freq() as Score
    }
}
