//! `rcp-graph`: the algorithms behind RCP's `graph` capability (§7.9), with no engine logic.
//!
//! - [`DocGraph`]: a weighted undirected document graph (k-nearest-neighbour edges with cosine
//!   weights), bounded edges per node, nodes added and removed in place.
//! - [`ppr`]: personalised PageRank by the push algorithm of Andersen, Chung and Lang (2006),
//!   bounded by a tolerance and a work budget; strongest paths for provenance (§7.7.2).
//! - [`louvain`]: Louvain community detection (Blondel et al., 2008), one partition per level,
//!   level 0 the finest.
//! - [`terms`]: key terms by tf-idf of member texts against the corpus, the extractive
//!   community summaries and the `drift` follow-up queries built from them.
//! - [`persist`]: the graph's own checked file format (versioned, CRC-32).

#![forbid(unsafe_code)]

mod doc_graph;
pub mod louvain;
pub mod persist;
pub mod ppr;
pub mod terms;

pub use doc_graph::{DocGraph, Edge, NodeId};
pub use louvain::{Hierarchy, LouvainOptions};
pub use ppr::{PprOptions, personalized_pagerank, strongest_paths};
pub use terms::{Vocabulary, key_terms, tokenize};
