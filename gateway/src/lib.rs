//! `rcp-gateway`: an RCP aggregator (§7.13, §16) and an MCP bridge.
//!
//! A [`Gateway`] is one RCP server in front of the engines of an `rcp.json` registry. It
//! advertises `catalog` and answers `catalog/list` with each engine's own identity and
//! capabilities; its `retrieve` fans out to every engine concurrently under per-engine
//! deadlines, honours the hop budget and loop detection of `_meta.federation` (§16.2), merges
//! the shards of a collection by score and fuses collections with each other (§16.3); its
//! `index/add` and `index/delete` route each id to the shard that owns it. Gateways nest:
//! a registry entry may be another gateway.
//!
//! The [`mcp`] module exposes a gateway (or a single engine) as MCP tools.

#![forbid(unsafe_code)]

pub mod gateway;
pub mod hop;
pub mod mcp;
pub mod pool;
pub mod registry;
pub mod shard;

pub use gateway::{Gateway, GatewayOptions};
pub use registry::{GatewayEntry, GatewayRegistry};
