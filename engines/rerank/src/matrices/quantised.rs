//! A ColBERT token matrix in int8: each row's 384 floats as codes `-127..=127` with one `f32`
//! scale per row (symmetric, the row's largest magnitude maps to 127). A row costs
//! `DIMENSION + 4` = 388 bytes instead of 1,536; the rows are unit vectors, so the rounding
//! error of a dot product is at most about `0.5 / 127` per unit of the row's largest component.

use super::float::{DIMENSION, Matrix};

/// A document's token matrix, quantised to int8 rows with a scale each.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantisedMatrix {
    /// One scale per row: the row is `codes · scale`.
    scales: Vec<f32>,
    /// `rows × DIMENSION` codes, row after row.
    codes: Vec<i8>,
}

impl QuantisedMatrix {
    /// `matrix`'s rows quantised (a zero row keeps scale 0).
    pub fn quantise(matrix: &Matrix) -> Self {
        let mut scales = Vec::with_capacity(matrix.len());
        let mut codes = Vec::with_capacity(matrix.len() * DIMENSION);
        for row in matrix.rows() {
            let largest = row.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
            let scale = if largest > 0.0 { largest / 127.0 } else { 0.0 };
            let inverse = if scale > 0.0 { scale.recip() } else { 0.0 };
            scales.push(scale);
            // Within -127..=127 by construction; `as` saturates anyway.
            codes.extend(row.iter().map(|x| (x * inverse).round() as i8));
        }
        Self { scales, codes }
    }

    /// A matrix from its parts, or `None` when `codes` is not `scales.len()` rows of
    /// [`DIMENSION`] or a scale is not a finite non-negative number.
    pub fn from_parts(scales: Vec<f32>, codes: Vec<i8>) -> Option<Self> {
        let fits = codes.len() == scales.len() * DIMENSION;
        (fits && scales.iter().all(|s| s.is_finite() && *s >= 0.0)).then_some(Self { scales, codes })
    }

    /// Rows in the matrix.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether the matrix has no rows.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// The scales, one per row.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// The codes, row after row.
    pub fn codes(&self) -> &[i8] {
        &self.codes
    }

    /// Bytes the matrix takes stored: its codes and scales.
    pub fn bytes(&self) -> usize {
        self.codes.len() + 4 * self.scales.len()
    }

    /// MaxSim (§7.5) of `query` against this document: for each query row its largest dot
    /// product with a row here, summed. An empty document scores 0.
    pub fn max_sim(&self, query: &Matrix) -> f32 {
        if self.is_empty() {
            return 0.0;
        }
        let mut best: Vec<f32> = vec![f32::NEG_INFINITY; query.len()];
        let mut row = [0.0_f32; DIMENSION];
        for (codes, &scale) in self.codes.chunks_exact(DIMENSION).zip(&self.scales) {
            for (x, &c) in row.iter_mut().zip(codes) {
                *x = f32::from(c);
            }
            for (b, q) in best.iter_mut().zip(query.rows()) {
                let d = dot(q, &row) * scale;
                if d > *b {
                    *b = d;
                }
            }
        }
        best.iter().sum()
    }
}

/// The dot product, in eight running sums so the compiler can keep them in vector registers.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0_f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrices::float::max_sim;

    /// Unit rows with a spread of values, deterministic.
    fn matrix(rows: usize, seed: u32) -> Matrix {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut data = Vec::with_capacity(rows * DIMENSION);
        for _ in 0..rows {
            let row: Vec<f32> = (0..DIMENSION)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state % 2001) as f32 / 1000.0 - 1.0
                })
                .collect();
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            data.extend(row.iter().map(|x| x / norm));
        }
        Matrix::from_data(data)
    }

    #[test]
    fn quantised_max_sim_stays_within_rounding_of_the_float_one() {
        let query = matrix(32, 1);
        for seed in 2..12 {
            let doc = matrix(40, seed);
            let q = QuantisedMatrix::quantise(&doc);
            let (exact, approx) = (max_sim(&query, &doc), q.max_sim(&query));
            // 32 query rows, each dot off by at most |q|₁·scale/2 ≈ 0.06 in the worst case;
            // in practice far less.
            assert!((exact - approx).abs() < 0.05, "{exact} vs {approx}");
            assert_eq!(q.len(), 40);
            assert_eq!(q.bytes(), 40 * (DIMENSION + 4));
        }
    }

    #[test]
    fn parts_are_checked_and_an_empty_matrix_scores_zero() {
        assert!(QuantisedMatrix::from_parts(vec![0.5], vec![0; DIMENSION]).is_some());
        assert!(QuantisedMatrix::from_parts(vec![0.5], vec![0; DIMENSION - 1]).is_none());
        assert!(QuantisedMatrix::from_parts(vec![f32::NAN], vec![0; DIMENSION]).is_none());
        assert!(QuantisedMatrix::from_parts(vec![-1.0], vec![0; DIMENSION]).is_none());
        let empty = QuantisedMatrix::quantise(&Matrix::from_data(Vec::new()));
        assert_eq!(empty.max_sim(&matrix(32, 3)), 0.0);
    }
}
