//! Capability gating (§6, §7.7 `strict`, §14.4): the one place that decides whether a
//! request uses only what the peer advertised.
//!
//! Both sides call it: the client before any I/O (a conforming client never passes an
//! unadvertised option unless `strict:false`, §14.4), the server before any handler runs
//! (`-32005` when strict, otherwise a fallback noted in `usage.notes`, §7.7). Every check
//! returns a [`Finding`] naming the option, the offending value, what is advertised, the params
//! path, and the fallback that `strict:false` permits. The functions are pure: no I/O, no state.
//!
//! Every gated option is a variant of [`Gate`], listed in [`Gate::ALL`], so a test can
//! enumerate them and a new check cannot appear on one side only.

mod families;
mod retrieve;
#[cfg(test)]
mod tests;

pub use families::*;
pub use retrieve::*;

use crate::capabilities::Capabilities;
use crate::methods::Method;
use crate::{ErrorCode, RcpError};

/// The capability text `index/add` needs: `index` with `writable: true` (§7.10).
pub const INDEX_WRITABLE: &str = "index (writable: true)";

/// Every option a peer gates on the advertised capabilities (§6, §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    /// `retrieve.modality` ⊆ `retrieve.modalities` (§4.8).
    RetrieveModality,
    /// The modality of the `retrieve` query blocks ⊆ `retrieve.modalities` (§4.8).
    RetrieveQueryModality,
    /// `retrieve.mode` ⊆ `retrieve.modes` (§6.1).
    RetrieveMode,
    /// `retrieve.fusion.method` ⊆ `retrieve.fusion` (§6.1).
    RetrieveFusionMethod,
    /// Inline `retrieve.rerank` needs `retrieve.rerankBuiltin` (§6.1).
    RetrieveRerank,
    /// `retrieve.rerank.method` ⊆ `rerank.methods` (§7.6).
    RetrieveRerankMethod,
    /// `retrieve.mmr` needs `retrieve.mmr` (§6.1).
    RetrieveMmr,
    /// `retrieve.rewrite` ⊆ `transform.methods` (§7.8).
    RetrieveRewrite,
    /// `retrieve.filter` needs the `filter` capability (§8).
    RetrieveFilter,
    /// `retrieve.filter` uses only advertised fields and operators (§8).
    RetrieveFilterClause,
    /// `retrieve.recency.field` is an advertised date filter field (§4.6, §7.7).
    RetrieveRecencyField,
    /// `retrieve.unit` ⊆ `retrieve.units` (§7.7.2).
    RetrieveUnit,
    /// `retrieve.level` < `retrieve.levels` (§7.7.2).
    RetrieveLevel,
    /// `retrieve.tokenBudget` needs `retrieve.tokenBudget` (§7.7.2).
    RetrieveTokenBudget,
    /// `retrieve.indexVersion` needs `retrieve.snapshots` (§7.7.1).
    RetrieveIndexVersion,
    /// `retrieve.cursor` needs `pagination` (§10).
    RetrieveCursor,
    /// `retrieve.encoding` of hit vectors is `json` (§7.3.1, schema `Hit.vector`).
    RetrieveEncoding,
    /// `embed.encoding` ⊆ `embed.encodings` ∪ {`json`} (§7.3.1).
    EmbedEncoding,
    /// The modality of each `embed` input ⊆ `embed.modalities` (§4.8).
    EmbedModality,
    /// `rerank.method` ⊆ `rerank.methods` (§7.6).
    RerankMethod,
    /// The modality of the `rerank` query is `text` (§7.6).
    RerankQueryModality,
    /// `index/add` `chunk:true` needs `index.chunking` (§7.10).
    IndexChunk,
    /// `index/add` `contextual:true` needs `index.contextual` (§7.10).
    IndexContextual,
    /// `query/transform` `method` ⊆ `transform.methods` (§7.8).
    TransformMethod,
    /// `graph` `op` ⊆ `graph.ops` (§7.9).
    GraphOp,
    /// `memory/build` `scope` ⊆ `memory.scopes` (§7.17).
    MemoryScope,
}

