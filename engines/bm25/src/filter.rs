//! Compiles a validated filter tree (§8) into tantivy queries built from typed parts
//! (`TermQuery`, `RangeQuery`, `TermSetQuery`, `PhraseQuery`, `BooleanQuery`), never from
//! query-language strings (§15.4).
//!
//! Semantics, per §8 and the reference evaluator:
//! - a document without the field fails every comparison except `ne`, `nin` and
//!   `exists:false` (which are compiled as the negation of `eq`/`in`/`exists`);
//! - `keyword` comparisons are exact and case-sensitive; `int`/`float`/`date` compare
//!   numerically (dates as epoch milliseconds); `bool` compares booleans;
//! - `contains` on a `keyword` string is a byte substring, on an array-valued field it is
//!   element membership; on a `text` field it matches the analyzed needle as a phrase
//!   (case-insensitive, stemmed: token containment rather than raw substring);
//! - on array-valued fields `eq`/`in` match when any element matches (and `ne`/`nin` when
//!   none does), as in Lucene-style engines.

use std::collections::BTreeSet;
use std::ops::Bound;

use rcp_wire::filter::{FieldType, Filter, Op, date_to_epoch_ms};
use serde_json::Value;
use tantivy::query::{
    AllQuery, BooleanQuery, EmptyQuery, Occur, PhraseQuery, Query, RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{IndexRecordOption, Term};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Searcher, TantivyError};

use crate::analyzer;
use crate::error::EngineError;
use crate::schema::{Fields, MetaField};

/// Compiles `filter` against the index layout; `searcher` is the snapshot the query will run
/// on (substring `contains` expands to the matching terms of its dictionaries).
pub fn compile(
    filter: &Filter,
    fields: &Fields,
    searcher: &Searcher,
    analyzer: &TextAnalyzer,
) -> Result<Box<dyn Query>, EngineError> {
    Compiler { fields, searcher, analyzer }.node(filter)
}

struct Compiler<'a> {
    fields: &'a Fields,
    searcher: &'a Searcher,
    analyzer: &'a TextAnalyzer,
}

fn term_query(term: Term) -> Box<dyn Query> {
    Box::new(TermQuery::new(term, IndexRecordOption::Basic))
}

fn not(q: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(BooleanQuery::new(vec![(Occur::Must, Box::new(AllQuery)), (Occur::MustNot, q)]))
}

fn all_of(qs: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    Box::new(BooleanQuery::new(qs.into_iter().map(|q| (Occur::Must, q)).collect()))
}

fn any_of(qs: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    if qs.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(qs.into_iter().map(|q| (Occur::Should, q)).collect()))
}

/// One bound of a range over an `int` field, from any JSON number: operands beyond `i64` or
/// with a fraction bound the range exactly (`gt -1e19` is every value, `gte 2.5` starts at 3)
/// instead of matching nothing. `None` when no integer satisfies the condition.
fn int_bound(op: Op, value: &Value) -> Option<(Bound<i64>, Bound<i64>)> {
    if let Some(i) = value.as_i64() {
        return Some(match op {
            Op::Gt => (Bound::Excluded(i), Bound::Unbounded),
            Op::Gte => (Bound::Included(i), Bound::Unbounded),
            Op::Lt => (Bound::Unbounded, Bound::Excluded(i)),
            _ => (Bound::Unbounded, Bound::Included(i)),
        });
    }
    let x = value.as_f64().filter(|x| x.is_finite())?;
    // The first (lower) or last (upper) integer that satisfies the condition, as a float.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let lower = |n: f64| match n {
        n if n <= -TWO_63 => Some((Bound::Unbounded, Bound::Unbounded)),
        n if n >= TWO_63 => None,
        n => Some((Bound::Included(n as i64), Bound::Unbounded)),
    };
    let upper = |n: f64| match n {
        n if n >= TWO_63 => Some((Bound::Unbounded, Bound::Unbounded)),
        n if n < -TWO_63 => None,
        n => Some((Bound::Unbounded, Bound::Included(n as i64))),
    };
    match op {
        Op::Gt => lower(x.floor() + 1.0),
        Op::Gte => lower(x.ceil()),
        Op::Lt => upper(x.ceil() - 1.0),
        _ => upper(x.floor()),
    }
}

