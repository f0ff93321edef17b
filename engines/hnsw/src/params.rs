//! What a graph is built with: links per node, the construction beam and the vectors' storage.

/// How vectors are stored in the graph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// 32-bit floats, exact scores.
    F32,
    /// 16-bit floats: half the memory and bandwidth; scores within about 1e-3.
    #[default]
    F16,
}

/// Construction parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Links per node on the upper levels; level 0 keeps twice as many.
    pub m: usize,
    /// Beam width while inserting.
    pub ef_construction: usize,
    /// How vectors are stored.
    pub precision: Precision,
}

impl Default for Params {
    fn default() -> Self {
        Self { m: 16, ef_construction: 100, precision: Precision::F16 }
    }
}
