//! `index/add` (§7.10) and `index/delete` (§7.11).

use serde::{Deserialize, Serialize};

use crate::Meta;

/// A document to index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Stable id; re-adding it replaces the document (upsert). Absent: the server mints one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Body.
    pub text: String,
    /// Metadata (filterable fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Document {
    /// A document with an id and text.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self { id: Some(id.into()), text: text.into(), meta: None }
    }
}

/// `index/add` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexAddParams {
    /// Documents to upsert.
    pub documents: Vec<Document>,
    /// Request server-side chunking (needs `index.chunking`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<bool>,
    /// Request contextual chunk headers (needs `index.contextual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contextual: Option<bool>,
    /// Side-band data; `_meta.idempotencyKey` makes a retry return the original result.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `index/add` result: one id per input document, positionally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexAddResult {
    /// Ids, in input order.
    pub ids: Vec<String>,
    /// Chunks created, when chunking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u64>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `index/delete` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexDeleteParams {
    /// Ids to delete; absent ids are not an error.
    pub ids: Vec<String>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `index/delete` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexDeleteResult {
    /// Documents actually removed by this call.
    pub deleted: u64,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
