//! Ranking: which queries a search runs (the original, its RM3 expansion, or several
//! variants of it for `multi-query`), each collected with the request's filter and recency
//! decay, and several rankings fused by reciprocal rank.

use std::collections::HashMap;

use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query};
use tantivy::{DocAddress, Searcher};

use super::Engine;
use super::rm3::{Expansion, Rewrite};
use crate::error::EngineError;

/// The `k` of reciprocal-rank fusion (Cormack et al. 2009): a hit at rank `r` (from 1) in one
/// ranking adds `1 / (RRF_K + r)`.
pub const RRF_K: f64 = 60.0;

/// One ranked document: the score it is ordered by, its raw BM25 score, its address.
pub(super) type Ranked = (f32, f32, DocAddress);

/// What a search ranks with.
pub(super) struct Plan {
    /// One query, or one per `multi-query` variant; each already carries the filter.
    pub(super) queries: Vec<Box<dyn Query>>,
    /// The rewritten query for `rewrittenQuery` (variants one per line).
    pub(super) rewritten: Option<String>,
    /// What the rewrite did, for `usage.notes`.
    pub(super) notes: Vec<String>,
}

/// `recency` decay (§7.7) on a date column: scores multiplied by the one formula every engine
/// applies ([`rcp_corpus::recency::Decay`]).
pub(super) struct Decay {
    /// The date field's fast-field column.
    pub(super) column: String,
    /// The half-life and the clock ages are measured from.
    pub(super) decay: rcp_corpus::recency::Decay,
}

/// `text` restricted to the documents `filter` matches, which adds nothing to the score.
fn filtered(text: Box<dyn Query>, filter: Option<&dyn Query>) -> Box<dyn Query> {
    match filter {
        None => text,
        Some(f) => Box::new(BooleanQuery::new(vec![
            (Occur::Must, text),
            (Occur::Must, Box::new(ConstScoreQuery::new(f.box_clone(), 0.0))),
        ])),
    }
}

impl Engine {
    /// The queries for analyzed `terms` under `rewrite`. Feedback documents are read with the
    /// original query and the filter, on the same snapshot as the ranking.
    pub(super) fn plan(
        &self,
        searcher: &Searcher,
        original: &str,
        terms: &[String],
        rewrite: Option<&Rewrite>,
        filter: Option<&dyn Query>,
    ) -> Result<Plan, EngineError> {
        if let (Some(field), Some(encoder)) = (self.fields.impacts, self.options.learned_sparse.as_deref()) {
            if rewrite.is_some() {
                return Err(EngineError::invalid(
                    "rewrite",
                    "query rewriting is not offered with the learned-sparse scorer",
                ));
            }
            let (query, _) = crate::splade::ranking_query(encoder, field, original)?;
            return Ok(Plan { queries: vec![filtered(query, filter)], rewritten: None, notes: Vec::new() });
        }
        let base = filtered(self.text_query(terms), filter);
        let expansions = match rewrite {
            None => return Ok(Plan { queries: vec![base], rewritten: None, notes: Vec::new() }),
            Some(Rewrite::Rm3(rm3)) => vec![self.rm3(searcher, base.as_ref(), terms, rm3, original)?.0],
            Some(Rewrite::MultiQuery { rm3, n }) => {
                self.variants_on(searcher, base.as_ref(), terms, rm3, original, *n)?
            }
        };
        let queries = expansions.iter().map(|e| filtered(self.expanded_query(e), filter)).collect();
        let rewritten = expansions.iter().map(|e| e.text.as_str()).collect::<Vec<_>>().join("\n");
        let mut notes: Vec<String> = expansions.iter().map(|e| e.describe(terms)).collect();
        if expansions.len() > 1 {
            notes.push(format!(
                "rewrite: {} query variants fused by reciprocal rank (k={RRF_K}); scores are fused",
                expansions.len()
            ));
        }
        Ok(Plan { queries, rewritten: Some(rewritten), notes })
    }

