//! [`Gateway`]: an RCP aggregator (§7.13, §16). It answers `catalog/list` from its engines'
//! own `initialize`, fuses inside its own `retrieve`, and routes `index/add`/`index/delete` to
//! the shard that owns each id.
//!
//! One file per concern, each importing only `startup`'s types:
//! - `startup`: the gateway itself, its options, and start-up (connect, compute what the
//!   federation can promise, register the handlers);
//! - `fan_out`: a federated `retrieve` — loop detection, the per-engine plan and deadline,
//!   the fan-out (rcp-client's [`rcp_client::federation::FanOut`]);
//! - `fusion`: the shards of a collection merged (by score when comparable), collections
//!   fused (§16.3);
//! - `writes`: `index/add`/`index/delete` routed to the shard owning each id;
//! - `reranker`: the registry's reranking entry, found at start-up;
//! - `rerank`: the rerank stage of a fused list, by the registry's reranking entry, and
//!   `rerank` forwarded to it;
//! - `catalog`: `catalog/list`;
//! - `limits`: what one request may carry into a fan-out, checked before it is copied.

mod catalog;
mod fan_out;
mod feedback;
mod forward;
mod fusion;
mod grants;
mod graph;
pub mod limits;
mod memory;
mod pages;
mod rerank;
mod reranker;
mod routed;
mod startup;
mod writes;

pub use startup::{Gateway, GatewayOptions, META_COLLECTION, META_COLLECTIONS};
