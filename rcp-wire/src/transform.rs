//! `query/transform` (§7.8).

use serde::{Deserialize, Serialize};

use crate::Meta;

/// `query/transform` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransformParams {
    /// The query to transform.
    pub query: String,
    /// `rewrite`, `hyde`, `multi-query`, `decompose` or `step-back`.
    pub method: String,
    /// How many queries to produce.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::int::opt_u32")]
    pub n: Option<u32>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `query/transform` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransformResult {
    /// Transformed queries.
    pub queries: Vec<String>,
    /// A hypothetical document (`hyde`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypothetical: Option<String>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
