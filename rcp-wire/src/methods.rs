//! The method roster of RCP/1 (§7), declared once: each method's wire name, the capability
//! that gates it, whether it writes, and the types of its `params` and `result`.
//!
//! The [`methods!`](self) table below is the one place a method is declared. From it come
//! [`Method`] (a server's route table has one slot per variant, a client gates on
//! [`Method::capability`], an access policy reads [`Method::effect`]) and one marker type per
//! method, implementing [`Request`] and re-exported as `rcp_wire::request`, through which a
//! client makes typed calls
//! (`client.request::<request::Retrieve>(&params)`). Adding a method is one row here plus its
//! handler (CONTRIBUTING.md, "Adding a method").

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
use crate::rerank::{RerankParams, RerankResult};
use crate::retrieve::{RetrieveParams, RetrieveResult};
use crate::transform::{TransformParams, TransformResult};

/// What a method does to the served data, for an access policy: `lifecycle` methods any
/// caller may call, `read` ones answer from the data, `write` ones change it (or the engine's
/// learned state: feedback, memory).
macro_rules! effect {
    (lifecycle) => {
        Effect::Lifecycle
    };
    (read) => {
        Effect::Read
    };
    (write) => {
        Effect::Write
    };
}

/// The table: `Variant = "wire/name", gate, effect, Params, Result;`, where `gate` is
/// `required` (the four lifecycle methods, never gated) or a [`Capability`] variant.
macro_rules! methods {
    (@cap required) => { None };
    (@cap $cap:ident) => { Some(Capability::$cap) };
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $cap:ident, $effect:ident, $params:ty, $result:ty; )*) => {
        /// A method defined by RCP/1 (§7).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        impl Method {
            /// Every request method of RCP/1, in the order of the declaration.
            pub const ALL: [Method; [$($name),*].len()] = [$(Self::$variant),*];

            /// The wire name.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $name, )*
                }
            }

            /// The method with this wire name, if RCP/1 defines one.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( $name => Some(Self::$variant), )*
                    _ => None,
                }
            }

            /// The capability that gates this method, or `None` for the four REQUIRED methods.
            pub const fn capability(self) -> Option<Capability> {
                match self {
                    $( Self::$variant => methods!(@cap $cap), )*
                }
            }

            /// What the method does to the served data.
            pub const fn effect(self) -> Effect {
                match self {
                    $( Self::$variant => effect!($effect), )*
                }
            }
        }

        /// One marker type per method, implementing [`Request`].
        pub(crate) mod markers {
            use super::*;
            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
                pub struct $variant;

                impl Request for $variant {
                    const METHOD: Method = Method::$variant;
                    type Params = $params;
                    type Result = $result;
                }
            )*
        }
    };
}

methods! {
    /// `initialize` (§7.1).
    Initialize = "initialize", required, lifecycle, InitializeParams, InitializeResult;
    /// `info` (§7.2): the `initialize` result, fetched fresh.
    Info = "info", required, lifecycle, EmptyParams, InitializeResult;
    /// `ping` (§7.15): the nonce echoed.
    Ping = "ping", required, lifecycle, PingParams, PingParams;
    /// `shutdown` (§7.12).
    Shutdown = "shutdown", required, lifecycle, EmptyParams, EmptyResult;
    /// `embed` (§7.3).
    Embed = "embed", Embed, read, EmbedParams, EmbedResult;
    /// `embed/sparse` (§7.4).
    EmbedSparse = "embed/sparse", SparseEmbed, read, SparseEmbedParams, SparseEmbedResult;
    /// `embed/multi` (§7.5).
    EmbedMulti = "embed/multi", MultiVector, read, EmbedParams, MultiVectorResult;
    /// `rerank` (§7.6).
    Rerank = "rerank", Rerank, read, RerankParams, RerankResult;
    /// `retrieve` (§7.7).
    Retrieve = "retrieve", Retrieve, read, RetrieveParams, RetrieveResult;
    /// `query/transform` (§7.8).
    QueryTransform = "query/transform", Transform, read, TransformParams, TransformResult;
    /// `graph` (§7.9).
    Graph = "graph", Graph, read, GraphParams, GraphResult;
    /// `index/add` (§7.10).
    IndexAdd = "index/add", Index, write, IndexAddParams, IndexAddResult;
    /// `index/delete` (§7.11).
    IndexDelete = "index/delete", Index, write, IndexDeleteParams, IndexDeleteResult;
    /// `catalog/list` (§7.13).
    CatalogList = "catalog/list", Catalog, read, EmptyParams, CatalogListResult;
    /// `feedback` (§7.16).
    Feedback = "feedback", Feedback, write, FeedbackParams, FeedbackResult;
    /// `memory/build` (§7.17).
    MemoryBuild = "memory/build", Memory, write, MemoryBuildParams, MemoryBuildResult;
    /// `memory/recall` (§7.17).
    MemoryRecall = "memory/recall", Memory, read, MemoryRecallParams, MemoryRecallResult;
}

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

/// What a method does to the served data ([`Method::effect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// A lifecycle method (§7.1, §7.2, §7.12, §7.15): answered by the server itself, callable
    /// by any caller.
    Lifecycle,
    /// Answers from the served data without changing it.
    Read,
    /// Changes the served data or what the engine learned (`index/*`, `feedback`,
    /// `memory/build`).
    Write,
}

impl Method {
    /// The method's position in [`Self::ALL`]: an index for a table with one slot per method.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the method may be called before a successful `initialize` (§13): the four
    /// REQUIRED lifecycle methods, which a server answers itself and never gates. This is the
    /// one lifecycle table; servers route on it.
    pub const fn callable_before_initialize(self) -> bool {
        matches!(self.effect(), Effect::Lifecycle)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (i, m) in Method::ALL.into_iter().enumerate() {
            assert_eq!(Method::from_name(m.name()), Some(m));
            assert_eq!(m.index(), i, "ALL is in declaration order");
        }
        assert_eq!(Method::from_name("x-acme/foo"), None);
        assert_eq!(Method::IndexDelete.capability(), Some(Capability::Index));
        for m in Method::ALL {
            assert_eq!(
                m.capability().is_none(),
                m.callable_before_initialize(),
                "{m}: only lifecycle methods go ungated"
            );
        }
    }
}
