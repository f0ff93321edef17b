//! The `rerank` capability (§7.6) served by the cross-encoder. The framework validates the
//! request (passages beyond `maxCandidates` are -32602, an unadvertised method -32005 when
//! strict) and builds `order`, `results` and `topN` from the scores this handler returns.

use std::sync::Arc;

use rcp_protocol::RcpError;
use rcp_protocol::capabilities::RerankCapability;
use rcp_server::{HandlerResult, Lane, RequestContext, Rerank, RerankRequest};

use crate::cross_encoder::{CrossEncoder, CrossEncoderError};

/// The method this engine offers (§7.6).
pub const METHOD: &str = "cross-encoder";

/// What the engine advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// `rerank.maxCandidates`: most passages per call.
    pub max_candidates: u32,
    /// The model identity, in `rerank.models`.
    pub model: String,
}

/// The reranking engine: one cross-encoder behind the `rerank` capability.
#[derive(Debug)]
pub struct RerankEngine {
    encoder: Arc<CrossEncoder>,
    options: EngineOptions,
}

impl RerankEngine {
    /// An engine scoring with `encoder`.
    pub fn new(encoder: Arc<CrossEncoder>, options: EngineOptions) -> Self {
        Self { encoder, options }
    }
}

impl Rerank for RerankEngine {
    fn capability(&self) -> RerankCapability {
        RerankCapability {
            methods: vec![METHOD.to_owned()],
            max_candidates: Some(self.options.max_candidates),
            models: Some(vec![self.options.model.clone()]),
            ..Default::default()
        }
    }

    async fn rerank(&self, req: RerankRequest, ctx: RequestContext) -> HandlerResult<Vec<f64>> {
        if let Some(model) = req.model.as_deref()
            && model != self.options.model
        {
            return Err(RcpError::invalid_params(
                "model",
                format!("model '{model}' not offered; offered: {}", self.options.model),
            ));
        }
        let query = req.query.text();
        let passages: Vec<String> = req.passages.iter().map(|p| p.text().to_owned()).collect();
        let encoder = Arc::clone(&self.encoder);
        let task_ctx = ctx.clone();
        let scores =
            ctx.run_cpu(Lane::Read, move || encoder.score(&query, &passages, &|| task_ctx.is_cancelled())).await?;
        match scores {
            Ok(scores) => Ok(scores.into_iter().map(f64::from).collect()),
            Err(CrossEncoderError::Cancelled) => Err(RcpError::cancelled(Some("stopped between pairs"))),
            Err(e) => Err(RcpError::backend_unavailable(chain(&e))),
        }
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
