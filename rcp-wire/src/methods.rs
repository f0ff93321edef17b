//! The method roster of §7 and the capability that gates each method.

use crate::capabilities::Capability;

/// A method defined by RCP/1 (§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `initialize` (§7.1)
    Initialize,
    /// `info` (§7.2)
    Info,
    /// `ping` (§7.15)
    Ping,
    /// `shutdown` (§7.12)
    Shutdown,
    /// `embed` (§7.3)
    Embed,
    /// `embed/sparse` (§7.4)
    EmbedSparse,
    /// `embed/multi` (§7.5)
    EmbedMulti,
    /// `rerank` (§7.6)
    Rerank,
    /// `retrieve` (§7.7)
    Retrieve,
    /// `query/transform` (§7.8)
    QueryTransform,
    /// `graph` (§7.9)
    Graph,
    /// `index/add` (§7.10)
    IndexAdd,
    /// `index/delete` (§7.11)
    IndexDelete,
    /// `catalog/list` (§7.13)
    CatalogList,
    /// `feedback` (§7.16)
    Feedback,
    /// `memory/build` (§7.17)
    MemoryBuild,
    /// `memory/recall` (§7.17)
    MemoryRecall,
}

impl Method {
    /// Every request method of RCP/1.
    pub const ALL: [Method; 17] = [
        Self::Initialize,
        Self::Info,
        Self::Ping,
        Self::Shutdown,
        Self::Embed,
        Self::EmbedSparse,
        Self::EmbedMulti,
        Self::Rerank,
        Self::Retrieve,
        Self::QueryTransform,
        Self::Graph,
        Self::IndexAdd,
        Self::IndexDelete,
        Self::CatalogList,
        Self::Feedback,
        Self::MemoryBuild,
        Self::MemoryRecall,
    ];

    /// The method's position in [`Self::ALL`]: an index for a table with one slot per method.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::Info => "info",
            Self::Ping => "ping",
            Self::Shutdown => "shutdown",
            Self::Embed => "embed",
            Self::EmbedSparse => "embed/sparse",
            Self::EmbedMulti => "embed/multi",
            Self::Rerank => "rerank",
            Self::Retrieve => "retrieve",
            Self::QueryTransform => "query/transform",
            Self::Graph => "graph",
            Self::IndexAdd => "index/add",
            Self::IndexDelete => "index/delete",
            Self::CatalogList => "catalog/list",
            Self::Feedback => "feedback",
            Self::MemoryBuild => "memory/build",
            Self::MemoryRecall => "memory/recall",
        }
    }

    /// The method with this wire name, if RCP/1 defines one.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "initialize" => Self::Initialize,
            "info" => Self::Info,
            "ping" => Self::Ping,
            "shutdown" => Self::Shutdown,
            "embed" => Self::Embed,
            "embed/sparse" => Self::EmbedSparse,
            "embed/multi" => Self::EmbedMulti,
            "rerank" => Self::Rerank,
            "retrieve" => Self::Retrieve,
            "query/transform" => Self::QueryTransform,
            "graph" => Self::Graph,
            "index/add" => Self::IndexAdd,
            "index/delete" => Self::IndexDelete,
            "catalog/list" => Self::CatalogList,
            "feedback" => Self::Feedback,
            "memory/build" => Self::MemoryBuild,
            "memory/recall" => Self::MemoryRecall,
            _ => return None,
        })
    }

    /// The capability that gates this method, or `None` for the four REQUIRED methods.
    pub fn capability(self) -> Option<Capability> {
        Some(match self {
            Self::Initialize | Self::Info | Self::Ping | Self::Shutdown => return None,
            Self::Embed => Capability::Embed,
            Self::EmbedSparse => Capability::SparseEmbed,
            Self::EmbedMulti => Capability::MultiVector,
            Self::Rerank => Capability::Rerank,
            Self::Retrieve => Capability::Retrieve,
            Self::QueryTransform => Capability::Transform,
            Self::Graph => Capability::Graph,
            Self::IndexAdd | Self::IndexDelete => Capability::Index,
            Self::CatalogList => Capability::Catalog,
            Self::Feedback => Capability::Feedback,
            Self::MemoryBuild | Self::MemoryRecall => Capability::Memory,
        })
    }

    /// Whether the method may be called before a successful `initialize` (§13): the four
    /// REQUIRED lifecycle methods, which a server answers itself and never gates. This is the
    /// one lifecycle table; servers route on it.
    pub fn callable_before_initialize(self) -> bool {
        matches!(self, Self::Info | Self::Ping | Self::Shutdown | Self::Initialize)
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
    }
}
