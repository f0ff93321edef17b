//! Exact search: the dot product with a SIMD kernel chosen at run time (`rcp-hnsw`'s), a bounded
//! top-k, and a batched scan that scores a block of rows against many queries as one matrix
//! product. It serves small
//! collections, the fallback of very selective filters, and is the recall reference.

use std::sync::OnceLock;

use rcp_hnsw::kernels::Simd;

use super::{Scored, by_score};

/// The dot product of two vectors of the same length (the shorter length otherwise), with the
/// widest SIMD kernel the CPU offers.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    static SIMD: OnceLock<Simd> = OnceLock::new();
    SIMD.get_or_init(Simd::detect).dot_f32(a, b)
}

/// The best `want` of a stream of scored slots, kept without sorting the whole stream.
///
/// Slots must arrive in increasing order: a score equal to the current cut-off then ranks
/// below everything kept ([`by_score`] breaks ties by lower slot) and is dropped at once.
#[derive(Debug)]
pub(crate) struct TopK {
    want: usize,
    kept: Vec<Scored>,
    /// The lowest score still kept once `kept` has been cut to `want`.
    floor: f32,
}

impl TopK {
    pub(crate) fn new(want: usize) -> Self {
        Self { want, kept: Vec::with_capacity(want.saturating_mul(2).min(1 << 16)), floor: f32::NEG_INFINITY }
    }

    pub(crate) fn push(&mut self, slot: usize, score: f32) {
        if self.want == 0 || score <= self.floor {
            return;
        }
        self.kept.push(Scored { slot, score });
        if self.kept.len() >= self.want.saturating_mul(2).max(64) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.kept.len() > self.want {
            self.kept.select_nth_unstable_by(self.want - 1, by_score);
            self.kept.truncate(self.want);
            self.floor = self.kept.iter().map(|s| s.score).fold(f32::INFINITY, f32::min);
        }
    }

    pub(crate) fn into_sorted(mut self) -> Vec<Scored> {
        self.cut();
        self.kept.sort_by(by_score);
        self.kept
    }
}

