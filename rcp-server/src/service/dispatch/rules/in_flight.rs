//! Rule: one request per id at a time on a session (§4.7). A request whose id is still in
//! flight is refused with an uncorrelated answer; the id is free again once its request is
//! answered or abandoned (see [`InFlight`]).

use std::sync::Arc;

use rcp_wire::{RcpError, RequestId};

use crate::service::dispatch::envelope::error_frame;
use crate::service::session::{InFlight, Session};

/// `error.data.detail` of the answer to a request whose id is already in flight (§4.7).
const DUPLICATE_ID: &str = "a request with this id is still in flight on this connection (§4.7)";

/// A request refused because its id is already in flight.
#[derive(Debug)]
pub(crate) struct DuplicateId(RequestId);

impl DuplicateId {
    /// The answer. Its id is `null`: answering with the id would hand the client two answers
    /// for one id, and JSON-RPC's null id says "this frame could not be correlated".
    pub(crate) fn frame(&self) -> Vec<u8> {
        let e = RcpError::invalid_request(format!("id {} is already in flight", self.0)).with_detail(DUPLICATE_ID);
        error_frame(None, &e)
    }
}

/// The request id of a raw id the envelope already checked (§4.1).
pub(crate) fn parse_id(raw: &str) -> Result<RequestId, RcpError> {
    serde_json::from_str(raw).map_err(|_| RcpError::invalid_request("bad id"))
}

/// Registers request `id` as in flight on `session`, unless it already is.
pub(crate) fn enter(session: &Arc<Session>, id: &RequestId) -> Result<InFlight, DuplicateId> {
    session.begin(id).ok_or_else(|| DuplicateId(id.clone()))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn an_id_is_taken_until_its_request_is_done() {
        let session = Arc::new(Session::new());
        let id = RequestId::from(7);
        let first = enter(&session, &id);
        assert!(first.is_ok());
        assert!(enter(&session, &id).is_err(), "the id is in flight");
        assert!(enter(&session, &RequestId::from(8)).is_ok_and(|f| {
            f.answered();
            true
        }));
        drop(first);
        assert!(enter(&session, &id).is_ok(), "free again once the first is done");
    }

    #[test]
    fn duplicate_ids_are_answered_uncorrelated() {
        let f = DuplicateId(RequestId::Number(3.into())).frame();
        let v: Value = serde_json::from_slice(&f).unwrap_or_default();
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["data"]["detail"], DUPLICATE_ID);
    }

    #[test]
    fn ids_are_read_from_the_raw_envelope() {
        assert_eq!(parse_id("\"a\"").ok(), Some(RequestId::from("a")));
        assert!(parse_id("{}").is_err());
    }
}
