//! `retrieve` (§7.7): the resolved request an engine receives, the params it declares it
//! honours, and its trait.

use std::future::Future;
use std::sync::Arc;

use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::content::QueryInput;
use rcp_wire::filter::{Filter, FilterCapability};
use rcp_wire::retrieve::{FusionParams, MmrParams, Recency, RerankOption, RewriteOption, Unit};
use rcp_wire::{Meta, Mode, RetrieveParams, RetrieveResult};

use super::HandlerResult;
use crate::handler::context::RequestContext;

/// A `retrieve` request resolved by the framework (§7.7): validated against the advertised
/// capabilities, with every default the spec, the capability or the server's settings fix
/// applied once. An engine reads these fields as they are; none that has a default is an
/// `Option`, and `k` is held once.
///
/// [`RetrieveRequest::to_params`] gives the wire form back, for an engine that forwards the
/// request to another server (the gateway does).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetrieveRequest {
    /// The query (§4.8): a string, a block, or blocks of an advertised modality.
    pub query: QueryInput,
    /// How many hits to return: `k` clamped to `maxK`, at least 1 (the framework truncates
    /// to it).
    pub k: usize,
    /// How many candidates the recall stage gathers: `candidateK` clamped to `maxK`, by default
    /// `max(k, 100)` clamped likewise; never below `k`.
    pub candidate_k: usize,
    /// The mode that runs: the client's when advertised, else the advertised default (also
    /// under a `strict:false` fallback). `None` only for an engine that advertises no modes.
    pub mode: Option<Mode>,
    /// Fusion of the hybrid lists (§16.3), with an advertised method.
    pub fusion: Option<FusionParams>,
    /// The metadata filter (§8), validated against the advertised fields and operators; the
    /// engine applies it.
    pub filter: Option<Filter>,
    /// Hits scoring below this, on the engine's own scale, are left out. The engine applies it
    /// before it cuts a page; the framework drops what an engine left in (and then the page's
    /// `nextCursor`).
    pub min_score: Option<f64>,
    /// Recency decay on an advertised date field, its half-life resolved; present only for an
    /// engine that honours `recency` ([`Honours`]).
    pub recency: Option<RecencyDecay>,
    /// The requested granularity (§7.7.2), an advertised one; `None` means the engine's own.
    pub unit: Option<Unit>,
    /// The abstraction level (§7.7.2), below the advertised `levels`.
    pub level: Option<u32>,
    /// MMR diversification, when advertised.
    pub mmr: Option<MmrParams>,
    /// The transform method to rewrite the query with inline (§7.8), an advertised one;
    /// `None` when absent or `rewrite: false`.
    pub rewrite: Option<String>,
    /// Whether hits carry `text` (default `true`). The framework strips text after the engine
    /// answers when `false`; an engine may skip loading it.
    pub include_text: bool,
    /// Whether hits carry `vector` (default `false`); `true` only for an engine that honours
    /// `includeVectors` ([`Honours`]).
    pub include_vectors: bool,
    /// The encoding of hit vectors (§7.3.1), when asked for.
    pub encoding: Option<String>,
    /// The page to continue from (§10): the engine's own cursor; `None` for the first page
    /// (an empty cursor is no cursor).
    pub cursor: Option<String>,
    /// The agentic trajectory handle (§7.7.3).
    pub session_id: Option<String>,
    /// The determinism seed (§7.7.1).
    pub seed: Option<i64>,
    /// A pinned corpus snapshot (§7.7.1), when advertised.
    pub index_version: Option<String>,
    /// The token budget (§7.7.2); the framework packs hits to it when it has a tokenizer.
    pub token_budget: Option<u64>,
    /// Whether unsupported options are refused (`true`, the default) or degraded (§7.7).
    pub strict: bool,
    /// The request's `_meta` (§4.4).
    pub meta: Option<Meta>,
    /// What only a forwarding engine needs, carried for [`Self::to_params`].
    pub(crate) passthrough: Passthrough,
}

