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

use std::fmt::Write as _;

use serde_json::Value;

use crate::capabilities::{Capabilities, RerankCapability, RetrieveCapability, default_modalities, hit_encodings};
use crate::content::{InputItem, QueryInput};
use crate::embed::EmbedParams;
use crate::filter::{self, FieldType, Filter};
use crate::graph::GraphParams;
use crate::index::IndexAddParams;
use crate::memory::MemoryBuildParams;
use crate::methods::Method;
use crate::rerank::RerankParams;
use crate::retrieve::{RerankOption, RewriteOption};
use crate::transform::TransformParams;
use crate::{ErrorCode, RcpError, RetrieveParams};

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
    fn not_advertised(gate: Gate, value: &str, advertised: &[String], fallback: Option<String>) -> Self {
        Self {
            gate,
            value: value.to_owned(),
            advertised: advertised.to_vec(),
            field: None,
            fallback,
            kind: Kind::NotAdvertised,
        }
    }

    fn feature_absent(gate: Gate, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            gate,
            value: value.into(),
            advertised: Vec::new(),
            field: None,
            fallback: Some("ignored".to_owned()),
            kind: Kind::FeatureAbsent { reason: reason.into() },
        }
    }

    fn rejected(gate: Gate, error: RcpError) -> Self {
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

    fn at(mut self, field: impl Into<String>) -> Self {
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

fn listed(value: &str, advertised: &[String]) -> bool {
    advertised.iter().any(|a| a == value)
}

/// `value` must be one of `advertised`; no fallback (query/transform, graph, memory scope).
pub fn one_of(gate: Gate, value: &str, advertised: &[String]) -> Option<Finding> {
    (!listed(value, advertised)).then(|| Finding::not_advertised(gate, value, advertised, None))
}

// ---- retrieve (§7.7), one function per option ----

/// The `retrieve` capability the checks read: the advertised one, or the defaults of §6.1.
pub fn retrieve_capability(caps: &Capabilities) -> std::borrow::Cow<'_, RetrieveCapability> {
    match &caps.retrieve {
        Some(rc) => std::borrow::Cow::Borrowed(rc),
        None => std::borrow::Cow::Owned(RetrieveCapability::default()),
    }
}

/// `modality` (§4.8): falls back to text.
pub fn modality(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.modality.as_deref()?;
    let advertised = rc.modalities();
    (!listed(m, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveModality, m, advertised, Some("using text".into())))
}

/// The modality of a query (§4.8): falls back to the query's text part, when it has one.
pub fn query_modality(gate: Gate, query: &QueryInput, advertised: &[String]) -> Option<Finding> {
    let m = query.modality();
    if listed(m, advertised) {
        return None;
    }
    let fallback = (!query.text().trim().is_empty()).then(|| "using the text part of the query".to_owned());
    Some(Finding::not_advertised(gate, m, advertised, fallback).at("query"))
}

/// `mode` (§6.1): falls back to `defaultMode` (or the first advertised mode).
pub fn mode(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.mode.as_deref()?;
    let fallback = format!("using '{}'", rc.default_mode().unwrap_or("the default"));
    (!listed(m, rc.modes())).then(|| Finding::not_advertised(Gate::RetrieveMode, m, rc.modes(), Some(fallback)))
}

/// `fusion.method` (§6.1): falls back to the server's default fusion.
pub fn fusion_method(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let m = p.fusion.as_ref()?.method.as_deref()?;
    let advertised = rc.fusion_methods();
    (!listed(m, advertised)).then(|| {
        Finding::not_advertised(
            Gate::RetrieveFusionMethod,
            m,
            advertised,
            Some("using the server's default fusion".into()),
        )
    })
}

/// Inline `rerank` (§6.1): needs `rerankBuiltin`; dropped otherwise.
pub fn inline_rerank(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    (p.rerank_stage().is_some() && !rc.offers_rerank()).then(|| {
        Finding::feature_absent(Gate::RetrieveRerank, "enabled", "server does not advertise retrieve.rerankBuiltin")
    })
}

/// `rerank.method` of an inline stage (§7.6), checked when `rerank` is advertised; falls
/// back to the server's default reranker.
pub fn inline_rerank_method(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let Some(RerankOption::Stage(stage)) = &p.rerank else { return None };
    let m = stage.method.as_deref()?;
    let rr = caps.rerank.as_ref()?;
    (!listed(m, &rr.methods)).then(|| {
        Finding::not_advertised(
            Gate::RetrieveRerankMethod,
            m,
            &rr.methods,
            Some("using the server's default reranker".into()),
        )
    })
}

/// `mmr` (§6.1): needs `retrieve.mmr`; dropped otherwise.
pub fn mmr(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    (p.mmr.is_some() && !rc.offers_mmr())
        .then(|| Finding::feature_absent(Gate::RetrieveMmr, "enabled", "server does not advertise retrieve.mmr"))
}

/// `rewrite` (§7.7, §7.8): a method ⊆ `transform.methods`; the query is used as given otherwise.
pub fn rewrite(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let Some(RewriteOption::Method(m)) = &p.rewrite else { return None };
    let advertised = caps.transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or(&[]);
    (!listed(m, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveRewrite, m, advertised, Some("query used as given".into())))
}

/// `filter` (§8): needs the `filter` capability, then only advertised fields and operators.
/// Returns the validated filter; an unadvertised operator may be dropped under `strict:false`,
/// an unadvertised field or a mistyped value never (`-32602`).
pub fn filter(caps: &Capabilities, raw: &Value) -> Result<Filter, Finding> {
    let Some(fc) = &caps.filter else {
        return Err(Finding::feature_absent(Gate::RetrieveFilter, "present", "server does not advertise filter"));
    };
    filter::validate(raw, fc).map_err(|e| {
        let mut f = Finding::rejected(Gate::RetrieveFilterClause, e);
        f.advertised = fc.advertised_operators().into_iter().map(str::to_owned).collect();
        f
    })
}

/// `recency.field` (§4.6, §7.7): when `filter` is advertised, an advertised date field
/// (`-32602` otherwise, whatever `strict` says).
pub fn recency_field(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    let r = p.recency.as_ref()?;
    let fc = caps.filter.as_ref()?;
    let detail = match fc.field_type(&r.field) {
        None => format!("field '{}' is not an advertised filter field", r.field),
        Some(Some(t)) if *t != FieldType::Date => format!("field '{}' is not a date field", r.field),
        _ => return None,
    };
    Some(Finding::rejected(Gate::RetrieveRecencyField, RcpError::invalid_params("recency.field", detail)))
}

/// `unit` (§7.7.2): falls back to the default unit.
pub fn unit(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let u = p.unit.as_deref()?;
    let advertised = rc.units();
    (!listed(u, advertised))
        .then(|| Finding::not_advertised(Gate::RetrieveUnit, u, advertised, Some("returning the default unit".into())))
}

/// `level` (§7.7.2): below the advertised `levels` (1 when absent); ignored otherwise.
pub fn level(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let level = p.level?;
    let levels = rc.level_count();
    (level >= levels).then(|| {
        Finding::feature_absent(Gate::RetrieveLevel, level.to_string(), format!("server advertises {levels} level(s)"))
    })
}

/// `tokenBudget` (§7.7.2): needs `retrieve.tokenBudget`; ignored otherwise.
pub fn token_budget(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let tb = p.token_budget?;
    (!rc.offers_token_budget()).then(|| {
        Finding::feature_absent(
            Gate::RetrieveTokenBudget,
            tb.to_string(),
            "server does not advertise retrieve.tokenBudget",
        )
    })
}

/// `indexVersion` (§7.7.1): needs `retrieve.snapshots`; ignored otherwise.
pub fn index_version(rc: &RetrieveCapability, p: &RetrieveParams) -> Option<Finding> {
    let v = p.index_version.as_deref()?;
    (!rc.offers_snapshots())
        .then(|| Finding::feature_absent(Gate::RetrieveIndexVersion, v, "server does not advertise retrieve.snapshots"))
}

/// `cursor` (§10): needs `pagination`; ignored otherwise.
pub fn cursor(caps: &Capabilities, p: &RetrieveParams) -> Option<Finding> {
    (p.cursor.is_some() && caps.pagination.is_none())
        .then(|| Finding::feature_absent(Gate::RetrieveCursor, "present", "server does not advertise pagination"))
}

/// `encoding` of hit vectors (§7.3.1): JSON numbers, following the schema's `Hit.vector`.
pub fn hit_encoding(p: &RetrieveParams) -> Option<Finding> {
    let e = p.encoding.as_deref()?;
    (!listed(e, hit_encodings())).then(|| {
        Finding::not_advertised(
            Gate::RetrieveEncoding,
            e,
            hit_encodings(),
            Some("hit vectors are sent as JSON numbers".into()),
        )
    })
}

/// Every finding of `retrieve` params (§7.7), in the order a server checks them. The filter
/// is validated here too; use [`filter`] to keep the validated tree.
pub fn retrieve(caps: &Capabilities, p: &RetrieveParams) -> Vec<Finding> {
    let rc = retrieve_capability(caps);
    let rc = rc.as_ref();
    let mut out = Vec::new();
    out.extend(modality(rc, p));
    out.extend(query_modality(Gate::RetrieveQueryModality, &p.query, rc.modalities()));
    out.extend(mode(rc, p));
    out.extend(fusion_method(rc, p));
    match inline_rerank(rc, p) {
        Some(f) => out.push(f),
        None => out.extend(inline_rerank_method(caps, p)),
    }
    out.extend(mmr(rc, p));
    out.extend(rewrite(caps, p));
    if let Some(raw) = &p.filter {
        out.extend(filter(caps, raw).err());
    }
    out.extend(recency_field(caps, p));
    out.extend(unit(rc, p));
    out.extend(level(rc, p));
    out.extend(token_budget(rc, p));
    out.extend(hit_encoding(p));
    out.extend(index_version(rc, p));
    out.extend(cursor(caps, p));
    out
}

// ---- embed (§7.3, §7.5), rerank (§7.6), index/add (§7.10), the other families ----

/// A vector `encoding` (§7.3.1): `json` always, else one of `advertised`; falls back to json.
pub fn encoding(requested: Option<&str>, advertised: &[String]) -> Option<Finding> {
    let e = requested.filter(|e| *e != "json")?;
    (!listed(e, advertised))
        .then(|| Finding::not_advertised(Gate::EmbedEncoding, e, advertised, Some("using json".into())))
}

/// The modality of input `index` of `field` (§4.8); no fallback.
pub fn input_modality(item: &InputItem, field: &str, index: usize, advertised: &[String]) -> Option<Finding> {
    let m = item.modality();
    (!listed(m, advertised)).then(|| {
        let mut path = String::from(field);
        let _ = write!(path, "[{index}]");
        Finding::not_advertised(Gate::EmbedModality, m, advertised, None).at(path)
    })
}

/// Every finding of `embed` params (§7.3): input modalities and the encoding.
pub fn embed(caps: &Capabilities, p: &EmbedParams) -> Vec<Finding> {
    let ec = caps.embed.clone().unwrap_or_default();
    let field = p.items_field();
    let mut out: Vec<Finding> =
        p.items().iter().enumerate().filter_map(|(i, item)| input_modality(item, field, i, ec.modalities())).collect();
    out.extend(encoding(p.encoding.as_deref(), ec.encodings()));
    out
}

/// The `rerank` method used when none is requested: the first advertised, else `cross-encoder`.
pub fn default_rerank_method(rc: &RerankCapability) -> &str {
    rc.methods.first().map_or("cross-encoder", String::as_str)
}

/// `rerank.method` (§7.6): falls back to the default method.
pub fn rerank_method(caps: &Capabilities, p: &RerankParams) -> Option<Finding> {
    let m = p.method.as_deref()?;
    let rc = caps.rerank.clone().unwrap_or_default();
    let fallback = format!("using '{}'", default_rerank_method(&rc));
    (!listed(m, &rc.methods)).then(|| Finding::not_advertised(Gate::RerankMethod, m, &rc.methods, Some(fallback)))
}

/// Every finding of `rerank` params (§7.6): a text query, and the method.
pub fn rerank(caps: &Capabilities, p: &RerankParams) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(mut f) = query_modality(Gate::RerankQueryModality, &p.query, default_modalities()) {
        f.fallback = None;
        out.push(f);
    }
    out.extend(rerank_method(caps, p));
    out
}