impl Compiler<'_> {
    fn node(&self, f: &Filter) -> Result<Box<dyn Query>, EngineError> {
        Ok(match f {
            Filter::And(items) => all_of(items.iter().map(|i| self.node(i)).collect::<Result<_, _>>()?),
            Filter::Or(items) => any_of(items.iter().map(|i| self.node(i)).collect::<Result<_, _>>()?),
            Filter::Not(inner) => not(self.node(inner)?),
            Filter::Leaf { field, op, value } => {
                let meta = self.fields.filterable.get(field).ok_or_else(|| {
                    EngineError::invalid(format!("filter.{field}"), format!("field '{field}' is not filterable"))
                })?;
                self.leaf(meta, *op, value)?
            }
        })
    }

    fn leaf(&self, m: &MetaField, op: Op, value: &Value) -> Result<Box<dyn Query>, EngineError> {
        Ok(match op {
            Op::Eq => self.eq(m, value),
            Op::Ne => not(self.eq(m, value)),
            Op::In => self.is_in(m, value),
            Op::Nin => not(self.is_in(m, value)),
            Op::Exists => {
                let present = term_query(Term::from_field_text(self.fields.present, &m.spec.name));
                if value.as_bool().unwrap_or(true) { present } else { not(present) }
            }
            Op::Gt | Op::Gte | Op::Lt | Op::Lte => self.range(m, op, value),
            Op::Contains => self.contains(m, value)?,
        })
    }

    /// The exact-value term for `value`, or `None` when no indexed value can equal it.
    fn term(&self, m: &MetaField, value: &Value) -> Option<Term> {
        match m.spec.ty {
            FieldType::Int => value.as_i64().map(|v| Term::from_field_i64(m.field, v)),
            FieldType::Date => date_to_epoch_ms(value).map(|v| Term::from_field_i64(m.field, v)),
            FieldType::Float => value.as_f64().map(|v| Term::from_field_f64(m.field, v)),
            FieldType::Bool => value.as_bool().map(|v| Term::from_field_bool(m.field, v)),
            _ => value.as_str().map(|v| Term::from_field_text(m.field, v)),
        }
    }

    fn eq(&self, m: &MetaField, value: &Value) -> Box<dyn Query> {
        match self.term(m, value) {
            Some(t) => term_query(t),
            None => Box::new(EmptyQuery),
        }
    }

    fn is_in(&self, m: &MetaField, value: &Value) -> Box<dyn Query> {
        let terms: Vec<Term> =
            value.as_array().map(|items| items.iter().filter_map(|v| self.term(m, v)).collect()).unwrap_or_default();
        if terms.is_empty() { Box::new(EmptyQuery) } else { Box::new(TermSetQuery::new(terms)) }
    }

    fn range(&self, m: &MetaField, op: Op, value: &Value) -> Box<dyn Query> {
        if m.spec.ty == FieldType::Int {
            return match int_bound(op, value) {
                None => Box::new(EmptyQuery),
                Some((Bound::Unbounded, Bound::Unbounded)) => {
                    term_query(Term::from_field_text(self.fields.present, &m.spec.name))
                }
                Some((lo, hi)) => {
                    let term = |v: i64| Term::from_field_i64(m.field, v);
                    let map = |b: Bound<i64>| match b {
                        Bound::Included(v) => Bound::Included(term(v)),
                        Bound::Excluded(v) => Bound::Excluded(term(v)),
                        Bound::Unbounded => Bound::Unbounded,
                    };
                    Box::new(RangeQuery::new(map(lo), map(hi)))
                }
            };
        }
        let term = match m.spec.ty {
            FieldType::Date => date_to_epoch_ms(value).map(|v| Term::from_field_i64(m.field, v)),
            FieldType::Float => value.as_f64().map(|v| Term::from_field_f64(m.field, v)),
            _ => None,
        };
        let Some(t) = term else { return Box::new(EmptyQuery) };
        let (lo, hi) = match op {
            Op::Gt => (Bound::Excluded(t), Bound::Unbounded),
            Op::Gte => (Bound::Included(t), Bound::Unbounded),
            Op::Lt => (Bound::Unbounded, Bound::Excluded(t)),
            _ => (Bound::Unbounded, Bound::Included(t)),
        };
        Box::new(RangeQuery::new(lo, hi))
    }

    fn contains(&self, m: &MetaField, value: &Value) -> Result<Box<dyn Query>, EngineError> {
        let is_array = term_query(Term::from_field_text(self.fields.arrays, &m.spec.name));
        let element = all_of(vec![is_array, self.eq(m, value)]);
        if let (Some(tokens), Some(needle)) = (m.tokens, value.as_str()) {
            // `text`: the analyzed needle as a phrase of the analyzed field.
            let mut analyzer = self.analyzer.clone();
            let words = analyzer::terms(&mut analyzer, needle);
            let terms: Vec<Term> = words.iter().map(|w| Term::from_field_text(tokens, w)).collect();
            let phrase: Box<dyn Query> = match terms.len() {
                0 => term_query(Term::from_field_text(self.fields.present, &m.spec.name)),
                1 => term_query(terms.into_iter().next().unwrap_or_else(|| Term::from_field_text(tokens, ""))),
                _ => Box::new(PhraseQuery::new(terms)),
            };
            return Ok(any_of(vec![element, phrase]));
        }
        if m.spec.ty != FieldType::Keyword {
            return Ok(element);
        }
        let Some(needle) = value.as_str() else { return Ok(element) };
        // Substring of a scalar keyword: every dictionary term containing the needle.
        let mut matching = BTreeSet::new();
        for segment in self.searcher.segment_readers() {
            let inverted = segment.inverted_index(m.field)?;
            let mut stream = inverted.terms().stream().map_err(TantivyError::from)?;
            while stream.advance() {
                if let Ok(s) = std::str::from_utf8(stream.key())
                    && s.contains(needle)
                {
                    matching.insert(s.to_owned());
                }
            }
        }
        let substring = if matching.is_empty() {
            Box::new(EmptyQuery) as Box<dyn Query>
        } else {
            let scalar = not(term_query(Term::from_field_text(self.fields.arrays, &m.spec.name)));
            let set = Box::new(TermSetQuery::new(matching.iter().map(|s| Term::from_field_text(m.field, s))));
            all_of(vec![scalar, set])
        };
        Ok(any_of(vec![element, substring]))
    }
}
