//! Typed requests: one marker type per method of RCP/1, each implementing [`Request`] with
//! the method's `params` and `result` types, as `lsp-types` does for LSP (this module gathers
//! what [`crate::methods`] declares under the name a caller writes). A client calls
//! `client.request::<request::MemoryRecall>(&params)` and gets a `MemoryRecallResult` back.
//! The markers are generated from the one declaration of each method, in
//! [`crate::methods`].

pub use crate::methods::markers::*;
pub use crate::methods::{Method, Request};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Capability;

    #[test]
    fn markers_carry_their_declaration() {
        assert_eq!(<Retrieve as Request>::METHOD.name(), "retrieve");
        assert_eq!(Retrieve::capability(), Some(Capability::Retrieve));
        assert_eq!(Ping::capability(), None);
    }
}