/// `index/add` options (§7.10): `chunk:true` needs `index.chunking`, `contextual:true`
/// needs `index.contextual`; no fallback.
pub fn index_add(caps: &Capabilities, p: &IndexAddParams) -> Vec<Finding> {
    let ic = caps.index.clone().unwrap_or_default();
    let mut out = Vec::new();
    if p.chunk == Some(true) && !ic.offers_chunking() {
        out.push(Finding::not_advertised(Gate::IndexChunk, "true", &[], None));
    }
    if p.contextual == Some(true) && !ic.offers_contextual() {
        out.push(Finding::not_advertised(Gate::IndexContextual, "true", &[], None));
    }
    out
}

/// `query/transform` `method` ⊆ `transform.methods` (§7.8).
pub fn transform(caps: &Capabilities, p: &TransformParams) -> Option<Finding> {
    one_of(Gate::TransformMethod, &p.method, caps.transform.as_ref().map(|t| t.methods.as_slice()).unwrap_or(&[]))
}

/// `graph` `op` ⊆ `graph.ops` (§7.9).
pub fn graph(caps: &Capabilities, p: &GraphParams) -> Option<Finding> {
    one_of(Gate::GraphOp, &p.op, caps.graph.as_ref().map(|g| g.ops.as_slice()).unwrap_or(&[]))
}

