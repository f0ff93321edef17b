//! A concurrent HNSW graph (Malkov & Yashunin) over unit vectors, scored by the dot product,
//! built for the RCP dense engine's search path.
//!
//! What makes it fast is the memory layout, not cleverness in the algorithm:
//!
//! * each node is one record in a flat table: its level-0 neighbour list (plain `u32` slots)
//!   and its vector side by side, so expanding a node touches one region, and the records of
//!   the next three neighbours are prefetched while the current one is scored;
//! * vectors are stored as `f32` or as `f16` ([`Precision`]), and scored in place by
//!   AVX2/FMA/F16C kernels chosen at run time ([`kernels::Simd`]);
//! * a search walks level 0 on a second copy of each vector as `i8` codes and a scale, in
//!   records of whole cache lines apart from the links (half the lines of an `f16` row), then
//!   rescores its beam with the stored vectors ([`Hnsw::int8_walk`], on by default; inserts
//!   always score the stored vectors, so the graph does not depend on it);
//! * the visited set is an epoch-tagged array reused across searches, not a hash set;
//! * inserts run in parallel: a neighbour list is rewritten under a striped lock, never a
//!   global one, while searches read every list without locking;
//! * a new node keeps up to 2M level-0 neighbours (as faiss does; hnswlib keeps M), and a bulk
//!   insert ends by relinking any node that pruning left without an incoming link
//!   ([`Hnsw::relink_unreachable`]), so every stored vector stays findable.
//!
//! Nodes are addressed by the caller's *slot* (a `u32`-sized index); slots may have gaps. The
//! graph saves to and loads from one file ([`Hnsw::save`], [`Hnsw::load`]) that is checked
//! link by link on load, so a damaged file is refused rather than searched. The file is
//! memory-mapped to load it ([`Mapped`], the crate's one file map, which also serves the dense
//! store's vector table in place).
//!
//! ```
//! use rcp_hnsw::{Hnsw, Params};
//! let g = Hnsw::new(3, Params::default());
//! g.insert(&[1.0, 0.0, 0.0], 7).unwrap();
//! g.insert(&[0.0, 1.0, 0.0], 9).unwrap();
//! let hits = g.search(&[0.9, 0.1, 0.0], 1, 16, None);
//! assert_eq!(hits[0].0, 7);
//! ```

pub mod kernels;

mod beam;
mod error;
mod graph;
mod insert;
mod mapped;
mod params;
mod persist;
mod reach;
mod search;
mod table;

pub use error::Error;
pub use graph::{Hnsw, MAX_LEVEL};
pub use mapped::Mapped;
pub use params::{Params, Precision};

#[cfg(test)]
mod tests;