    /// The weighted ranking query of an expansion.
    fn expanded_query(&self, e: &Expansion) -> Box<dyn Query> {
        let weights: Vec<(String, f32)> = e.terms.iter().map(|t| (t.term.clone(), t.weight)).collect();
        self.weighted_query(&weights)
    }

    /// Ranks with every query of a plan: one query is collected directly from `offset`; several
    /// are each collected to depth `offset + limit` and fused by reciprocal rank. Returns at
    /// most `limit` documents from `offset` on, and how many documents matched (the most any
    /// one query matched).
    pub(super) fn rank_all(
        &self,
        searcher: &Searcher,
        queries: &[Box<dyn Query>],
        offset: usize,
        limit: usize,
        decay: Option<&Decay>,
    ) -> Result<(Vec<Ranked>, u64), EngineError> {
        if let [one] = queries {
            let (ranked, matched) = self.rank(searcher, one.as_ref(), offset, limit, decay)?;
            return Ok((ranked, matched as u64));
        }
        let mut lists = Vec::with_capacity(queries.len());
        let mut matched = 0usize;
        for q in queries {
            let (ranked, n) = self.rank(searcher, q.as_ref(), 0, offset + limit, decay)?;
            matched = matched.max(n);
            lists.push(ranked);
        }
        let fused = fuse(&lists);
        Ok((fused.into_iter().skip(offset).take(limit).collect(), matched as u64))
    }

    /// One query's ranking window and match count, with `decay` applied when given.
    fn rank(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        offset: usize,
        limit: usize,
        decay: Option<&Decay>,
    ) -> Result<(Vec<Ranked>, usize), EngineError> {
        let window = TopDocs::with_limit(limit.max(1)).and_offset(offset);
        let Some(d) = decay else {
            let (top, n) = searcher.search(query, &(window.order_by_score(), Count))?;
            return Ok((top.into_iter().map(|(s, a)| (s, s, a)).collect(), n));
        };
        let column = d.column.clone();
        let formula = d.decay;
        let tweak = window.tweak_score(move |segment: &tantivy::SegmentReader| {
            let col = segment.fast_fields().column_opt::<i64>(&column).ok().flatten();
            move |doc: tantivy::DocId, score: tantivy::Score| {
                let decay = formula.factor(col.as_ref().and_then(|c| c.first(doc)));
                ((score as f64 * decay) as f32, score)
            }
        });
        let (top, n) = searcher.search(query, &(tweak, Count))?;
        Ok((top.into_iter().map(|((s, raw), a)| (s, raw, a)).collect(), n))
    }
}

/// Reciprocal-rank fusion of rankings: each document scores `Σ 1/(RRF_K + rank)` over the
/// rankings it is in, keeps its best raw score, and the result is ordered by fused score
/// (ties by address, so the order is deterministic).
fn fuse(lists: &[Vec<Ranked>]) -> Vec<Ranked> {
    let mut by_doc: HashMap<DocAddress, (f64, f32)> = HashMap::new();
    for list in lists {
        for (rank, (_, raw, addr)) in list.iter().enumerate() {
            let e = by_doc.entry(*addr).or_insert((0.0, f32::MIN));
            e.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            e.1 = e.1.max(*raw);
        }
    }
    let mut out: Vec<Ranked> = by_doc.into_iter().map(|(a, (s, raw))| (s as f32, raw, a)).collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(doc: u32) -> DocAddress {
        DocAddress::new(0, doc)
    }

    #[test]
    fn fusion_rewards_agreement() {
        let a = vec![(9.0, 9.0, at(1)), (8.0, 8.0, at(2)), (7.0, 7.0, at(3))];
        let b = vec![(5.0, 5.0, at(2)), (4.0, 4.0, at(4))];
        let fused = fuse(&[a, b]);
        let order: Vec<u32> = fused.iter().map(|r| r.2.doc_id).collect();
        // doc 2 is in both lists (ranks 2 and 1), so it beats doc 1 (rank 1 of one list).
        assert_eq!(order, [2, 1, 4, 3]);
        assert_eq!(fused[0].1, 8.0, "the best raw score is kept");
    }
}