impl Gate {
    /// Every gate, in the order of the spec's sections.
    pub const ALL: [Gate; 26] = [
        Self::RetrieveModality,
        Self::RetrieveQueryModality,
        Self::RetrieveMode,
        Self::RetrieveFusionMethod,
        Self::RetrieveRerank,
        Self::RetrieveRerankMethod,
        Self::RetrieveMmr,
        Self::RetrieveRewrite,
        Self::RetrieveFilter,
        Self::RetrieveFilterClause,
        Self::RetrieveRecencyField,
        Self::RetrieveUnit,
        Self::RetrieveLevel,
        Self::RetrieveTokenBudget,
        Self::RetrieveIndexVersion,
        Self::RetrieveCursor,
        Self::RetrieveEncoding,
        Self::EmbedEncoding,
        Self::EmbedModality,
        Self::RerankMethod,
        Self::RerankQueryModality,
        Self::IndexChunk,
        Self::IndexContextual,
        Self::TransformMethod,
        Self::GraphOp,
        Self::MemoryScope,
    ];

    /// The gate of a method family checked with [`one_of`], by its option name: `method`
    /// (`query/transform`), `op` (`graph`), `scope` (`memory/build`).
    pub fn listed_option(option: &str) -> Option<Gate> {
        [Self::TransformMethod, Self::GraphOp, Self::MemoryScope].into_iter().find(|g| g.option() == option)
    }

    /// The method whose params carry the option.
    pub fn method(self) -> Method {
        match self {
            Self::EmbedEncoding | Self::EmbedModality => Method::Embed,
            Self::RerankMethod | Self::RerankQueryModality => Method::Rerank,
            Self::IndexChunk | Self::IndexContextual => Method::IndexAdd,
            Self::TransformMethod => Method::QueryTransform,
            Self::GraphOp => Method::Graph,
            Self::MemoryScope => Method::MemoryBuild,
            _ => Method::Retrieve,
        }
    }

    /// The option name reported in `error.data.option` and in notes.
    pub fn option(self) -> &'static str {
        match self {
            Self::RetrieveModality | Self::RetrieveQueryModality | Self::EmbedModality | Self::RerankQueryModality => {
                "modality"
            }
            Self::RetrieveMode => "mode",
            Self::RetrieveFusionMethod => "fusion.method",
            Self::RetrieveRerank => "rerank",
            Self::RetrieveRerankMethod => "rerank.method",
            Self::RetrieveMmr => "mmr",
            Self::RetrieveRewrite => "rewrite",
            Self::RetrieveFilter | Self::RetrieveFilterClause => "filter",
            Self::RetrieveRecencyField => "recency.field",
            Self::RetrieveUnit => "unit",
            Self::RetrieveLevel => "level",
            Self::RetrieveTokenBudget => "tokenBudget",
            Self::RetrieveIndexVersion => "indexVersion",
            Self::RetrieveCursor => "cursor",
            Self::RetrieveEncoding | Self::EmbedEncoding => "encoding",
            Self::RerankMethod | Self::TransformMethod => "method",
            Self::IndexChunk => "chunk",
            Self::IndexContextual => "contextual",
            Self::GraphOp => "op",
            Self::MemoryScope => "scope",
        }
    }
}

/// What kind of refusal a [`Finding`] is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// The value is outside the advertised list (`-32005`, §7.7).
    NotAdvertised,
    /// The option needs a capability flag that is absent (`-32005`, §7.7); the reason says which.
    FeatureAbsent {
        /// Why the option is unsupported (`server does not advertise retrieve.mmr`).
        reason: String,
    },
    /// A validator refused the option with its own error: the filter validator (§8: `-32005`
    /// for an operator, `-32602` for a field or value) or `recency.field` (`-32602`).
    Rejected(RcpError),
}

/// One unadvertised option, option value, filter field or operator found in a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Which gate refused it.
    pub gate: Gate,
    /// The offending value (`dense`, `present`, `7`).
    pub value: String,
    /// What the peer advertises for this option (empty: nothing).
    pub advertised: Vec<String>,
    /// The params path where it applies (`inputs[2]`, `filter.and[0].op`), when more precise
    /// than the option name.
    pub field: Option<String>,
    /// What a server does instead under `strict:false` (§7.7); `None` when nothing can be done
    /// and the request is refused whatever `strict` says.
    pub fallback: Option<String>,
    /// The kind of refusal.
    pub kind: Kind,
}

impl Finding {
    pub(crate) fn not_advertised(gate: Gate, value: &str, advertised: &[String], fallback: Option<String>) -> Self {
        Self {
            gate,
            value: value.to_owned(),
            advertised: advertised.to_vec(),
            field: None,
            fallback,
            kind: Kind::NotAdvertised,
        }
    }