/// Exact top-`want` by cosine over the rows of `vectors` that `keep` accepts (`rows` limits
/// the scan to those slots when given), best first.
pub fn exact(
    vectors: &[f32],
    dim: usize,
    query: &[f32],
    want: usize,
    rows: Option<&[usize]>,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Scored> {
    let n = vectors.len() / dim.max(1);
    match rows {
        Some(rows) => {
            // Ascending slots, as TopK expects; duplicates scored once.
            let mut rows: Vec<usize> = rows.to_vec();
            rows.sort_unstable();
            rows.dedup();
            exact_sorted(vectors, dim, query, want, rows.into_iter(), keep)
        }
        None => exact_sorted(vectors, dim, query, want, 0..n, keep),
    }
}

/// Exact top-`want` by cosine over the `slots` (strictly ascending; ones past the table are
/// skipped) that `keep` accepts, best first.
pub fn exact_sorted(
    vectors: &[f32],
    dim: usize,
    query: &[f32],
    want: usize,
    slots: impl Iterator<Item = usize>,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Scored> {
    let dim = dim.max(1);
    exact_rows(|s| vectors.get(s * dim..(s + 1) * dim), query, want, slots, keep)
}

/// Exact top-`want` by cosine over the `slots` (strictly ascending; the scan stops at the
/// first one `row` does not have) that `keep` accepts, best first; `row` gives a slot's vector.
pub fn exact_rows<'a>(
    row: impl Fn(usize) -> Option<&'a [f32]>,
    query: &[f32],
    want: usize,
    slots: impl Iterator<Item = usize>,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<Scored> {
    let mut top = TopK::new(want);
    for s in slots {
        let Some(v) = row(s) else { break };
        if keep(s) {
            top.push(s, dot(query, v));
        }
    }
    top.into_sorted()
}

/// Rows scored per block of [`exact_batch`]: 512 rows of 384 `f32` are 768 KiB, read once
/// from memory for all of a thread's queries.
const BLOCK_ROWS: usize = 512;

/// Exact top-`want` of every query in `queries` (a flat table of `dim`-sized rows) over all
/// rows of `vectors`, best first. The queries are split across `threads` threads; each thread
/// scores its queries against a block of rows at a time as one matrix product (ndarray's
/// `dot`, i.e. the `matrixmultiply` kernels, which pick AVX2/FMA at run time), so each row is
/// read once per block of queries and every load feeds several multiply-adds.
pub fn exact_batch(vectors: &[f32], dim: usize, queries: &[f32], want: usize, threads: usize) -> Vec<Vec<Scored>> {
    let dim = dim.max(1);
    let nq = queries.len() / dim;
    if nq == 0 {
        return Vec::new();
    }
    let per_thread = nq.div_ceil(threads.clamp(1, nq));
    let scan = |qs: &[f32]| -> Vec<Vec<Scored>> {
        let n = qs.len() / dim;
        let mut tops: Vec<TopK> = (0..n).map(|_| TopK::new(want)).collect();
        let Ok(q) = ndarray::ArrayView2::from_shape((n, dim), &qs[..n * dim]) else { return Vec::new() };
        for (b, block) in vectors.chunks(BLOCK_ROWS * dim).enumerate() {
            let rows = block.len() / dim;
            let Ok(r) = ndarray::ArrayView2::from_shape((rows, dim), &block[..rows * dim]) else { continue };
            let scores = q.dot(&r.t());
            for (top, row) in tops.iter_mut().zip(scores.rows()) {
                for (i, &score) in row.iter().enumerate() {
                    top.push(b * BLOCK_ROWS + i, score);
                }
            }
        }
        tops.into_iter().map(TopK::into_sorted).collect()
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = queries.chunks(per_thread * dim).map(|qs| s.spawn(move || scan(qs))).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ann::UnitDot;
    use crate::testutil::random_unit;
    use hnsw_rs::prelude::Distance;

    #[test]
    fn dot_matches_naive() {
        let v = random_unit(2, 37, 7);
        let naive: f32 = v[..37].iter().zip(&v[37..]).map(|(a, b)| a * b).sum();
        assert!((dot(&v[..37], &v[37..]) - naive).abs() < 1e-5);
        assert_eq!(UnitDot.eval(&v[..37], &v[..37]), 0.0);
    }

    #[test]
    fn exact_is_sorted_and_limited() {
        let dim = 8;
        let v = random_unit(100, dim, 9);
        let q = &v[..dim];
        let top = exact(&v, dim, q, 10, None, &|_| true);
        assert_eq!(top.len(), 10);
        assert_eq!(top[0].slot, 0);
        assert!(top.windows(2).all(|w| w[0].score >= w[1].score));
        let some = exact(&v, dim, q, 10, Some(&[5, 6, 7]), &|s| s != 6);
        assert_eq!(some.len(), 2);
    }

    #[test]
    fn top_k_keeps_the_best_and_breaks_ties_by_slot() {
        let scores = [0.1, 0.5, 0.5, 0.9, 0.2, 0.5, 0.7];
        let run = |n: usize| {
            let mut top = TopK::new(3);
            for (slot, score) in scores.into_iter().cycle().take(n).enumerate() {
                top.push(slot, score);
            }
            top.into_sorted().into_iter().map(|s| (s.slot, s.score)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), vec![(3, 0.9), (6, 0.7), (1, 0.5)]);
        assert_eq!(run(700), vec![(3, 0.9), (10, 0.9), (17, 0.9)]);
    }

    #[test]
    fn batch_matches_single_queries() {
        let dim = 24;
        let v = random_unit(1000, dim, 5);
        let queries = random_unit(7, dim, 6);
        let batch = exact_batch(&v, dim, &queries, 10, 3);
        assert_eq!(batch.len(), 7);
        for (q, got) in queries.chunks_exact(dim).zip(&batch) {
            let one = exact(&v, dim, q, 10, None, &|_| true);
            // Same hits; scores equal up to the summation order of the two kernels.
            assert_eq!(got.iter().map(|s| s.slot).collect::<Vec<_>>(), one.iter().map(|s| s.slot).collect::<Vec<_>>());
            assert!(got.iter().zip(&one).all(|(a, b)| (a.score - b.score).abs() < 1e-5));
        }
    }
}
