//! `initialize` (§7.1), `info` (§7.2), `ping` (§7.15) and `shutdown` (§7.12).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Meta;
use crate::capabilities::Capabilities;

/// A peer's identity: `{name, version?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// Implementation name.
    pub name: String,
    /// Implementation version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Meta,
}

impl PeerInfo {
    /// A name and version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self { name: name.into(), version: Some(version.into()), extra: Meta::new() }
    }
}

/// `initialize` params (§7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The highest version the client supports.
    #[serde(deserialize_with = "crate::int::i64")]
    pub protocol_version: i64,
    /// The client's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<PeerInfo>,
    /// What the client can consume (`streaming`, `log`); hints only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// Side-band data; `_meta.logLevel` sets the minimum log level (§17.1).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Conformance level a server declares in `_meta.conformance` (§14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConformanceLevel {
    /// Base.
    L0,
    /// Retrieval.
    L1,
    /// SOTA.
    L2,
}

impl ConformanceLevel {
    /// `"L0"`, `"L1"` or `"L2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::L0 => "L0",
            Self::L1 => "L1",
            Self::L2 => "L2",
        }
    }

    /// Parses `"L0"`, `"L1"` or `"L2"`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "L0" => Some(Self::L0),
            "L1" => Some(Self::L1),
            "L2" => Some(Self::L2),
            _ => None,
        }
    }
}

/// `initialize` result and `info` result (§7.1, §7.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The negotiated version.
    pub protocol_version: u32,
    /// The server's identity.
    pub server: PeerInfo,
    /// The session's capability set.
    pub capabilities: Capabilities,
    /// Side-band data: `conformance`, `session`, ...
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InitializeResult {
    /// The declared `_meta.conformance` level, if any.
    pub fn conformance(&self) -> Option<ConformanceLevel> {
        self.meta.as_ref()?.get("conformance")?.as_str().and_then(ConformanceLevel::parse)
    }
}

/// `info` result: the same shape as `initialize`'s.
pub type InfoResult = InitializeResult;

/// `ping` params and result (§7.15): an optional `nonce` echoed back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PingParams {
    /// A string or number to echo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<Value>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `ping` result.
pub type PingResult = PingParams;
