//! The `rerank` capability (§7.6) served by the cross-encoder and/or ColBERT. The framework
//! validates the request (passages beyond `maxCandidates` are -32602, an unadvertised method
//! -32005 when strict) and builds `order`, `results` and `topN` from the scores this handler
//! returns.

use std::sync::Arc;

use rcp_server::{HandlerResult, Lane, RequestContext, Rerank, RerankRequest};
use rcp_wire::RcpError;
use rcp_wire::capabilities::RerankCapability;

use crate::colbert::Colbert;
use crate::cross_encoder::CrossEncoder;
use crate::matrices::MatrixStore;
use crate::onnx::EncoderError;

/// A loaded reranking model.
#[derive(Debug, Clone)]
pub enum Reranker {
    /// The cross-encoder: one logit per (query, passage) pair.
    CrossEncoder(Arc<CrossEncoder>),
    /// ColBERT: MaxSim of the query's and the passage's token matrices, the passages'
    /// matrices taken from a store when one is given ([`MatrixStore`]).
    Colbert(Arc<Colbert>, Option<Arc<MatrixStore>>),
}

impl Reranker {
    /// Its `rerank` method name (§7.6).
    pub fn method(&self) -> &'static str {
        match self {
            Self::CrossEncoder(_) => CrossEncoder::METHOD,
            Self::Colbert(..) => Colbert::METHOD,
        }
    }

    /// One score per passage, in order (blocking CPU work). With `keep`, ColBERT keeps the
    /// matrices it had to encode in its store.
    fn score(
        &self,
        query: &str,
        passages: &[String],
        keep: bool,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<f32>, EncoderError> {
        match self {
            Self::CrossEncoder(m) => m.score(query, passages, cancelled),
            Self::Colbert(m, None) => m.score(query, passages, cancelled),
            Self::Colbert(m, Some(store)) => m.score_stored(query, passages, store, keep, cancelled),
        }
    }
}

/// A model the engine offers and the identity it is advertised under (in `rerank.models`).
#[derive(Debug, Clone)]
pub struct Offered {
    /// The model.
    pub reranker: Reranker,
    /// Its identity.
    pub identity: String,
}

/// What the engine advertises besides its models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// `rerank.maxCandidates`: most passages per call.
    pub max_candidates: u32,
}

/// The reranking engine: the cross-encoder and/or ColBERT behind the `rerank` capability;
/// `methods` and `models` list exactly the models it was given, in that order.
#[derive(Debug)]
pub struct RerankEngine {
    offered: Vec<Offered>,
    options: EngineOptions,
}

impl RerankEngine {
    /// An engine scoring with `offered` (at least one model is expected).
    pub fn new(offered: Vec<Offered>, options: EngineOptions) -> Self {
        Self { offered, options }
    }
}

impl Rerank for RerankEngine {
    fn capability(&self) -> RerankCapability {
        RerankCapability {
            methods: self.offered.iter().map(|o| o.reranker.method().to_owned()).collect(),
            max_candidates: Some(self.options.max_candidates),
            models: Some(self.offered.iter().map(|o| o.identity.clone()).collect()),
            ..Default::default()
        }
    }

    async fn rerank(&self, req: RerankRequest, ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        let Some(offered) = self.offered.iter().find(|o| o.reranker.method() == req.method) else {
            let methods: Vec<&str> = self.offered.iter().map(|o| o.reranker.method()).collect();
            return Err(RcpError::option_unsupported("method", &req.method, &methods));
        };
        if let Some(model) = req.model.as_deref()
            && model != offered.identity
        {
            return Err(RcpError::invalid_params(
                "model",
                format!("model '{model}' not offered for method '{}'; offered: {}", req.method, offered.identity),
            ));
        }
        // Matrices are kept only for the engine's own documents (the inline stage of
        // `retrieve`), so a peer's `rerank` passages never grow the store.
        let keep = ctx.method() == "retrieve";
        let query = req.query.text();
        let passages: Vec<String> = req.passages.iter().map(|p| p.text().to_owned()).collect();
        let reranker = offered.reranker.clone();
        let task_ctx = ctx.clone();
        let scores = ctx
            .run_cpu(Lane::Read, move || reranker.score(&query, &passages, keep, &|| task_ctx.is_cancelled()))
            .await?;
        scores.map(|s| s.into_iter().map(f64::from).collect()).map_err(encoder_error)
    }

    /// The method's Platt map fitted on Cranfield ([`crate::calibration`]).
    fn confidence(&self, method: &str, score: f64) -> Option<f64> {
        crate::calibration::map(method).map(|m| m.apply(score))
    }
}

/// The JSON-RPC error of a model failure: a cancellation is -32800, anything else means the
/// model could not serve the request.
pub(crate) fn encoder_error(e: EncoderError) -> RcpError {
    match e {
        EncoderError::Cancelled => RcpError::cancelled(Some("stopped between texts")),
        e => RcpError::backend_unavailable(chain(&e)),
    }
}

/// An error and its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