/// `memory/build` `scope` ⊆ `memory.scopes` (§7.17).
pub fn memory_build(caps: &Capabilities, p: &MemoryBuildParams) -> Option<Finding> {
    let scope = p.scope.as_deref()?;
    one_of(Gate::MemoryScope, scope, caps.memory.as_ref().map(|m| m.scopes.as_slice()).unwrap_or(&[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(v: Value) -> Capabilities {
        serde_json::from_value(v).expect("capabilities")
    }

    fn params(v: Value) -> RetrieveParams {
        serde_json::from_value(v).expect("params")
    }

    #[test]
    fn every_gate_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for g in Gate::ALL {
            assert!(seen.insert(g), "{g:?} listed twice");
            assert!(!g.option().is_empty());
        }
    }

    #[test]
    fn nothing_is_found_in_a_plain_request() {
        let c = caps(json!({"retrieve": {"modes": ["sparse"]}}));
        assert!(retrieve(&c, &params(json!({"query": "q", "k": 3, "mode": "sparse"}))).is_empty());
    }

    #[test]
    fn defaults_of_section_6_gate_units_and_modalities() {
        let c = caps(json!({"retrieve": {}}));
        assert!(retrieve(&c, &params(json!({"query": "q", "k": 1, "unit": "passage"}))).is_empty());
        let f = retrieve(&c, &params(json!({"query": "q", "k": 1, "unit": "document", "modality": "image"})));
        let gates: Vec<Gate> = f.iter().map(|f| f.gate).collect();
        assert_eq!(gates, [Gate::RetrieveModality, Gate::RetrieveUnit]);
        assert_eq!(f[1].advertised, ["chunk", "passage"]);
    }

    #[test]
    fn findings_carry_error_and_note() {
        let c = caps(json!({"retrieve": {"modes": ["sparse"]}}));
        let f = mode(c.retrieve.as_ref().unwrap(), &params(json!({"query": "q", "k": 1, "mode": "dense"}))).unwrap();
        assert_eq!(f.error().code, ErrorCode::OPTION_UNSUPPORTED);
        assert_eq!(f.error().option(), Some("mode"));
        assert_eq!(f.note().unwrap(), "mode 'dense' not advertised; using 'sparse'");
        assert!(f.refuses(true) && !f.refuses(false));
    }

    #[test]
    fn flags_levels_budget_snapshots_and_rewrite_are_gated() {
        let c = caps(json!({"retrieve": {}}));
        let p = params(json!({"query": "q", "k": 1, "level": 1, "tokenBudget": 100, "indexVersion": "v1",
            "rewrite": "hyde", "mmr": {"lambda": 0.5}, "rerank": true, "cursor": "c"}));
        let gates: Vec<Gate> = retrieve(&c, &p).iter().map(|f| f.gate).collect();
        assert_eq!(
            gates,
            [
                Gate::RetrieveRerank,
                Gate::RetrieveMmr,
                Gate::RetrieveRewrite,
                Gate::RetrieveLevel,
                Gate::RetrieveTokenBudget,
                Gate::RetrieveIndexVersion,
                Gate::RetrieveCursor
            ]
        );
        let level = &retrieve(&c, &p)[3];
        assert_eq!(level.note().unwrap(), "level ignored: server advertises 1 level(s)");
    }

    #[test]
    fn filter_operator_may_be_dropped_but_field_never() {
        let c = caps(json!({"retrieve": {}, "filter": {"fields": {"lang": "keyword"}, "operators": ["eq"]}}));
        let op = filter(&c, &json!({"field": "lang", "op": "ne", "value": "en"})).unwrap_err();
        assert!(op.fallback.is_some());
        assert_eq!(op.error().code, ErrorCode::OPTION_UNSUPPORTED);
        let field = filter(&c, &json!({"field": "year", "op": "eq", "value": 1})).unwrap_err();
        assert!(field.refuses(false));
        assert_eq!(field.error().code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn image_query_without_text_has_no_fallback() {
        let q: QueryInput = serde_json::from_value(json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}))
            .expect("image block");
        let f = query_modality(Gate::RetrieveQueryModality, &q, default_modalities()).unwrap();
        assert!(f.refuses(false));
    }

    #[test]
    fn method_gate_names_writable_index() {
        let c = caps(json!({"index": {"writable": false}}));
        assert_eq!(method(&c, Method::IndexAdd).unwrap_err().capability, INDEX_WRITABLE);
        assert!(method(&c, Method::IndexDelete).is_ok());
        assert_eq!(method(&c, Method::Retrieve).unwrap_err().capability, "retrieve");
    }

    #[test]
    fn embed_encoding_json_always_passes() {
        let c = caps(json!({"embed": {"dimension": 2, "identity": "m"}}));
        let mut p = EmbedParams::texts(["a"]);
        p.encoding = Some("json".into());
        assert!(embed(&c, &p).is_empty());
        p.encoding = Some("f32-base64".into());
        assert_eq!(embed(&c, &p)[0].note().unwrap(), "encoding 'f32-base64' not advertised; using json");
    }
}
