//! Why an operation on the graph failed.

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A vector of the wrong length.
    #[error("vector has {got} dimensions; the graph holds {want}")]
    Dimension {
        /// Length given.
        got: usize,
        /// The graph's dimension.
        want: usize,
    },
    /// The slot already holds a node.
    #[error("slot {0} is already in the graph")]
    Duplicate(usize),
    /// The slot is beyond what the graph can address.
    #[error("slot {0} is beyond the graph's capacity")]
    Capacity(usize),
    /// A graph file that is damaged or not a graph file.
    #[error("graph file is damaged: {0}")]
    Corrupt(String),
    /// A sound graph file for other parameters.
    #[error("graph file does not match: {0}")]
    Mismatch(String),
    /// Reading or writing the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
