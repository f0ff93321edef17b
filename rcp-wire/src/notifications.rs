//! Notifications: `notifications/progress` (§9), `notifications/cancel` (§7.14) and
//! `notifications/log` (§17.1).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Meta;
use crate::message::RequestId;
use crate::retrieve::Hit;

/// Method name of progress notifications.
pub const PROGRESS: &str = "notifications/progress";
/// Method name of cancel notifications.
pub const CANCEL: &str = "notifications/cancel";
/// Method name of log notifications.
pub const LOG: &str = "notifications/log";

/// Incremental results carried by a progress frame.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// Hits found so far (advisory; the final response is authoritative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<Vec<Hit>>,
}

/// `notifications/progress` params (§9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The client's `_meta.progressToken`, echoed verbatim.
    pub progress_token: Value,
    /// Completion in `[0,1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// Pipeline stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Incremental results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
}

/// `notifications/cancel` params (§7.14).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelParams {
    /// The id of the request to abandon.
    pub id: RequestId,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Syslog-style severity of a log notification (§17.1), ordered from least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
}

impl LogLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Debug, Self::Info, Self::Notice, Self::Warning, Self::Error].into_iter().find(|l| l.as_str() == s)
    }
}

/// `notifications/log` params (§17.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogParams {
    /// Severity.
    pub level: LogLevel,
    /// Message.
    pub message: String,
    /// Logger name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// Structured data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Meta>,
    /// Side-band data (e.g. the `progressToken` of the request it concerns).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
