//! `graph` (§7.9).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Meta;
use crate::message::RequestId;
use crate::retrieve::{Hit, Usage};

/// `graph` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphParams {
    /// `local`, `global`, `drift`, `communities` or `neighbors`.
    pub op: String,
    /// The query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Result count.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u64")]
    pub k: Option<u64>,
    /// Entry nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_ids: Option<Vec<String>>,
    /// Expansion depth.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u32")]
    pub hops: Option<u32>,
    /// Community level.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u32")]
    pub level: Option<u32>,
    /// Trajectory handle (§7.7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Pagination cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A community of `global`/`communities` results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Community {
    /// Community id.
    pub id: RequestId,
    /// Summary text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Relevance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Hierarchy level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u32>,
}

/// A node of a `neighbors` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphNode {
    /// Node id.
    pub id: RequestId,
    /// Relevance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// An edge of a `neighbors` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphEdge {
    /// Source node.
    pub src: Value,
    /// Destination node.
    pub dst: Value,
    /// Edge weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// `graph` result; which fields are present depends on the op.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphResult {
    /// `local`/`drift` hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<Vec<Hit>>,
    /// `drift` follow-up questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followups: Option<Vec<String>>,
    /// `global` summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `global`/`communities` communities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communities: Option<Vec<Community>>,
    /// `neighbors` nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<GraphNode>>,
    /// `neighbors` edges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<Vec<GraphEdge>>,
    /// Pagination cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Telemetry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
