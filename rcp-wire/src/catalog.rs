//! `catalog/list` (§7.13).

use serde::{Deserialize, Serialize};

use crate::Meta;
use crate::capabilities::Capabilities;
use crate::lifecycle::PeerInfo;

/// How to reach a federated engine directly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// `stdio` or `http`.
    pub transport: String,
    /// HTTP base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// stdio command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

/// One federated engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// Registry id.
    pub id: String,
    /// Engine identity.
    pub server: PeerInfo,
    /// Engine capabilities.
    pub capabilities: Capabilities,
    /// Direct endpoint, when exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
}

/// `catalog/list` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogListResult {
    /// The engines.
    pub engines: Vec<CatalogEntry>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
