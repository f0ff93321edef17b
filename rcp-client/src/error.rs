//! Client errors: the server's own protocol errors, errors raised locally before any I/O
//! (gating, §14.4), and transport failures.

use rcp_protocol::{ErrorCode, RcpError};

/// Why a client call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    #[error("server error: {0}")]
    Rpc(RcpError),
    /// Refused locally, before any I/O: the server did not advertise the capability (-32003).
    #[error("'{method}' needs capability '{capability}', which the server did not advertise")]
    CapabilityMissing {
        /// The method called.
        method: String,
        /// The capability it needs.
        capability: String,
    },
    /// Refused locally, before any I/O: an option value the server did not advertise (-32005).
    #[error("{option} '{value}' not advertised by the server; advertised: {advertised}")]
    OptionUnsupported {
        /// The option (`mode`, `encoding`, ...).
        option: String,
        /// The value requested.
        value: String,
        /// What the server advertises.
        advertised: String,
    },
    /// Refused locally: the params are malformed (-32602), e.g. a filter the server would reject.
    #[error("invalid params: {0}")]
    InvalidParams(RcpError),
    /// The negotiated version is below this client's minimum (§7.1): the connection was aborted.
    #[error("negotiated protocol version {negotiated} is below the client minimum {minimum}")]
    VersionTooOld {
        /// What the server negotiated.
        negotiated: u32,
        /// This client's minimum.
        minimum: u32,
    },
    /// The client-side deadline elapsed; a cancel was sent and a late answer will be discarded.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The call was cancelled by the caller.
    #[error("cancelled")]
    Cancelled,
    /// The transport died (EOF, process exit, connection reset): every in-flight call fails
    /// with this, and it says nothing about whether the request took effect (§13.1).
    #[error("transport closed: {0}")]
    Closed(String),
    /// Could not connect or spawn.
    #[error("connect failed: {0}")]
    Connect(String),
    /// A frame could not be parsed or did not have the expected shape.
    #[error("protocol violation: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The JSON-RPC code this error corresponds to, where there is one.
    pub fn code(&self) -> Option<ErrorCode> {
        Some(match self {
            Self::Rpc(e) | Self::InvalidParams(e) => e.code,
            Self::CapabilityMissing { .. } => ErrorCode::CAPABILITY_MISSING,
            Self::OptionUnsupported { .. } => ErrorCode::OPTION_UNSUPPORTED,
            Self::VersionTooOld { .. } => ErrorCode::VERSION_MISMATCH,
            Self::Timeout(_) => ErrorCode::TIMEOUT,
            Self::Cancelled => ErrorCode::CANCELLED,
            Self::Closed(_) | Self::Connect(_) => ErrorCode::BACKEND_UNAVAILABLE,
            Self::Protocol(_) => return None,
        })
    }

    /// The error as a protocol error object (for federation notes and re-raising).
    pub fn to_rcp(&self) -> RcpError {
        match self {
            Self::Rpc(e) | Self::InvalidParams(e) => e.clone(),
            other => RcpError::new(other.code().unwrap_or(ErrorCode::INTERNAL_ERROR), other.to_string()),
        }
    }

    /// Whether retrying the same request may succeed (§12.2), and after how long at least.
    pub fn retry_hint(&self) -> Option<Option<u64>> {
        match self {
            Self::Rpc(e) => {
                let after = e.data.as_ref().and_then(|d| d.retry_after_ms);
                e.code.is_retryable().then_some(after)
            }
            Self::Timeout(_) => Some(None),
            _ => None,
        }
    }
}

impl From<RcpError> for ClientError {
    fn from(e: RcpError) -> Self {
        Self::Rpc(e)
    }
}
