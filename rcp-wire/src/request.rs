//! Typed requests: one marker type per method of RCP/1, each implementing [`Request`] with
//! the method's `params` and `result` types, as `lsp-types` does for LSP. A client calls
//! `client.request::<request::MemoryRecall>(&params)` and gets a `MemoryRecallResult` back.
//! The markers are generated from the one declaration of each method, in
//! [`crate::methods`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::capabilities::Capability;
pub use crate::methods::Method;
pub use crate::methods::markers::*;

/// One request method of RCP/1: what its `params` and `result` are on the wire.
pub trait Request {
    /// The method (its wire name, gating capability and lifecycle rule).
    const METHOD: Method;
    /// Its `params`.
    type Params: Serialize + DeserializeOwned + Send + 'static;
    /// Its `result`.
    type Result: Serialize + DeserializeOwned + Send + 'static;

    /// The capability that gates the method, `None` for the four REQUIRED ones (§6).
    fn capability() -> Option<Capability> {
        Self::METHOD.capability()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_carry_their_declaration() {
        assert_eq!(<Retrieve as Request>::METHOD.name(), "retrieve");
        assert_eq!(Retrieve::capability(), Some(Capability::Retrieve));
        assert_eq!(Ping::capability(), None);
    }
}