/// The wire options of a `retrieve` request that the framework acts on itself and an engine
/// never reads: kept so that [`RetrieveRequest::to_params`] gives back what was sent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Passthrough {
    /// `modality`, as sent.
    pub(crate) modality: Option<String>,
    /// The inline rerank stage (§3.3), which the framework runs around the engine.
    pub(crate) rerank: Option<RerankOption>,
    /// Whether the client set `candidateK` (the rerank stage then recalls that many).
    pub(crate) explicit_candidate_k: bool,
}

/// `recency` (§7.7) as the engine applies it: decay scores on `field` with a resolved
/// half-life.
#[derive(Debug, Clone, PartialEq)]
pub struct RecencyDecay {
    /// The advertised `date` field to decay on.
    pub field: String,
    /// The half-life of the decay, in days (the client's, or the default of 30).
    pub half_life_days: f64,
}

impl RetrieveRequest {
    /// A request as the framework resolves `{"query": query, "k": k}` with no other option:
    /// for tests and for in-process callers that build a request themselves.
    pub fn new(query: impl Into<QueryInput>, k: usize) -> Self {
        let k = k.max(1);
        Self {
            query: query.into(),
            k,
            candidate_k: k.max(100),
            mode: None,
            fusion: None,
            filter: None,
            min_score: None,
            recency: None,
            unit: None,
            level: None,
            mmr: None,
            rewrite: None,
            include_text: true,
            include_vectors: false,
            encoding: None,
            cursor: None,
            session_id: None,
            seed: None,
            index_version: None,
            token_budget: None,
            strict: true,
            meta: None,
            passthrough: Passthrough::default(),
        }
    }

    /// The wire form of this request, every resolved default written out: what an engine that
    /// forwards the request sends on.
    pub fn to_params(&self) -> RetrieveParams {
        let mut p = RetrieveParams::new(self.query.clone(), self.k as u64);
        p.candidate_k = self.passthrough.explicit_candidate_k.then_some(self.candidate_k as u64);
        p.mode = self.mode.clone();
        p.modality = self.passthrough.modality.clone();
        p.fusion = self.fusion.clone();
        p.rerank = self.passthrough.rerank.clone();
        p.mmr = self.mmr;
        p.rewrite = self.rewrite.clone().map(RewriteOption::Method);
        p.filter = self.filter.as_ref().map(Filter::to_value);
        p.min_score = self.min_score;
        p.recency =
            self.recency.as_ref().map(|r| Recency { field: r.field.clone(), half_life_days: Some(r.half_life_days) });
        p.unit = self.unit.map(|u| u.as_str().to_owned());
        p.level = self.level;
        p.token_budget = self.token_budget;
        p.session_id = self.session_id.clone();
        p.include_text = (!self.include_text).then_some(false);
        p.include_vectors = self.include_vectors.then_some(true);
        p.encoding = self.encoding.clone();
        p.seed = self.seed;
        p.index_version = self.index_version.clone();
        p.strict = (!self.strict).then_some(false);
        p.cursor = self.cursor.clone();
        p.meta = self.meta.clone();
        p
    }

    /// The `rerank` option as sent (the framework's inline stage reads it).
    pub(crate) fn rerank_option(&self) -> Option<&RerankOption> {
        self.passthrough.rerank.as_ref()
    }
}

/// The optional `retrieve` params that no capability flag of the spec gates (§7.7) and that
/// only the engine can honour. Each one an engine does not declare is refused by the framework
/// (`-32005` naming it; under `strict:false` dropped and noted in `usage.notes`), so no request
/// field is silently ignored. The framework itself honours `minScore` and `includeText` for
/// every engine, and notes a `sessionId` or `seed` it cannot use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Honours {
    /// `recency` (§7.7): the engine decays scores on the declared date field (the bundled
    /// engines apply `rcp_corpus::recency`).
    pub recency: bool,
    /// `includeVectors` (§7.7): hits carry their vectors when asked.
    pub include_vectors: bool,
}

