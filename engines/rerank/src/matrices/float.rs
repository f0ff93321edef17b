//! A ColBERT token matrix as the encoder gives it: one row of [`DIMENSION`] unit-length `f32`
//! per kept token, at most [`DOCUMENT_LENGTH`] rows for a document, and MaxSim between two
//! of them (§7.5).

/// The width of every row: answerai-colbert-small-v1's encoder width (the ONNX graph has no
/// final projection, see [`crate::colbert`]).
pub const DIMENSION: usize = 384;

/// The most tokens of a document, markers included (the model's position window), and so the
/// most rows of a document matrix.
pub const DOCUMENT_LENGTH: usize = 512;

/// A token matrix: rows of [`DIMENSION`] unit-length floats, one per kept token.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    data: Vec<f32>,
}

impl Matrix {
    /// A matrix of `data`, rows of [`DIMENSION`] floats one after the other.
    pub(crate) fn from_data(data: Vec<f32>) -> Self {
        debug_assert_eq!(data.len() % DIMENSION, 0);
        Self { data }
    }

    /// Rows in the matrix.
    pub fn len(&self) -> usize {
        self.data.len() / DIMENSION
    }

    /// Whether the matrix has no rows.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The rows, in token order.
    pub fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.data.chunks_exact(DIMENSION)
    }

    /// The rows as owned vectors (the shape `embed/multi` returns).
    pub fn to_rows(&self) -> Vec<Vec<f32>> {
        self.rows().map(<[f32]>::to_vec).collect()
    }
}

/// MaxSim (§7.5): for each query row, its largest dot product with any document row, summed
/// over the query rows. Rows are unit vectors, so this is the cosine MaxSim. An empty document
/// scores 0.
pub fn max_sim(query: &Matrix, document: &Matrix) -> f32 {
    if document.is_empty() {
        return 0.0;
    }
    query.rows().map(|q| document.rows().map(|d| dot(q, d)).fold(f32::NEG_INFINITY, f32::max)).sum()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: &[[f32; 2]]) -> Matrix {
        let mut data = Vec::new();
        for r in rows {
            let mut row = vec![0.0; DIMENSION];
            row[..2].copy_from_slice(r);
            data.extend(row);
        }
        Matrix::from_data(data)
    }

    #[test]
    fn max_sim_sums_each_query_rows_best_match() {
        let q = matrix(&[[1.0, 0.0], [0.0, 1.0]]);
        let d = matrix(&[[0.6, 0.8], [1.0, 0.0], [-1.0, 0.0]]);
        // Row 1's best is 1.0 (d1), row 2's best is 0.8 (d0).
        assert!((max_sim(&q, &d) - 1.8).abs() < 1e-6);
        assert_eq!(max_sim(&q, &matrix(&[])), 0.0);
        assert_eq!(d.len(), 3);
        assert_eq!(d.to_rows()[0][..2], [0.6, 0.8]);
    }
}