    pub(crate) fn feature_absent(gate: Gate, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            gate,
            value: value.into(),
            advertised: Vec::new(),
            field: None,
            fallback: Some("ignored".to_owned()),
            kind: Kind::FeatureAbsent { reason: reason.into() },
        }
    }

    pub(crate) fn rejected(gate: Gate, error: RcpError) -> Self {
        let fallback = (error.code == ErrorCode::OPTION_UNSUPPORTED).then(|| "dropped".to_owned());
        Self {
            gate,
            value: error.field().unwrap_or(gate.option()).to_owned(),
            advertised: Vec::new(),
            field: error.field().map(str::to_owned),
            fallback,
            kind: Kind::Rejected(error),
        }
    }

    pub(crate) fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// The option name (`mode`, `fusion.method`).
    pub fn option(&self) -> &'static str {
        self.gate.option()
    }

    /// Whether the request is refused: always under `strict` (the default), and under
    /// `strict:false` when there is no fallback (§7.7).
    pub fn refuses(&self, strict: bool) -> bool {
        strict || self.fallback.is_none()
    }

    /// The protocol error a server answers when it refuses (§12: `-32005` with
    /// `error.data.option`, or the validator's own error).
    pub fn error(&self) -> RcpError {
        let mut e = match &self.kind {
            Kind::NotAdvertised => {
                let list: Vec<&str> = self.advertised.iter().map(String::as_str).collect();
                RcpError::option_unsupported(self.option(), &self.value, &list)
            }
            Kind::FeatureAbsent { reason } => {
                let mut e = RcpError::new(
                    ErrorCode::OPTION_UNSUPPORTED,
                    format!("{} is not supported: {reason}", self.option()),
                );
                e.data.get_or_insert_with(Default::default).option = Some(self.option().to_owned());
                e
            }
            Kind::Rejected(e) => return e.clone(),
        };
        if let (Kind::NotAdvertised, Some(field)) = (&self.kind, &self.field)
            && field != self.option()
        {
            e.data.get_or_insert_with(Default::default).field = Some(field.clone());
        }
        e
    }

    /// The `usage.notes` entry a server writes when it falls back under `strict:false`;
    /// `None` when there is no fallback.
    pub fn note(&self) -> Option<String> {
        let fallback = self.fallback.as_deref()?;
        let option = self.option();
        Some(match &self.kind {
            Kind::NotAdvertised => format!("{option} '{}' not advertised; {fallback}", self.value),
            Kind::FeatureAbsent { reason } => format!("{option} {fallback}: {reason}"),
            Kind::Rejected(e) => format!("{option} {fallback}: {}", e.message),
        })
    }

    /// The advertised list as one string (`sparse, dense`, or `none`).
    pub fn advertised_list(&self) -> String {
        if self.advertised.is_empty() { "none".to_owned() } else { self.advertised.join(", ") }
    }
}

/// A method whose capability was not advertised (`-32003`, §6: absence means the client
/// MUST NOT use it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCapability {
    /// The method called.
    pub method: &'static str,
    /// The capability it needs (`retrieve`, or [`INDEX_WRITABLE`]).
    pub capability: &'static str,
}

impl MissingCapability {
    /// The protocol error (`-32003`).
    pub fn error(&self) -> RcpError {
        RcpError::capability_missing(self.method, self.capability)
    }
}

/// Whether `m` may be called at all: its capability is advertised, and for `index/add` the
/// index is writable (§6, §7.10). Methods without a capability (lifecycle) always pass.
pub fn method(caps: &Capabilities, m: Method) -> Result<(), MissingCapability> {
    if let Some(cap) = m.capability()
        && !caps.has(cap)
    {
        return Err(MissingCapability { method: m.name(), capability: cap.key() });
    }
    if m == Method::IndexAdd && !caps.index.as_ref().is_some_and(|i| i.writable) {
        return Err(MissingCapability { method: m.name(), capability: INDEX_WRITABLE });
    }
    Ok(())
}

pub(crate) fn listed(value: &str, advertised: &[String]) -> bool {
    advertised.iter().any(|a| a == value)
}

/// `value` must be one of `advertised`; no fallback (query/transform, graph, memory scope).
pub fn one_of(gate: Gate, value: &str, advertised: &[String]) -> Option<Finding> {
    (!listed(value, advertised)).then(|| Finding::not_advertised(gate, value, advertised, None))
}
