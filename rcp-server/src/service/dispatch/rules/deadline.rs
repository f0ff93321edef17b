//! Rule: every request runs against a deadline (§13.1). The server's budget for the method
//! (writes get the longer one) may only be shortened by `_meta.deadlineMs`; a `deadlineMs` of
//! `0` has expired on arrival, and is answered `-32014` before any handler runs.

use std::time::Duration;

use rcp_wire::methods::Method;
use rcp_wire::{Meta, RcpError};
use tokio::time::Instant;

use crate::server::options::ServerOptions;
use crate::service::validate;

/// When a request must be answered by, and the budget that set it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    /// The instant the request times out.
    pub at: Instant,
    /// The time it was given.
    pub budget: Duration,
}

impl Deadline {
    /// The deadline of a request to `m` with this `_meta`, starting now.
    pub(crate) fn of(options: &ServerOptions, m: Method, meta: Option<&Meta>) -> Result<Self, RcpError> {
        let asked = validate::deadline_ms(meta)?;
        if asked == Some(0) {
            return Err(RcpError::timeout(0));
        }
        let mut budget = match m {
            Method::IndexAdd | Method::IndexDelete | Method::MemoryBuild => options.write_deadline,
            _ => options.request_deadline,
        };
        if let Some(ms) = asked {
            budget = budget.min(Duration::from_millis(ms));
        }
        Ok(Self { at: Instant::now() + budget, budget })
    }

    /// The budget in milliseconds, for the `-32014` answer.
    pub(crate) fn budget_ms(&self) -> u64 {
        u64::try_from(self.budget.as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::ErrorCode;
    use serde_json::json;

    use super::*;

    fn meta(ms: serde_json::Value) -> Meta {
        json!({ "deadlineMs": ms }).as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn writes_get_the_longer_budget() {
        let opts = ServerOptions::default();
        let read = Deadline::of(&opts, Method::Retrieve, None).map(|d| d.budget).ok();
        let write = Deadline::of(&opts, Method::IndexAdd, None).map(|d| d.budget).ok();
        assert_eq!(read, Some(opts.request_deadline));
        assert_eq!(write, Some(opts.write_deadline));
    }

    #[test]
    fn deadline_ms_only_shortens() {
        let opts = ServerOptions { request_deadline: Duration::from_secs(1), ..ServerOptions::default() };
        let short = Deadline::of(&opts, Method::Retrieve, Some(&meta(json!(200)))).map(|d| d.budget_ms()).ok();
        assert_eq!(short, Some(200));
        let long = Deadline::of(&opts, Method::Retrieve, Some(&meta(json!(5_000)))).map(|d| d.budget_ms()).ok();
        assert_eq!(long, Some(1_000));
    }

    #[test]
    fn zero_has_expired_and_garbage_is_invalid() {
        let opts = ServerOptions::default();
        let zero = Deadline::of(&opts, Method::Retrieve, Some(&meta(json!(0)))).err().map(|e| e.code);
        assert_eq!(zero, Some(ErrorCode::TIMEOUT));
        let bad = Deadline::of(&opts, Method::Retrieve, Some(&meta(json!("5")))).err().map(|e| e.code);
        assert_eq!(bad, Some(ErrorCode::INVALID_PARAMS));
    }
}
