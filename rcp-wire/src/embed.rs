//! `embed` (§7.3), `embed/sparse` (§7.4) and `embed/multi` (§7.5).

use serde::{Deserialize, Serialize};

use crate::Meta;
use crate::content::InputItem;
use crate::retrieve::WireVector;

/// `embed` and `embed/multi` params. `texts` is the legacy synonym of `inputs` (§7.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbedParams {
    /// Strings or content blocks, one vector each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<InputItem>>,
    /// Legacy name of `inputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texts: Option<Vec<InputItem>>,
    /// `query` or `document`, for asymmetric encoders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Requested vector encoding (§7.3.1), default `json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Reject (`true`, default) or fall back (`false`) on an unadvertised encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl EmbedParams {
    /// Params embedding these texts.
    pub fn texts<I, S>(inputs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self { inputs: Some(inputs.into_iter().map(|s| InputItem::Text(s.into())).collect()), ..Self::default() }
    }

    /// The inputs, whichever of `inputs`/`texts` carried them.
    pub fn items(&self) -> &[InputItem] {
        self.inputs.as_deref().or(self.texts.as_deref()).unwrap_or(&[])
    }

    /// The wire name of the field that carried the inputs (`inputs` or `texts`).
    pub fn items_field(&self) -> &'static str {
        if self.inputs.is_none() && self.texts.is_some() { "texts" } else { "inputs" }
    }
}

/// `embed` result (§7.3, §7.3.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbedResult {
    /// One vector per input, in input order.
    pub vectors: Vec<WireVector>,
    /// Encoding used; absent means `json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Vector dimension (required with a binary encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<u32>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `embed/sparse` params (§7.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SparseEmbedParams {
    /// Texts to embed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texts: Option<Vec<InputItem>>,
    /// Accepted as a synonym of `texts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<InputItem>>,
    /// `query` or `document`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SparseEmbedParams {
    /// The inputs, whichever of `texts`/`inputs` carried them.
    pub fn items(&self) -> &[InputItem] {
        self.texts.as_deref().or(self.inputs.as_deref()).unwrap_or(&[])
    }
}

/// A sparse vector over a model vocabulary (§7.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SparseVector {
    /// Vocabulary ids.
    pub indices: Vec<u32>,
    /// Weights, one per index.
    pub values: Vec<f32>,
}

/// `embed/sparse` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SparseEmbedResult {
    /// One sparse vector per input.
    pub sparse: Vec<SparseVector>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `embed/multi` params: the same shape as `embed`'s.
pub type MultiEmbedParams = EmbedParams;

/// `embed/multi` result (§7.5).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiVectorResult {
    /// One matrix (rows of vectors) per input.
    pub matrices: Vec<Vec<WireVector>>,
    /// Per-token dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<u32>,
    /// Encoding used; absent means `json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
