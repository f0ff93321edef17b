//! Each request method of RCP/1 declared once (§7): its wire name and gating capability
//! (through [`Method`]), the type of its `params` and the type of its `result`.
//!
//! A marker type per method implements [`Request`], as `lsp-types` does for LSP: a client calls
//! `client.request::<request::MemoryRecall>(params)` and gets a `MemoryRecallResult` back, a
//! server's route table is keyed by [`Request::METHOD`], and a test walks [`Method::ALL`] to
//! prove that every declared method has its route, its client call and its conformance entry.
//! Adding a method is one line in the `declare!` table below plus its handler (CONTRIBUTING.md,
//! "Adding a method").

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::capabilities::Capability;
use crate::catalog::CatalogListResult;
use crate::embed::{EmbedParams, EmbedResult, MultiVectorResult, SparseEmbedParams, SparseEmbedResult};
use crate::feedback::{FeedbackParams, FeedbackResult};
use crate::graph::{GraphParams, GraphResult};
use crate::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use crate::lifecycle::{InitializeParams, InitializeResult, PingParams};
use crate::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use crate::message::{EmptyParams, EmptyResult};
use crate::methods::Method;
use crate::rerank::{RerankParams, RerankResult};
use crate::retrieve::{RetrieveParams, RetrieveResult};
use crate::transform::{TransformParams, TransformResult};

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

/// The table of declarations: `Marker = Method::Variant, Params, Result`.
macro_rules! declare {
    ($( $(#[$doc:meta])* $marker:ident = $method:ident, $params:ty, $result:ty; )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub struct $marker;

            impl Request for $marker {
                const METHOD: Method = Method::$method;
                type Params = $params;
                type Result = $result;
            }
        )*

        /// Every declared method, in the order of the table: [`Method::ALL`] as declarations.
        pub const DECLARED: &[Method] = &[$(Method::$method),*];
    };
}

declare! {
    /// `initialize` (§7.1).
    Initialize = Initialize, InitializeParams, InitializeResult;
    /// `info` (§7.2): the `initialize` result, fetched fresh.
    Info = Info, EmptyParams, InitializeResult;
    /// `ping` (§7.15): the nonce echoed.
    Ping = Ping, PingParams, PingParams;
    /// `shutdown` (§7.12).
    Shutdown = Shutdown, EmptyParams, EmptyResult;
    /// `embed` (§7.3).
    Embed = Embed, EmbedParams, EmbedResult;
    /// `embed/sparse` (§7.4).
    EmbedSparse = EmbedSparse, SparseEmbedParams, SparseEmbedResult;
    /// `embed/multi` (§7.5).
    EmbedMulti = EmbedMulti, EmbedParams, MultiVectorResult;
    /// `rerank` (§7.6).
    Rerank = Rerank, RerankParams, RerankResult;
    /// `retrieve` (§7.7).
    Retrieve = Retrieve, RetrieveParams, RetrieveResult;
    /// `query/transform` (§7.8).
    QueryTransform = QueryTransform, TransformParams, TransformResult;
    /// `graph` (§7.9).
    Graph = Graph, GraphParams, GraphResult;
    /// `index/add` (§7.10).
    IndexAdd = IndexAdd, IndexAddParams, IndexAddResult;
    /// `index/delete` (§7.11).
    IndexDelete = IndexDelete, IndexDeleteParams, IndexDeleteResult;
    /// `catalog/list` (§7.13).
    CatalogList = CatalogList, EmptyParams, CatalogListResult;
    /// `feedback` (§7.16).
    Feedback = Feedback, FeedbackParams, FeedbackResult;
    /// `memory/build` (§7.17).
    MemoryBuild = MemoryBuild, MemoryBuildParams, MemoryBuildResult;
    /// `memory/recall` (§7.17).
    MemoryRecall = MemoryRecall, MemoryRecallParams, MemoryRecallResult;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_declared_once() {
        let mut declared = DECLARED.to_vec();
        declared.sort_by_key(|m| m.name());
        declared.dedup();
        let mut all = Method::ALL.to_vec();
        all.sort_by_key(|m| m.name());
        assert_eq!(declared, all, "rcp_wire::request declares each method of Method::ALL exactly once");
        assert_eq!(<MemoryRecall as Request>::METHOD.name(), "memory/recall");
        assert_eq!(MemoryRecall::capability(), Some(Capability::Memory));
    }
}