impl Honours {
    /// The `retrieve` capability key listing the honoured params (an `x-` extension key, §6.2),
    /// so a client can see them too.
    pub const KEY: &'static str = RetrieveCapability::HONOURS_KEY;

    /// Nothing beyond what the framework honours.
    pub const NONE: Self = Self { recency: false, include_vectors: false };

    /// `recency` honoured.
    pub const fn with_recency(mut self) -> Self {
        self.recency = true;
        self
    }

    /// `includeVectors` honoured.
    pub const fn with_vectors(mut self) -> Self {
        self.include_vectors = true;
        self
    }

    /// The wire names of the honoured params, as advertised under [`Self::KEY`].
    pub fn names(&self) -> Vec<&'static str> {
        [(self.recency, Self::RECENCY), (self.include_vectors, Self::INCLUDE_VECTORS)]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect()
    }

    /// What a list of wire names (as [`Self::names`] writes them, e.g. another server's
    /// advertisement) declares honoured; unknown names are ignored.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        names.into_iter().fold(Self::NONE, |h, name| match name {
            Self::RECENCY => h.with_recency(),
            Self::INCLUDE_VECTORS => h.with_vectors(),
            _ => h,
        })
    }

    const RECENCY: &'static str = "recency";
    const INCLUDE_VECTORS: &'static str = "includeVectors";
}

/// `retrieve`: run the retrieval pipeline and return ranked hits (§7.7).
pub trait Retrieve: Send + Sync + 'static {
    /// The `retrieve` capability metadata (§6.1).
    fn capability(&self) -> RetrieveCapability;

    /// The `filter` capability (§8), when `retrieve.filter` is supported.
    fn filter(&self) -> Option<FilterCapability> {
        None
    }

    /// Whether results support `cursor`/`nextCursor` (§10).
    fn pagination(&self) -> bool {
        false
    }

    /// Whether hits carry `citation`/`trust` (§6).
    fn citations(&self) -> bool {
        false
    }

    /// The optional params no capability flag gates that this engine honours ([`Honours`]);
    /// the framework refuses the others.
    fn honours(&self) -> Honours {
        Honours::NONE
    }

    /// The `meta` key of a hit's title, which the framework's rerank stage puts before the
    /// hit's text ([`crate::Funnel::passage`]); `"title"` unless the engine keeps it elsewhere.
    fn title_field(&self) -> &str {
        crate::Funnel::DEFAULT_TITLE_FIELD
    }

    /// Serves one request. At most `request.k` hits are returned (the framework truncates).
    fn retrieve(
        &self,
        request: RetrieveRequest,
        ctx: RequestContext,
    ) -> impl Future<Output = HandlerResult<RetrieveResult>> + Send;
}

// `Arc<T>` forwards the trait, so one engine can be registered for several capabilities.
impl<T: Retrieve> Retrieve for Arc<T> {
    fn capability(&self) -> RetrieveCapability {
        (**self).capability()
    }
    fn filter(&self) -> Option<FilterCapability> {
        (**self).filter()
    }
    fn pagination(&self) -> bool {
        (**self).pagination()
    }
    fn citations(&self) -> bool {
        (**self).citations()
    }
    fn honours(&self) -> Honours {
        (**self).honours()
    }
    fn title_field(&self) -> &str {
        (**self).title_field()
    }
    fn retrieve(
        &self,
        r: RetrieveRequest,
        c: RequestContext,
    ) -> impl Future<Output = HandlerResult<RetrieveResult>> + Send {
        (**self).retrieve(r, c)
    }
}

#[cfg(test)]
mod tests {
    use super::Honours;

    #[test]
    fn honoured_names_read_back_as_written() {
        for h in [
            Honours::NONE,
            Honours::NONE.with_recency(),
            Honours::NONE.with_vectors(),
            Honours::NONE.with_recency().with_vectors(),
        ] {
            assert_eq!(Honours::from_names(h.names()), h);
        }
        assert_eq!(Honours::from_names(["recency", "seed"]), Honours::NONE.with_recency(), "unknown names are ignored");
    }
}
